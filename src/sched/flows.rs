//! Fair admission (docs/ALGORITHM.md §15.1 and §15.7): every job of a cluster has a queue of
//! its own (a *flow*), every tenant a ring of its jobs' flows, and the balancer serves them by
//! deficit round robin over bytes at two levels, tenants by weight and then jobs within a
//! tenant, as DRR and fq_codel serve network flows (Shreedhar and Varghese, "Efficient fair
//! queueing using deficit round robin", SIGCOMM 1995) and hierarchical link sharing serves
//! classes of flows.
//!
//! The tenants with packets waiting form a ring. The tenant at the front gets a quantum of
//! bytes times its weight (the quantum is the cluster's largest packet, so any packet fits in
//! one turn) added to its deficit, and serves its own ring of job flows while its deficit
//! covers the next packet; then it goes to the back of the ring, keeping the remainder. Within
//! a tenant the job flows take turns exactly as the tenants do, each with one quantum per turn
//! (the job level: with a single tenant, the whole order is the job level's alone). A flow
//! whose next packet no node can take now (its bound node is full, or every node is) ends its
//! turn and forfeits its deficit, as an idle flow does in DRR, so waiting does not bank an
//! unfair burst. A tenant all of whose flows did so in a row is set aside for the rest of the
//! placement pass, so that the other tenants' flows are tried, and comes back to the front
//! at the pass's end with its turn and deficit as they were: the nodes it waits for being full
//! is no reason to hand its turn on. A flow or tenant that empties leaves its ring and
//! forgets its deficit.
//!
//! The service may grant a tenant bytes for its turns (a long job of a tenant below its share,
//! docs/ALGORITHM.md §15.7): a tenant that comes in with a grant goes ahead of the tenants
//! whose turns carry none, and among those that carry one, by the grant's rank.
//!
//! What a node holds it serves in order, so the turns alone do not share the nodes by weight
//! when a tenant has less waiting than its turn places: the flows count each tenant's bytes
//! placed on the nodes, and the balancer sets a tenant aside while it holds more than its
//! weighted share of them ([`Flows::past_its_share`]; docs/ALGORITHM.md §15.7). A tenant set
//! aside so keeps pace with the turns: each turn another tenant begins meanwhile raises its
//! deficit to a turn of its own, so that it is held to its share by the one rule, not by both.
//!
//! A packet costs its length, and at least one byte, so empty packets (an Ed25519 job with an
//! empty message) take their turn like any other.
//!
//! Nothing here bounds how many packets wait: under fair admission the core accepts every
//! packet, and the driver bounds what it admits (the service counts packets and bytes per
//! cluster). A packet never waits behind another job's: a 16-byte job submitted after a 64 MiB
//! one is placed after at most one packet of it (and, across tenants, after at most one turn
//! of each other tenant).

use std::collections::VecDeque;
use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::packet::{Packet, PacketMeta, TaskId, TenantId};

/// What a packet costs against a flow's deficit: its length, and at least one byte.
pub(crate) fn cost(meta: &PacketMeta) -> u64 {
    meta.len.max(1)
}

#[derive(Debug)]
struct Flow<D> {
    packets: VecDeque<Packet<D>>,
    deficit: u64,
    /// Whether the flow's current turn has been granted its quantum.
    granted: bool,
}

impl<D> Flow<D> {
    fn of(packet: Packet<D>) -> Self {
        Flow {
            packets: VecDeque::from([packet]),
            deficit: 0,
            granted: false,
        }
    }
}

/// One tenant's place in the ring: its job flows with packets, in turn order.
#[derive(Debug, Default)]
struct Tenant {
    jobs: VecDeque<TaskId>,
    deficit: u64,
    granted: bool,
    /// Whether the current job's turn has placed a packet.
    sent: bool,
    /// Job turns in a row, within this tenant's turn, that placed nothing.
    misses: usize,
    /// The rank of the grant ([`Flows::grant`]) the current turn carries, if it does.
    grant: Option<i64>,
    /// What its packets waiting cost, together.
    bytes: u64,
    /// Set aside in this placement pass for holding its share of the nodes
    /// ([`Flows::set_aside`]).
    aside: bool,
}

/// The flows of one cluster.
#[derive(Debug)]
pub(crate) struct Flows<D> {
    flows: FxHashMap<TaskId, Flow<D>>,
    tenants: FxHashMap<TenantId, Tenant>,
    /// Tenants with packets, in round-robin order; the front has the turn.
    ring: VecDeque<TenantId>,
    /// Tenants set aside for the rest of a placement pass, every one of their flows blocked;
    /// they keep their turn and come back to the front at the pass's end.
    skipped: Vec<TenantId>,
    /// Tenants' weights other than 1.
    weights: FxHashMap<TenantId, u32>,
    /// Bytes granted to tenants with nothing waiting yet ([`grant`](Self::grant)): the
    /// deficit each starts its next turn with, and the grant's rank.
    granted: FxHashMap<TenantId, (u64, i64)>,
    /// Bytes of each tenant's packets placed on the cluster's nodes and not yet complete
    /// (each packet at its cost; tenants with none are not kept).
    held: FxHashMap<TenantId, u64>,
    quantum: u64,
    waiting: usize,
}

impl<D> Flows<D> {
    pub(crate) fn new(quantum: u64) -> Self {
        Flows {
            flows: FxHashMap::default(),
            tenants: FxHashMap::default(),
            ring: VecDeque::new(),
            skipped: Vec::new(),
            weights: FxHashMap::default(),
            granted: FxHashMap::default(),
            held: FxHashMap::default(),
            quantum: quantum.max(1),
            waiting: 0,
        }
    }

    /// Sets a tenant's weight (at least 1): its turn's quantum is the job level's times this.
    pub(crate) fn set_weight(&mut self, tenant: TenantId, weight: u32) {
        if weight <= 1 {
            self.weights.remove(&tenant);
        } else {
            self.weights.insert(tenant, weight);
        }
    }

    pub(crate) fn weight(&self, tenant: TenantId) -> u64 {
        self.weights.get(&tenant).map_or(1, |&w| u64::from(w))
    }

    /// Adds `bytes` to a tenant's deficit, now or, with nothing of it waiting, when its next
    /// packet arrives: its turns place that much more before the ring moves on. The service
    /// grants a job's bytes this way to a tenant whose saved share covers a job too long for
    /// the light path (docs/ALGORITHM.md §15.7), with the credit the tenant has left as the
    /// grant's `rank`. A tenant that comes in with a grant takes its place ahead of every
    /// tenant but those whose turns carry a grant of a rank as high (a turn in progress
    /// resumes, deficit and all, after it): the granted job of the tenant furthest below its
    /// share goes first. A tenant already waiting keeps its place. The deficit is forgotten,
    /// as any is, when the tenant has nothing left waiting.
    pub(crate) fn grant(&mut self, tenant: TenantId, bytes: u64, rank: i64) {
        match self.tenants.get_mut(&tenant) {
            Some(t) => {
                t.deficit = t.deficit.saturating_add(bytes);
                t.grant = Some(t.grant.map_or(rank, |r| r.min(rank)));
            }
            None => {
                let g = self.granted.entry(tenant).or_insert((0, rank));
                *g = (g.0.saturating_add(bytes), g.1.min(rank));
            }
        }
    }

    /// A tenant's ring entry, made on its first packet waiting with what was granted to it
    /// ([`grant`](Self::grant) says where it goes then), or else at the front or the back.
    fn tenant_entry(&mut self, tenant: TenantId, front: bool) -> &mut Tenant {
        if !self.tenants.contains_key(&tenant) {
            let grant = self.granted.remove(&tenant);
            let tenants = &self.tenants;
            let at = match grant {
                Some((_, rank)) => self
                    .ring
                    .iter()
                    .take_while(|t| {
                        tenants
                            .get(t)
                            .and_then(|t| t.grant)
                            .is_some_and(|r| r >= rank)
                    })
                    .count(),
                None if front => 0,
                None => self.ring.len(),
            };
            self.ring.insert(at, tenant);
            self.tenants.insert(
                tenant,
                Tenant {
                    deficit: grant.map_or(0, |g| g.0),
                    grant: grant.map(|g| g.1),
                    ..Tenant::default()
                },
            );
        }
        self.tenants.entry(tenant).or_default()
    }

    /// Counts a packet placed on a node as its tenant's until [`released`](Self::released).
    pub(crate) fn placed(&mut self, meta: &PacketMeta) {
        *self.held.entry(meta.tenant).or_default() += cost(meta);
    }

    /// A packet counted by [`placed`](Self::placed) left its node (complete, or taken off a
    /// failed node).
    pub(crate) fn released(&mut self, meta: &PacketMeta) {
        if let Entry::Occupied(mut e) = self.held.entry(meta.tenant) {
            *e.get_mut() = e.get().saturating_sub(cost(meta));
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    /// How many tenants are *active*, with packets waiting or placed on a node.
    pub(crate) fn active_tenants(&self) -> usize {
        let placed_only = self.held.keys().filter(|t| !self.tenants.contains_key(t));
        self.tenants.len() + placed_only.count()
    }

    /// Whether `meta`'s tenant holds more than its weighted share of what the nodes hold
    /// (docs/ALGORITHM.md §15.7): it has packets on the nodes, so has another tenant, one of
    /// the two has less than a turn of its own waiting, and with half the packet `meta` added
    /// to each, `meta`'s tenant holds more bytes on the nodes per unit of weight than the other.
    ///
    /// What a node holds it serves in order, so a tenant is served in proportion to its bytes
    /// there, as well as by its turns. The turns serve two tenants by weight while each has
    /// more waiting than a turn of its own takes, and the pair is left to them. One with less
    /// (its clients keep fewer jobs in flight than the nodes hold) places all it has at each
    /// turn, so its share follows its bytes on the nodes, and the other, however much it has
    /// waiting, is held to its share of them. The half packet on both sides keeps two tenants
    /// at their shares from both being held (of two tenants, only the one further over its
    /// share is) and is not biased toward either: half a packet allowed to the tenant that
    /// asks, the earlier form, put the lighter of two tenants, whose share is a few packets
    /// when the windows are small, most of a packet over it. A tenant with nothing on the nodes
    /// is never held, so one of long packets places one beside the other's short ones.
    pub(crate) fn past_its_share(&self, meta: &PacketMeta) -> bool {
        let tenant = meta.tenant;
        let shallow = |t: TenantId| {
            let waiting = self.tenants.get(&t).map_or(0, |x| x.bytes);
            waiting < self.quantum.saturating_mul(self.weight(t))
        };
        let mine_shallow = shallow(tenant);
        let mine = self.held(tenant);
        if mine == 0 {
            return false;
        }
        let half = cost(meta) / 2;
        let held = u128::from(mine.saturating_add(half));
        let weight = u128::from(self.weight(tenant));
        self.held.iter().any(|(&t, &theirs)| {
            let w = self.weight(t);
            t != tenant
                && (mine_shallow || shallow(t))
                // (held + c/2) ÷ weight > (theirs + c/2) ÷ their weight, without division.
                && held * u128::from(w) > u128::from(theirs.saturating_add(half)) * weight
        })
    }

    fn held(&self, tenant: TenantId) -> u64 {
        self.held.get(&tenant).copied().unwrap_or(0)
    }

    /// Sets the tenant at the front aside for the rest of the placement pass, its turn and
    /// its flows' as they are: it holds its share of the nodes (docs/ALGORITHM.md §15.7).
    /// Each turn another tenant begins in the pass raises its deficit to a turn of its own
    /// ([`head`](Self::head)).
    pub(crate) fn set_aside(&mut self) {
        if let Some(tenant) = self.ring.pop_front() {
            if let Some(t) = self.tenants.get_mut(&tenant) {
                t.aside = true;
            }
            self.skipped.push(tenant);
        }
    }

    /// Packets waiting, all flows together.
    pub(crate) fn len(&self) -> usize {
        self.waiting
    }

    /// Job flows with packets waiting, all tenants together.
    pub(crate) fn active(&self) -> usize {
        self.flows.len()
    }

    /// Appends a packet to its job's flow; a new flow joins the back of its tenant's ring, a
    /// tenant with nothing waiting the back of the tenants' ring.
    pub(crate) fn push(&mut self, packet: Packet<D>) {
        self.waiting += 1;
        let (task, tenant) = (packet.meta.task, packet.meta.tenant);
        let cost = cost(&packet.meta);
        match self.flows.entry(task) {
            Entry::Occupied(mut e) => e.get_mut().packets.push_back(packet),
            Entry::Vacant(e) => {
                e.insert(Flow::of(packet));
                self.tenant_entry(tenant, false).jobs.push_back(task);
            }
        }
        if let Some(t) = self.tenants.get_mut(&tenant) {
            t.bytes += cost;
        }
    }

    /// Puts packets taken back from a node in front of their flows, in their order (a failed
    /// node's queue, re-offered). A flow that was empty rejoins its tenant's ring at the
    /// front, and a tenant with nothing waiting the tenants' ring at the front.
    ///
    /// A packet was charged to its flow and tenant when it was taken; one that comes back to
    /// a flow, or a tenant, whose turn is open is refunded to that turn. Otherwise a turn
    /// opened for a shorter packet would find the longer one put in front of it unaffordable
    /// at its start, and the placement pass would end there with nothing placed.
    pub(crate) fn push_front_all(&mut self, packets: Vec<Packet<D>>) {
        self.end_pass();
        for packet in packets.into_iter().rev() {
            self.waiting += 1;
            let (task, tenant) = (packet.meta.task, packet.meta.tenant);
            let cost = cost(&packet.meta);
            if let Some(t) = self.tenants.get_mut(&tenant).filter(|t| t.granted) {
                t.deficit = t.deficit.saturating_add(cost);
            }
            match self.flows.entry(task) {
                Entry::Occupied(mut e) => {
                    let flow = e.get_mut();
                    if flow.granted {
                        flow.deficit = flow.deficit.saturating_add(cost);
                    }
                    flow.packets.push_front(packet);
                }
                Entry::Vacant(e) => {
                    e.insert(Flow::of(packet));
                    self.tenant_entry(tenant, true).jobs.push_front(task);
                }
            }
            if let Some(t) = self.tenants.get_mut(&tenant) {
                t.bytes += cost;
            }
        }
    }

    /// The flow whose turn it is, and the header of its next packet.
    ///
    /// Grants each turn's quantum on first sight: a job's turn one quantum, a tenant's turn
    /// its weight's worth, or the next packet's cost if that is larger (a packet above the
    /// cluster's packet size, such as a long Ed25519 message, is sent in one turn rather than
    /// starved). A tenant whose deficit does not cover the next packet ends its turn here and
    /// keeps the remainder for its next one.
    pub(crate) fn head(&mut self) -> Option<(TaskId, PacketMeta)> {
        // Each tenant is granted at least the cost of its next packet on first sight, so the
        // first tenant seen a second time always covers it.
        for _ in 0..=self.ring.len() {
            let &tenant = self.ring.front()?;
            let weight = self.weight(tenant);
            let quantum = self.quantum;
            if self.tenants.get(&tenant).is_some_and(|t| !t.granted) {
                self.keep_pace();
            }
            let t = self.tenants.get_mut(&tenant)?;
            let &task = t.jobs.front()?;
            let flow = self.flows.get_mut(&task)?;
            let meta = flow.packets.front()?.meta;
            let cost = cost(&meta);
            if !t.granted {
                t.deficit += quantum.saturating_mul(weight).max(cost);
                t.granted = true;
            }
            if t.deficit >= cost {
                if !flow.granted {
                    flow.deficit += quantum.max(cost);
                    flow.granted = true;
                }
                return Some((task, meta));
            }
            // The tenant's turn ends. A job at its front whose own turn is spent too ends its
            // turn with it, as `end_turn` would at its next sight: to the back of its
            // tenant's ring, its remainder kept, a fresh quantum at its next turn. (Left
            // open, that turn would be found spent when the tenant came back, and a placement
            // pass with that tenant alone would end on it having placed nothing, a packet
            // placeable on an idle node.)
            if flow.granted && flow.deficit < cost {
                flow.granted = false;
                t.sent = false;
                t.jobs.rotate_left(1);
            }
            t.granted = false;
            t.grant = None;
            t.misses = 0;
            self.ring.rotate_left(1);
        }
        None
    }

    /// Whether the flow at the front may send its next packet within its deficit.
    pub(crate) fn head_affordable(&self, meta: &PacketMeta) -> bool {
        self.flows
            .get(&meta.task)
            .is_some_and(|f| f.deficit >= cost(meta))
    }

    /// Takes the front flow's next packet (the one [`head`](Self::head) showed), charging its
    /// cost to the flow and its tenant. A flow that empties leaves its tenant's ring, a tenant
    /// that empties the tenants' ring.
    pub(crate) fn take_head(&mut self) -> Option<Packet<D>> {
        let &tenant = self.ring.front()?;
        let t = self.tenants.get_mut(&tenant)?;
        let &task = t.jobs.front()?;
        let flow = self.flows.get_mut(&task)?;
        let packet = flow.packets.pop_front()?;
        self.waiting -= 1;
        let cost = cost(&packet.meta);
        flow.deficit = flow.deficit.saturating_sub(cost);
        t.deficit = t.deficit.saturating_sub(cost);
        t.bytes = t.bytes.saturating_sub(cost);
        t.sent = true;
        t.misses = 0;
        if flow.packets.is_empty() {
            self.flows.remove(&task);
            t.jobs.pop_front();
            t.sent = false;
            if t.jobs.is_empty() {
                self.tenants.remove(&tenant);
                self.ring.pop_front();
            }
        }
        Some(packet)
    }

    /// Ends the front flow's turn: it goes to the back of its tenant's ring. With `blocked`
    /// (its next packet could not be placed) it forfeits its deficit. When every flow of the
    /// tenant has had a turn in a row that placed nothing, the tenant's turn ends too (the
    /// tenant goes to the back of the ring, forfeiting its deficit if `blocked`), so that the
    /// other tenants' flows are tried.
    pub(crate) fn end_turn(&mut self, blocked: bool) {
        let Some(&tenant) = self.ring.front() else {
            return;
        };
        let Some(t) = self.tenants.get_mut(&tenant) else {
            return;
        };
        let Some(task) = t.jobs.pop_front() else {
            return;
        };
        if let Some(flow) = self.flows.get_mut(&task) {
            flow.granted = false;
            if blocked {
                flow.deficit = 0;
            }
        }
        t.jobs.push_back(task);
        if std::mem::take(&mut t.sent) {
            t.misses = 0;
        } else {
            t.misses += 1;
        }
        if t.misses >= t.jobs.len() {
            t.misses = 0;
            if blocked {
                // Set aside for this pass, turn and deficit kept: the nodes its jobs wait for
                // are full, which is no reason to hand its turn to another tenant.
                self.ring.pop_front();
                self.skipped.push(tenant);
            } else {
                t.granted = false;
                t.grant = None;
                self.ring.rotate_left(1);
            }
        }
    }

    /// Ends a placement pass: the tenants set aside by [`end_turn`](Self::end_turn) and
    /// [`set_aside`](Self::set_aside) come back to the front of the ring, in their order,
    /// their turns unfinished.
    pub(crate) fn end_pass(&mut self) {
        for tenant in self.skipped.drain(..).rev() {
            if let Some(t) = self.tenants.get_mut(&tenant) {
                t.aside = false;
            }
            self.ring.push_front(tenant);
        }
    }

    /// A turn begins: each tenant set aside for holding its share of the nodes has its
    /// deficit raised to a turn of its own (never above what it had), as if its next turn had
    /// come too. The rule on what the nodes hold holds it to its share; without this the
    /// turns the others take meanwhile would hold it back a second time, below its share
    /// (docs/ALGORITHM.md §15.7).
    fn keep_pace(&mut self) {
        for tenant in &self.skipped {
            let turn = self.quantum.saturating_mul(self.weight(*tenant));
            if let Some(t) = self.tenants.get_mut(tenant).filter(|t| t.aside) {
                t.deficit = t.deficit.max(turn);
            }
        }
    }

    /// Removes and returns every waiting packet, flow by flow.
    pub(crate) fn drain(&mut self) -> Vec<Packet<D>> {
        self.end_pass();
        let mut out = Vec::with_capacity(self.waiting);
        for tenant in std::mem::take(&mut self.ring) {
            if let Some(t) = self.tenants.remove(&tenant) {
                for task in t.jobs {
                    if let Some(flow) = self.flows.remove(&task) {
                        out.extend(flow.packets);
                    }
                }
            }
        }
        self.waiting = 0;
        self.granted.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{ClusterId, Cmd, Len};

    fn packet(task: u64, seq: u32, len: u64) -> Packet<Len> {
        Packet::new(
            PacketMeta::new(TaskId(task), Cmd::Encrypt, ClusterId(0)).at(seq, false),
            Len(len),
        )
    }

    fn of_tenant(tenant: u32, task: u64, seq: u32, len: u64) -> Packet<Len> {
        let mut p = packet(task, seq, len);
        p.meta.tenant = TenantId(tenant);
        p
    }

    /// Bytes served per tenant over the first `prefix` packets of `order`.
    fn bytes_by_tenant(
        order: &[(u64, u32)],
        prefix: usize,
        tenant_of: impl Fn(u64) -> u32,
    ) -> [u64; 3] {
        let mut bytes = [0u64; 3];
        for &(task, _) in &order[..prefix] {
            bytes[tenant_of(task) as usize] += 1024;
        }
        bytes
    }

    /// Serves every flow with a node that always has room: the order DRR alone gives.
    fn serve(flows: &mut Flows<Len>) -> Vec<(u64, u32)> {
        let mut order = Vec::new();
        while let Some((_, meta)) = flows.head() {
            if flows.head_affordable(&meta) {
                let p = flows.take_head().unwrap();
                order.push((p.meta.task.0, p.meta.seq));
            } else {
                flows.end_turn(false);
            }
        }
        order
    }

    /// A tenant set aside for holding its share keeps pace with the turns others begin
    /// meanwhile: back at the front, it has a whole turn of its own, not what was left of
    /// the turn it was in.
    #[test]
    fn a_tenant_set_aside_for_its_share_keeps_pace_with_the_turns() {
        let mut flows = Flows::new(1024);
        flows.set_weight(TenantId(1), 2);
        for seq in 0..6 {
            flows.push(of_tenant(1, 1, seq, 1024));
            flows.push(of_tenant(2, 2, seq, 1024));
        }
        // Tenant 1's turn (2048 bytes) places one packet; then it holds its share.
        assert_eq!(flows.head().unwrap().0, TaskId(1));
        assert_eq!(flows.take_head().unwrap().meta.task, TaskId(1));
        flows.set_aside();
        // Tenant 2 begins a turn in the same pass.
        assert_eq!(flows.head().unwrap().0, TaskId(2));
        assert_eq!(flows.take_head().unwrap().meta.task, TaskId(2));
        flows.end_pass();
        let order: Vec<u64> = serve(&mut flows).iter().map(|&(t, _)| t).collect();
        // Tenant 1 is back at the front with a whole turn, two packets (left as it was, one),
        // then tenant 2's turn, spent, ends and tenant 1's next turn places two more. (Kept
        // as it was, the one packet left, then the next turn's two: 1, 1, 1, 2.)
        assert_eq!(order[..5], [1, 1, 1, 1, 2]);
    }

    #[test]
    fn a_small_job_waits_for_one_packet_of_a_big_one_at_most() {
        let mut flows = Flows::new(1024);
        for seq in 0..100 {
            flows.push(packet(1, seq, 1024));
        }
        flows.push(packet(2, 0, 16));
        let order = serve(&mut flows);
        assert_eq!(order[..3], [(1, 0), (2, 0), (1, 1)]);
        assert_eq!(order.len(), 101);
        assert_eq!(flows.len(), 0);
        assert_eq!(flows.active(), 0);
    }

    #[test]
    fn bytes_are_shared_equally_whatever_the_packet_sizes() {
        let mut flows = Flows::new(1024);
        for seq in 0..64 {
            flows.push(packet(1, seq, 1024));
        }
        for seq in 0..256 {
            flows.push(packet(2, seq, 256));
        }
        let order = serve(&mut flows);
        // Until job 1 runs out, every round gives each job 1024 bytes.
        let first_half = &order[..64 * 5];
        let ones = first_half.iter().filter(|(t, _)| *t == 1).count();
        let twos = first_half.len() - ones;
        assert_eq!((ones * 1024, twos * 256), (64 * 1024, 256 * 256));
    }

    #[test]
    fn a_granted_tenant_places_the_bytes_granted_before_the_ring_moves_on() {
        // Tenant 1 backlogged; tenant 2 granted 4 packets' worth before its job arrives, and
        // tenant 3 the same once its packets wait.
        let mut flows = Flows::new(1024);
        for seq in 0..20 {
            flows.push(of_tenant(1, 1, seq, 1024));
        }
        flows.grant(TenantId(2), 4 * 1024, 0);
        for seq in 0..8 {
            flows.push(of_tenant(2, 2, seq, 1024));
        }
        let order = serve(&mut flows);
        let tasks: Vec<u64> = order.iter().map(|&(t, _)| t).collect();
        // Tenant 2 comes in with its grant at the front: its quantum and its grant in one
        // turn (five packets), then one packet each in turn.
        assert_eq!(tasks[..9], [2, 2, 2, 2, 2, 1, 2, 1, 2]);
        assert_eq!(order.len(), 28);

        let mut flows = Flows::new(1024);
        for seq in 0..20 {
            flows.push(of_tenant(1, 1, seq, 1024));
        }
        for seq in 0..8 {
            flows.push(of_tenant(3, 3, seq, 1024));
        }
        flows.grant(TenantId(3), 2 * 1024, 0);
        let tasks: Vec<u64> = serve(&mut flows).iter().map(|&(t, _)| t).collect();
        assert_eq!(tasks[..7], [1, 3, 3, 3, 1, 3, 1]);
        // A grant is forgotten with the tenant's turn once it has nothing waiting, and one
        // made before is not carried past a drain.
        flows.grant(TenantId(4), 1024, 0);
        assert!(flows.drain().is_empty());
        flows.push(of_tenant(5, 5, 0, 1024));
        flows.push(of_tenant(5, 5, 1, 1024));
        flows.push(of_tenant(4, 4, 0, 1024));
        flows.push(of_tenant(4, 4, 1, 1024));
        let tasks: Vec<u64> = serve(&mut flows).iter().map(|&(t, _)| t).collect();
        assert_eq!(tasks, [5, 4, 5, 4]);
    }

    #[test]
    fn granted_tenants_go_first_by_rank_and_a_turn_in_progress_resumes_after() {
        // Tenant 1 is granted six packets' worth and has placed three of its turn's seven
        // when tenant 2 comes in with a grant of a higher rank, and tenant 3 with one of a
        // lower rank.
        let mut flows = Flows::new(1024);
        flows.grant(TenantId(1), 6 * 1024, 0);
        for seq in 0..20 {
            flows.push(of_tenant(1, 1, seq, 1024));
        }
        let mut tasks = Vec::new();
        while tasks.len() < 3 {
            let (_, meta) = flows.head().unwrap();
            if flows.head_affordable(&meta) {
                tasks.push(flows.take_head().unwrap().meta.task.0);
            } else {
                flows.end_turn(false);
            }
        }
        for (tenant, rank) in [(2, 5), (3, -5)] {
            flows.grant(TenantId(tenant), 2 * 1024, rank);
            for seq in 0..6 {
                flows.push(of_tenant(tenant, u64::from(tenant), seq, 1024));
            }
        }
        tasks.extend(serve(&mut flows).iter().map(|&(t, _)| t));
        // Tenant 2's turn (its quantum and its grant); tenant 1's turn resumes with the four
        // packets left of it; tenant 3's turn; then one each in turn.
        assert_eq!(
            tasks[..22],
            [
                1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 2, 1, 3, 2, 1, 3, 2, 1, 3
            ]
        );
        assert_eq!(tasks.len(), 32);
        // A grant to a tenant already waiting adds to its deficit where it stands.
        let mut flows = Flows::new(1024);
        for seq in 0..4 {
            flows.push(of_tenant(1, 1, seq, 1024));
            flows.push(of_tenant(2, 2, seq, 1024));
        }
        flows.grant(TenantId(2), 1024, 0);
        let tasks: Vec<u64> = serve(&mut flows).iter().map(|&(t, _)| t).collect();
        assert_eq!(tasks, [1, 2, 2, 1, 2, 1, 2, 1]);
    }

    /// Serves every flow with room for one packet per placement pass, as nodes that are full
    /// and free a packet's room at a time: the order DRR and the set-asides give.
    fn serve_one_per_pass(flows: &mut Flows<Len>) -> Vec<u64> {
        let mut order = Vec::new();
        while flows.len() > 0 {
            let mut room = true;
            while let Some((_, meta)) = flows.head() {
                if !flows.head_affordable(&meta) {
                    flows.end_turn(false);
                } else if std::mem::take(&mut room) {
                    order.push(flows.take_head().unwrap().meta.task.0);
                } else {
                    flows.end_turn(true);
                }
            }
            flows.end_pass();
        }
        order
    }

    #[test]
    fn granted_jobs_waiting_for_full_nodes_are_placed_by_rank() {
        // Tenant 1 backlogged; tenants 2 and 3 each come in with a grant of their job, six
        // packets, while the nodes free a packet's room at a time: the higher rank's job is
        // placed first, whoever came first, and of equal ranks the first come.
        for (ranks, first) in [([1, 5], 3), ([5, 1], 2), ([1, 1], 2)] {
            let mut flows = Flows::new(1024);
            for seq in 0..20 {
                flows.push(of_tenant(1, 1, seq, 1024));
            }
            for (tenant, rank) in [2, 3].into_iter().zip(ranks) {
                flows.grant(TenantId(tenant), 6 * 1024, rank);
                for seq in 0..6 {
                    flows.push(of_tenant(tenant, u64::from(tenant), seq, 1024));
                }
            }
            let mut want = vec![first; 6];
            want.extend([5 - first; 6]);
            want.extend([1; 20]);
            assert_eq!(serve_one_per_pass(&mut flows), want, "ranks {ranks:?}");
        }

        // Tenants whose turns are quanta of their weights keep the room while their turns
        // last: 3 packets to 1 with weights 3 and 1.
        let mut flows = Flows::new(1024);
        flows.set_weight(TenantId(1), 3);
        for seq in 0..12 {
            flows.push(of_tenant(1, 1, seq, 1024));
            flows.push(of_tenant(2, 2, seq, 1024));
        }
        let order = serve_one_per_pass(&mut flows);
        assert_eq!(order[..8], [1, 1, 1, 2, 1, 1, 1, 2]);
    }

    #[test]
    fn empty_packets_cost_a_byte_and_keep_their_order() {
        let mut flows = Flows::new(2);
        for seq in 0..5 {
            flows.push(packet(7, seq, 0));
        }
        flows.push(packet(8, 0, 0));
        let order = serve(&mut flows);
        assert_eq!(order, [(7, 0), (7, 1), (8, 0), (7, 2), (7, 3), (7, 4)]);
    }

    #[test]
    fn a_blocked_flow_does_not_bank_its_unused_quanta() {
        let mut flows = Flows::new(100);
        flows.push(packet(1, 0, 100));
        flows.push(packet(1, 1, 100));
        // Ten placement passes in which the flow is blocked.
        for _ in 0..10 {
            flows.head();
            flows.end_turn(true);
            flows.end_pass();
        }
        flows.head();
        assert!(flows.take_head().is_some());
        // After one packet the turn's quantum is spent: the blocked turns banked nothing.
        assert_eq!(flows.flows[&TaskId(1)].deficit, 0);
        assert_eq!(flows.tenants[&TenantId::DEFAULT].deficit, 0);
    }

    #[test]
    fn tenants_share_by_weight_whatever_their_number_of_jobs() {
        let mut flows = Flows::new(1024);
        flows.set_weight(TenantId(2), 3);
        // Tenant 1 has ten jobs, tenant 2 one: per job that would be 10:1, per tenant by
        // weight it is 1:3.
        for task in 0..10 {
            for seq in 0..40 {
                flows.push(of_tenant(1, task, seq, 1024));
            }
        }
        for seq in 0..400 {
            flows.push(of_tenant(2, 100, seq, 1024));
        }
        let order = serve(&mut flows);
        let tenant_of = |task: u64| if task == 100 { 2 } else { 1 };
        // Over every prefix while both are backlogged, the shares are 1:3 to within one
        // turn's quantum of each.
        for prefix in (4..=400).step_by(4) {
            let b = bytes_by_tenant(&order, prefix, tenant_of);
            let total = b[1] + b[2];
            assert!(
                b[1].abs_diff(total / 4) <= 3 * 1024,
                "prefix {prefix}: {b:?}"
            );
        }
        assert_eq!(order.len(), 800);
        // Within tenant 1 the ten jobs take turns.
        let firsts: Vec<u64> = order
            .iter()
            .filter(|p| p.0 != 100)
            .take(10)
            .map(|p| p.0)
            .collect();
        assert_eq!(firsts, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_light_tenants_small_job_waits_one_turn_of_each_other_tenant_at_most() {
        let mut flows = Flows::new(1024);
        for task in 0..50 {
            for seq in 0..20 {
                flows.push(of_tenant(1, task, seq, 1024));
            }
        }
        // Served a few packets, then a small job of another tenant arrives.
        for _ in 0..3 {
            flows.head();
            flows.take_head();
            flows.end_turn(false);
        }
        flows.push(of_tenant(2, 999, 0, 16));
        let order = serve(&mut flows);
        let at = order.iter().position(|p| p.0 == 999).unwrap();
        assert!(at <= 1, "the small job came {at}th");
    }

    #[test]
    fn a_blocked_tenant_lets_the_others_try_and_keeps_its_turn() {
        let mut flows = Flows::new(100);
        flows.set_weight(TenantId(1), 3);
        for seq in 0..4 {
            flows.push(of_tenant(1, 1, seq, 100));
            flows.push(of_tenant(1, 2, seq, 100));
        }
        flows.push(of_tenant(2, 3, 0, 100));
        flows.push(of_tenant(2, 3, 1, 100));
        // Tenant 1 sends one packet of its turn of three, then both its jobs are blocked:
        // tenant 2 is tried in the same pass.
        assert_eq!(flows.head().unwrap().0, TaskId(1));
        flows.take_head().unwrap();
        flows.end_turn(false);
        for expected in [2, 1] {
            assert_eq!(flows.head().unwrap().0, TaskId(expected));
            flows.end_turn(true);
        }
        assert_eq!(flows.head().unwrap().0, TaskId(3));
        flows.end_turn(true);
        assert!(
            flows.head().is_none(),
            "everyone is blocked: the pass is over"
        );
        flows.end_pass();
        // The next pass starts with tenant 1, whose turn goes on: two packets more.
        let mut order = Vec::new();
        for _ in 0..3 {
            let (task, meta) = flows.head().unwrap();
            if flows.head_affordable(&meta) {
                flows.take_head().unwrap();
            } else {
                flows.end_turn(false);
            }
            order.push(task.0);
        }
        // Job 2 sends one packet and its job-level quantum is spent; job 1 sends the third of
        // tenant 1's turn.
        assert_eq!(order, [2, 2, 1], "tenant 1's turn went on");
        assert_eq!(flows.drain().len(), 7);
        assert_eq!((flows.len(), flows.active()), (0, 0));
    }

    #[test]
    fn packets_taken_back_go_in_front_in_order() {
        let mut flows = Flows::new(1024);
        flows.push(packet(1, 2, 10));
        flows.push(packet(3, 0, 10));
        flows.push_front_all(vec![packet(1, 0, 10), packet(1, 1, 10), packet(2, 5, 10)]);
        assert_eq!(flows.len(), 5);
        let order = serve(&mut flows);
        assert_eq!(order[..2], [(2, 5), (1, 0)]);
        let ones: Vec<u32> = order.iter().filter(|(t, _)| *t == 1).map(|p| p.1).collect();
        assert_eq!(ones, [0, 1, 2]);
        assert_eq!(flows.drain().len(), 0);
    }

    #[test]
    fn a_longer_packet_taken_back_in_front_of_an_open_turn_is_affordable() {
        let mut flows = Flows::new(64);
        for seq in 1..6 {
            flows.push(packet(1, seq, 16));
        }
        // The turn opens with 64 bytes; three packets of 16 leave 16.
        for _ in 0..3 {
            let (_, meta) = flows.head().unwrap();
            assert!(flows.head_affordable(&meta));
            flows.take_head().unwrap();
        }
        // A packet of 32 comes back from a failed node in front of the open turn.
        flows.push_front_all(vec![packet(1, 0, 32)]);
        let (task, meta) = flows.head().unwrap();
        assert_eq!((task, meta.seq, meta.len), (TaskId(1), 0, 32));
        assert!(
            flows.head_affordable(&meta),
            "the turn found spent at its start"
        );
        let order = serve(&mut flows);
        assert_eq!(order, [(1, 0), (1, 4), (1, 5)]);
        assert_eq!((flows.len(), flows.active()), (0, 0));
    }
}
