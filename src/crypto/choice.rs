//! Which implementation runs each AES operation: an [`ImplTable`], measured on the machine
//! ([`ImplTable::measured`]) or pinned ([`ImplTable::pinned`]). A service builds one when it
//! starts and its nodes run every AES packet on the implementation the table names for the
//! packet's operation (docs/ALGORITHM.md §15.3).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::crypto::aes::{AesKey, AesOp, BLOCK, Direction};
use crate::crypto::error::CryptoError;
use crate::crypto::impls::{AesImpl, Measured, measure_gcm_chain, measure_these};
use crate::packet::Mode;

/// The implementation chosen for one AES operation, and what it was chosen by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImplChoice {
    /// The operation (mode and direction; padding does not change the choice).
    pub op: AesOp,
    /// The implementation its packets run on.
    pub implementation: AesImpl,
    /// Its measured time per byte, in nanoseconds (for the lanes, per byte of a full set); `None`
    /// when the choice was pinned rather than measured.
    pub ns_per_byte: Option<f64>,
    /// The measured time per byte of RustCrypto on its own path, for comparison; `None` when
    /// pinned.
    pub rustcrypto_ns_per_byte: Option<f64>,
    /// Whether this is the choice for the packets of GCM jobs cut into several, which hand a
    /// GHASH state on ([`ImplTable::gcm_chain`]), rather than for `op`'s packets.
    pub chained: bool,
    /// The implementation a packet of `op` runs on by itself: one packet, or a chain run of
    /// one job's packets ([`ImplTable::alone`]). The same as `implementation` unless that is a
    /// lane set, which one stream cannot fill: then the fastest of the other implementations
    /// measured (RustCrypto's single-stream loop, AWS-LC, OpenSSL), or RustCrypto when pinned.
    pub alone: AesImpl,
}

impl ImplChoice {
    /// The operation as metrics label it: [`op_name`], with `-chained` for the packets of GCM
    /// jobs cut into several (`gcm-encrypt-chained`).
    pub fn label(&self) -> String {
        let name = op_name(self.op);
        if self.chained {
            format!("{name}-chained")
        } else {
            name
        }
    }
}

impl fmt::Display for ImplChoice {
    /// `cbc-encrypt lanes-16 (0.28 ns/B)`, or without the figure when pinned, and `, alone
    /// aws-lc` when a packet by itself runs on another implementation ([`ImplChoice::alone`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.label(), self.implementation)?;
        if let Some(ns) = self.ns_per_byte {
            write!(f, " ({ns:.3} ns/B)")?;
        }
        if self.alone != self.implementation {
            write!(f, ", alone {}", self.alone)?;
        }
        Ok(())
    }
}

/// An operation's name as metrics print it: `cbc-encrypt`, `gcm-decrypt`, ...
pub fn op_name(op: AesOp) -> String {
    let direction = match op.direction {
        Direction::Encrypt => "encrypt",
        Direction::Decrypt => "decrypt",
    };
    format!("{}-{direction}", op.mode.as_str())
}

/// The directions of a table's GCM chain choices, in their order.
const GCM_DIRECTIONS: [Direction; 2] = [Direction::Encrypt, Direction::Decrypt];

/// The number of (mode, direction) pairs a table holds.
const OPS: usize = Mode::ALL.len() * 2;

/// The slot of an operation in a table: mode by mode in the order of [`Mode::ALL`], encryption
/// before decryption (a test checks the two orders agree), GCM's two last.
pub(super) fn slot(op: AesOp) -> usize {
    let mode = match op.mode {
        Mode::Ecb => 0,
        Mode::Cbc => 1,
        Mode::Ofb => 2,
        Mode::Cfb => 3,
        Mode::Ctr => 4,
        Mode::Gcm => 5,
    };
    mode * 2 + usize::from(op.direction == Direction::Decrypt)
}

/// Every (mode, direction) pair, in slot order.
fn all_ops() -> impl Iterator<Item = AesOp> {
    Mode::ALL.into_iter().flat_map(|mode| {
        [Direction::Encrypt, Direction::Decrypt]
            .into_iter()
            .map(move |direction| AesOp::new(direction, mode))
    })
}

/// For each AES operation (mode and direction), the implementation its packets run on: pinned
/// for every operation at once ([`pinned`](Self::pinned), [`rustcrypto`](Self::rustcrypto)),
/// or measured on the machine ([`measured`](Self::measured)), each operation the first time
/// it is asked for, so that a program pays only for the operations it runs (about half a
/// millisecond each on the machine the project is measured on).
///
/// Every implementation gives the same bytes and hands on the same chaining state, so a table
/// changes only speed: a job cut into packets may have them run on different implementations.
/// A table is shared between threads; an operation is measured once, by the first thread to
/// ask, while others asking for it wait.
#[derive(Debug)]
pub struct ImplTable {
    slots: [OnceLock<ImplChoice>; OPS],
    /// For GCM encryption and decryption, the implementation the packets of a job cut into
    /// several run on.
    chains: [OnceLock<ImplChoice>; 2],
    /// The packet size measured at; 0 for a pinned table.
    packet: usize,
}

impl ImplTable {
    /// The rounds a measurement times each implementation for: fewer than
    /// [`MEASURE_ROUNDS`](crate::crypto::MEASURE_ROUNDS), as it runs on a job's first
    /// submission.
    pub const ROUNDS: usize = 3;

    /// The largest packet a measurement times: per byte, the implementations' order no longer
    /// changes beyond it, and a lane set of 64 packets of 16 MiB would take seconds to time.
    pub const MAX_MEASURE_PACKET: usize = 4096;

    /// The least data one timed sample of a measurement runs: 16 KiB, 4 to 16 µs on the
    /// machine the project is measured on, long beside the clock's own cost.
    pub const SAMPLE_BYTES: usize = 16 * 1024;

    /// How much slower than the fastest a narrower lane set may measure and still be chosen
    /// over it: a wider set needs more serial packets at once to fill, and widths 8 to 64 are
    /// often within the measurement's noise of each other.
    pub const NARROWER_LANES_SLACK: f64 = 1.05;

    /// RustCrypto for every operation, with no lanes.
    pub fn rustcrypto() -> Self {
        Self::fixed(|_| AesImpl::RustCrypto, AesImpl::RustCrypto)
    }

    fn fixed(choose: impl Fn(AesOp) -> AesImpl, chain: AesImpl) -> Self {
        let ops: Vec<AesOp> = all_ops().collect();
        let pinned = |op, implementation, chained| ImplChoice {
            op,
            implementation,
            ns_per_byte: None,
            rustcrypto_ns_per_byte: None,
            chained,
            alone: match implementation {
                AesImpl::Lanes { .. } => AesImpl::RustCrypto,
                other => other,
            },
        };
        ImplTable {
            slots: std::array::from_fn(|i| OnceLock::from(pinned(ops[i], choose(ops[i]), false))),
            chains: std::array::from_fn(|i| {
                OnceLock::from(pinned(
                    AesOp::new(GCM_DIRECTIONS[i], Mode::Gcm),
                    chain,
                    true,
                ))
            }),
            packet: 0,
        }
    }

    /// `implementation` for every operation it runs ([`AesImpl::runs`]), RustCrypto for the
    /// others (the lanes run only the serial operations); the packets of GCM jobs cut into
    /// several on `implementation` if it [chains GCM](AesImpl::chains_gcm), else on
    /// RustCrypto. For experiments and comparisons.
    ///
    /// # Errors
    /// [`CryptoError::ImplementationUnavailable`] for AWS-LC, ring or OpenSSL without its feature,
    /// [`CryptoError::LaneWidth`] for lanes of a width out of range.
    pub fn pinned(implementation: AesImpl) -> Result<Self, CryptoError> {
        if let AesImpl::Lanes { width } = implementation {
            crate::crypto::lanes::check_width(width)?;
        }
        if !implementation.is_built() {
            return Err(implementation.unavailable("a pinned table (its feature is off)"));
        }
        let chain = if implementation.chains_gcm() {
            implementation
        } else {
            AesImpl::RustCrypto
        };
        Ok(Self::fixed(
            |op| {
                if implementation.runs(op) {
                    implementation
                } else {
                    AesImpl::RustCrypto
                }
            },
            chain,
        ))
    }

    /// A table that measures each operation the first time it is asked for
    /// ([`get`](Self::get)), on packets of `packet` bytes (a non-zero multiple of 16; at most
    /// [`MAX_MEASURE_PACKET`](Self::MAX_MEASURE_PACKET) are timed), on the asking thread,
    /// [`ROUNDS`](Self::ROUNDS) rounds each, and keeps the fastest. [`measure_all`] measures
    /// every operation at once.
    ///
    /// Lane widths are tried narrowest first ([`LANE_WIDTHS`](crate::crypto::LANE_WIDTHS)): a
    /// wider set is timed only while each width beats the one before it by more than
    /// [`NARROWER_LANES_SLACK`](Self::NARROWER_LANES_SLACK), and of the widths timed the
    /// narrowest within that slack of the fastest is chosen, since a wider set needs more
    /// serial packets at once to fill. OFB and CTR decryption are the same computation as their
    /// encryption and take its choice.
    ///
    /// [`measure_all`]: Self::measure_all
    ///
    /// # Errors
    /// [`CryptoError::MeasurePacket`] unless `packet` is a non-zero multiple of 16 bytes.
    pub fn measured(packet: usize) -> Result<Self, CryptoError> {
        if packet == 0 || packet % BLOCK != 0 {
            return Err(CryptoError::MeasurePacket { len: packet });
        }
        Ok(ImplTable {
            slots: std::array::from_fn(|_| OnceLock::new()),
            chains: std::array::from_fn(|_| OnceLock::new()),
            packet: packet.min(Self::MAX_MEASURE_PACKET),
        })
    }

    /// The process's measured table for packets of `packet` bytes: one per packet size
    /// (packets beyond [`MAX_MEASURE_PACKET`](Self::MAX_MEASURE_PACKET) share that size's),
    /// made on first use and shared by every service built with that packet size, and by any
    /// caller that wants to run what the services run. The nodes of one machine share its CPU,
    /// so one measurement serves them all, and measuring again would cost every service built
    /// after the first. A packet size that is not a positive multiple of 16 gets a table of
    /// RustCrypto for every operation.
    pub fn shared(packet: usize) -> Arc<ImplTable> {
        static TABLES: Mutex<Vec<Arc<ImplTable>>> = Mutex::new(Vec::new());
        let Ok(table) = ImplTable::measured(packet) else {
            return Arc::new(ImplTable::rustcrypto());
        };
        let mut tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = tables.iter().find(|t| t.packet == table.packet) {
            return Arc::clone(shared);
        }
        let table = Arc::new(table);
        tables.push(Arc::clone(&table));
        table
    }

    /// Measures every operation not measured yet (see [`measured`](Self::measured)), and the
    /// packets of GCM jobs cut into several ([`gcm_chain`](Self::gcm_chain)).
    pub fn measure_all(&self) -> &Self {
        for op in all_ops() {
            self.get(op);
        }
        for direction in GCM_DIRECTIONS {
            self.gcm_chain(direction);
        }
        self
    }

    /// The implementation `op`'s packets run on; measured first if the table measures and
    /// `op` has not been.
    #[inline]
    pub fn get(&self, op: AesOp) -> AesImpl {
        self.choice(op).implementation
    }

    /// The implementation a packet of `op` runs on by itself, one packet or a chain run of one
    /// job's packets ([`ImplChoice::alone`]): `op`'s choice unless that is a lane set; measured
    /// first as [`get`](Self::get) is.
    #[inline]
    pub fn alone(&self, op: AesOp) -> AesImpl {
        self.choice(op).alone
    }

    /// `op`'s choice, measured first if the table measures and `op` has not been.
    pub fn choice(&self, op: AesOp) -> ImplChoice {
        let i = slot(op);
        *self.slots[i].get_or_init(|| {
            let op = AesOp::new(op.direction, op.mode);
            let same_as_encryption =
                op.direction == Direction::Decrypt && matches!(op.mode, Mode::Ofb | Mode::Ctr);
            if same_as_encryption {
                let encryption = self.choice(AesOp::new(Direction::Encrypt, op.mode));
                return ImplChoice { op, ..encryption };
            }
            measure_op(op, self.packet).unwrap_or(ImplChoice {
                op,
                implementation: AesImpl::RustCrypto,
                ns_per_byte: None,
                rustcrypto_ns_per_byte: None,
                chained: false,
                alone: AesImpl::RustCrypto,
            })
        })
    }

    /// The implementation the packets of a GCM job cut into several run on, sealing or opening
    /// as `direction` says: of those that [chain GCM](AesImpl::chains_gcm) (RustCrypto, and
    /// OpenSSL with the `openssl` feature), the fastest on a running state, measured the first
    /// time it is asked for, as [`get`](Self::get) measures an operation. A job of one packet
    /// runs on [`get`](Self::get)'s choice instead.
    #[inline]
    pub fn gcm_chain(&self, direction: Direction) -> AesImpl {
        self.gcm_chain_choice(direction).implementation
    }

    /// [`gcm_chain`](Self::gcm_chain)'s choice, with its figures.
    pub fn gcm_chain_choice(&self, direction: Direction) -> ImplChoice {
        let i = usize::from(direction == Direction::Decrypt);
        *self.chains[i].get_or_init(|| {
            let op = AesOp::new(direction, Mode::Gcm);
            let rustcrypto = ImplChoice {
                op,
                implementation: AesImpl::RustCrypto,
                ns_per_byte: None,
                rustcrypto_ns_per_byte: None,
                chained: true,
                alone: AesImpl::RustCrypto,
            };
            let Ok(key) = AesKey::new(&[0x6b; 16]) else {
                return rustcrypto;
            };
            let candidates = AesImpl::gcm_chain_candidates();
            let Ok(measured) = measure_gcm_chain(
                &key,
                direction,
                self.packet,
                Self::ROUNDS,
                Self::SAMPLE_BYTES,
                &candidates,
            ) else {
                return rustcrypto;
            };
            let fastest = measured
                .first()
                .map_or(AesImpl::RustCrypto, |m| m.implementation);
            ImplChoice {
                implementation: fastest,
                alone: fastest,
                ns_per_byte: measured.first().map(|m| m.ns_per_byte),
                rustcrypto_ns_per_byte: measured
                    .iter()
                    .find(|m| m.implementation == AesImpl::RustCrypto)
                    .map(|m| m.ns_per_byte),
                ..rustcrypto
            }
        })
    }

    /// The choices made so far (every operation's, for a pinned table), mode by mode,
    /// encryption before decryption; then the choices for the packets of GCM jobs cut into
    /// several ([`gcm_chain`](Self::gcm_chain)) made so far.
    pub fn choices(&self) -> Vec<ImplChoice> {
        self.slots
            .iter()
            .chain(&self.chains)
            .filter_map(|s| s.get().copied())
            .collect()
    }

    /// The packet size the table measures at (0 when pinned).
    pub fn packet(&self) -> usize {
        self.packet
    }

    /// Whether the table measures (rather than being pinned).
    pub fn is_measured(&self) -> bool {
        self.packet > 0
    }

    /// The lane-set width `op`'s choice asks for: the lanes' width, or 1 for any other
    /// implementation (its packets run one at a time).
    #[inline]
    pub fn lane_width(&self, op: AesOp) -> usize {
        match self.get(op) {
            AesImpl::Lanes { width } => width,
            _ => 1,
        }
    }
}

/// Times the implementations of `op` and returns its choice: the candidates other than the
/// lanes, and lane widths narrowest first while each beats the one before by more than the
/// slack.
fn measure_op(op: AesOp, packet: usize) -> Result<ImplChoice, CryptoError> {
    // The measurement's own key: its bytes never leave this function and are zeroized with it.
    let key = &AesKey::new(&[0x6b; 16])?;
    let rounds = ImplTable::ROUNDS;
    let candidates = AesImpl::candidates(op);
    let (lanes, others): (Vec<AesImpl>, Vec<AesImpl>) = candidates
        .into_iter()
        .partition(|i| matches!(i, AesImpl::Lanes { .. }));
    let mut measured = measure_these(key, op, packet, rounds, ImplTable::SAMPLE_BYTES, &others)?;
    let mut narrower: Option<Measured> = None;
    for lane in lanes {
        let m = measure_these(key, op, packet, rounds, ImplTable::SAMPLE_BYTES, &[lane])?;
        let Some(&m) = m.first() else { break };
        measured.push(m);
        let gains = narrower
            .is_none_or(|n| m.ns_per_byte * ImplTable::NARROWER_LANES_SLACK < n.ns_per_byte);
        if !gains {
            break;
        }
        narrower = Some(m);
    }
    measured.sort_by(|a, b| a.ns_per_byte.total_cmp(&b.ns_per_byte));
    let best = pick(&measured);
    let alone = pick_alone(&measured);
    Ok(ImplChoice {
        op,
        chained: false,
        implementation: best.map_or(AesImpl::RustCrypto, |b| b.implementation),
        alone,
        ns_per_byte: best.map(|b| b.ns_per_byte),
        rustcrypto_ns_per_byte: measured
            .iter()
            .find(|m| m.implementation == AesImpl::RustCrypto)
            .map(|m| m.ns_per_byte),
    })
}

/// The choice among `measured` (fastest first): the fastest, except that when it is a lane
/// set, the narrowest lane set within [`ImplTable::NARROWER_LANES_SLACK`] of it.
fn pick(measured: &[Measured]) -> Option<Measured> {
    let best = *measured.first()?;
    if !matches!(best.implementation, AesImpl::Lanes { .. }) {
        return Some(best);
    }
    let width = |m: &Measured| match m.implementation {
        AesImpl::Lanes { width } => Some(width),
        _ => None,
    };
    measured
        .iter()
        .filter(|m| m.ns_per_byte <= best.ns_per_byte * ImplTable::NARROWER_LANES_SLACK)
        .filter(|m| width(m).is_some())
        .min_by_key(|m| width(m))
        .copied()
}

/// The choice among `measured` (fastest first) for a packet by itself: the fastest that is not
/// a lane set (a lane set of one is RustCrypto's single-stream loop, timed as RustCrypto).
fn pick_alone(measured: &[Measured]) -> AesImpl {
    measured
        .iter()
        .find(|m| !matches!(m.implementation, AesImpl::Lanes { .. }))
        .map_or(AesImpl::RustCrypto, |m| m.implementation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::aes::Padding;

    #[test]
    fn slots_cover_every_operation_once() {
        let mut seen = [false; OPS];
        for op in all_ops() {
            assert!(!std::mem::replace(&mut seen[slot(op)], true), "{op:?}");
        }
        assert!(seen.iter().all(|&s| s));
        let table = ImplTable::rustcrypto();
        let choices = table.choices();
        for (i, c) in choices[..OPS].iter().enumerate() {
            assert_eq!(slot(c.op), i);
            assert!(!c.chained);
        }
        // Then the GCM chains, encryption first.
        let chains: Vec<_> = choices[OPS..].iter().map(|c| c.label()).collect();
        assert_eq!(chains, ["gcm-encrypt-chained", "gcm-decrypt-chained"]);
        // Padding does not change the slot.
        let padded = AesOp::new(Direction::Encrypt, Mode::Cbc).with_padding(Padding::Pkcs7);
        assert_eq!(
            slot(padded),
            slot(AesOp::new(Direction::Encrypt, Mode::Cbc))
        );
    }

    #[test]
    fn pinned_lanes_take_only_the_serial_operations() {
        let table = ImplTable::pinned(AesImpl::Lanes { width: 16 }).unwrap();
        assert_eq!(table.choices().len(), OPS + 2);
        for c in table.choices().into_iter().filter(|c| !c.chained) {
            let expected = if c.op.is_serial() {
                AesImpl::Lanes { width: 16 }
            } else {
                AesImpl::RustCrypto
            };
            assert_eq!(c.implementation, expected, "{:?}", c.op);
            assert_eq!(
                table.lane_width(c.op),
                if c.op.is_serial() { 16 } else { 1 }
            );
        }
        // A packet by itself cannot fill a lane set: it runs on RustCrypto's single-stream
        // loop, and the choice says so.
        let cbc = table.choice(AesOp::new(Direction::Encrypt, Mode::Cbc));
        assert_eq!(cbc.alone, AesImpl::RustCrypto);
        assert_eq!(cbc.to_string(), "cbc-encrypt lanes-16, alone rustcrypto");
        let ctr = table.choice(AesOp::new(Direction::Encrypt, Mode::Ctr));
        assert_eq!(ctr.to_string(), "ctr-encrypt rustcrypto");
        // The lanes cannot chain GCM: a GCM job cut into packets runs on RustCrypto.
        for direction in GCM_DIRECTIONS {
            assert_eq!(table.gcm_chain(direction), AesImpl::RustCrypto);
        }
        assert!(!table.is_measured());
        assert!(matches!(
            ImplTable::pinned(AesImpl::Lanes { width: 0 }),
            Err(CryptoError::LaneWidth { .. })
        ));
    }

    #[test]
    fn the_narrowest_lane_set_within_the_slack_is_picked() {
        let m = |implementation, ns_per_byte| Measured {
            implementation,
            ns_per_byte,
        };
        let lanes = |width| AesImpl::Lanes { width };
        let measured = [
            m(lanes(32), 1.00),
            m(lanes(16), 1.04),
            m(lanes(8), 1.06),
            m(AesImpl::RustCrypto, 1.01),
        ];
        assert_eq!(pick(&measured).unwrap().implementation, lanes(16));
        // A packet by itself takes the fastest that is not a lane set.
        assert_eq!(pick_alone(&measured), AesImpl::RustCrypto);
        let measured = [
            m(lanes(16), 0.3),
            m(AesImpl::AwsLc, 0.69),
            m(AesImpl::RustCrypto, 0.71),
        ];
        assert_eq!(pick_alone(&measured), AesImpl::AwsLc);
        assert_eq!(pick_alone(&[m(lanes(8), 0.3)]), AesImpl::RustCrypto);
        let measured = [m(AesImpl::RustCrypto, 1.0), m(lanes(8), 1.01)];
        assert_eq!(pick(&measured).unwrap().implementation, AesImpl::RustCrypto);
        assert_eq!(pick(&[]), None);
    }

    #[test]
    fn a_measured_table_measures_what_is_asked_for_and_names_a_candidate() {
        let table = ImplTable::measured(256).unwrap();
        assert!(table.is_measured());
        assert_eq!(table.packet(), 256);
        assert!(table.choices().is_empty());
        let cbc = AesOp::new(Direction::Encrypt, Mode::Cbc);
        table.get(cbc);
        assert_eq!(table.choices().len(), 1);
        for c in table.measure_all().choices() {
            assert!(AesImpl::candidates(c.op).contains(&c.implementation), "{c}");
            assert!(c.ns_per_byte.is_some_and(|ns| ns > 0.0), "{c}");
            assert!(c.rustcrypto_ns_per_byte.is_some(), "{c}");
            // A packet by itself runs on a candidate that is not a lane set: the choice itself
            // unless that is one.
            assert!(AesImpl::candidates(c.op).contains(&c.alone), "{c}");
            assert!(!matches!(c.alone, AesImpl::Lanes { .. }), "{c}");
            if !matches!(c.implementation, AesImpl::Lanes { .. }) {
                assert_eq!(c.alone, c.implementation, "{c}");
            }
            if !c.chained {
                assert_eq!(table.alone(c.op), c.alone);
            }
        }
        assert_eq!(table.choices().len(), OPS + 2);
        for direction in GCM_DIRECTIONS {
            let chain = table.gcm_chain_choice(direction);
            assert!(
                chain.chained && chain.implementation.chains_gcm(),
                "{chain}"
            );
            assert!(chain.ns_per_byte.is_some_and(|ns| ns > 0.0), "{chain}");
            assert!(chain.rustcrypto_ns_per_byte.is_some(), "{chain}");
        }
        // OFB and CTR decryption take their encryption's choice.
        for mode in [Mode::Ofb, Mode::Ctr] {
            let enc = table.choice(AesOp::new(Direction::Encrypt, mode));
            let dec = table.choice(AesOp::new(Direction::Decrypt, mode));
            assert_eq!(dec.implementation, enc.implementation);
            assert_eq!(dec.ns_per_byte, enc.ns_per_byte);
        }
        assert_eq!(ImplTable::measured(1 << 20).unwrap().packet(), 4096);
        // One shared table per measured packet size.
        assert!(Arc::ptr_eq(
            &ImplTable::shared(8192),
            &ImplTable::shared(4096)
        ));
        assert!(!Arc::ptr_eq(
            &ImplTable::shared(1024),
            &ImplTable::shared(4096)
        ));
        assert!(!ImplTable::shared(100).is_measured());
        assert!(matches!(
            ImplTable::measured(100),
            Err(CryptoError::MeasurePacket { len: 100 })
        ));
    }
}
