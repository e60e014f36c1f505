//! Helpers the workloads and experiments share: the machine's cores and pinning to one, the
//! thread pool that runs simulated points behind a progress bar, seed sets, percentiles, the
//! round-by-round comparison of two live policies, and the policy options' help.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use cryptodispatch::PolicySpec;
use cryptodispatch::sim::research::experiments::PointRunner;
use indicatif::{ProgressBar, ProgressStyle};

/// A count given on the command line (`--jobs`, `--reps`, ...): a whole number of at least 1.
pub fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A count from 1 to `max` of `what`, as a command-line value ([`positive`], bounded).
pub fn count_up_to(s: &str, max: usize, what: &str) -> Result<usize, String> {
    match positive(s.trim())? {
        n if n > max => Err(format!("at most {max} {what}")),
        n => Ok(n),
    }
}

/// `Ok` if `jobs` jobs of up to `bytes` bytes each fit in memory. The bench holds every job's
/// input and, while a run lasts, its output: about twice their bytes, which must not pass the
/// memory available (Linux's `MemAvailable`; elsewhere only the address space is checked).
pub fn fits_in_memory(jobs: usize, bytes: usize) -> Result<(), String> {
    let need = jobs as u128 * bytes as u128 * 2;
    let available = available_memory().map_or(usize::MAX as u128, u128::from);
    if need <= available.min(usize::MAX as u128) {
        return Ok(());
    }
    let gib = |b: u128| b as f64 / (1u64 << 30) as f64;
    let jobs = match jobs {
        1 => format!("a job of {bytes} bytes needs"),
        _ => format!("{jobs} jobs of up to {bytes} bytes need"),
    };
    Err(format!(
        "{jobs} about {:.1} GiB of memory (inputs and outputs), more than the {:.1} GiB \
         available: lower --size or --jobs",
        gib(need),
        gib(available)
    ))
}

/// The memory available to a new process, in bytes, as Linux reports it.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: u64 = kib.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The cores this process may run on (at least 1).
pub fn cores() -> usize {
    core_affinity::get_core_ids().map_or(1, |c| c.len().max(1))
}

/// Pins the calling thread to core `core` (best effort, as the service's nodes are pinned).
pub fn pin(core: usize) {
    if let Some(id) = core_affinity::get_core_ids().and_then(|c| c.get(core).copied()) {
        let _ = core_affinity::set_for_current(id);
    }
}

/// Lowers the calling thread's scheduling priority to nice value `nice` (1 to 19). On Linux
/// each thread has its own nice value, and the threads it starts afterwards inherit it.
#[cfg(target_os = "linux")]
pub fn lower_priority(nice: i32) -> Result<(), String> {
    rustix::process::setpriority_process(None, nice)
        .map_err(|e| format!("could not set this thread's nice value to {nice}: {e}"))
}

/// Lowers the calling thread's scheduling priority: only on Linux, where a nice value is a
/// thread's own.
#[cfg(not(target_os = "linux"))]
pub fn lower_priority(_nice: i32) -> Result<(), String> {
    Err("--noisy-nice needs Linux, where each thread has a nice value of its own".into())
}

/// `f(t, input)` for each input t, every one on a thread of its own at once (pinned to core
/// t, as the nodes are, when `pinned`); the results in order, or an error if a thread
/// panicked.
pub fn on_threads<T: Send, R: Send>(
    inputs: Vec<T>,
    pinned: bool,
    f: impl Fn(usize, T) -> R + Sync,
) -> Result<Vec<R>, String> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (inputs.into_iter().enumerate())
            .map(|(t, input)| {
                s.spawn(move || {
                    if pinned {
                        pin(t % cores());
                    }
                    f(t, input)
                })
            })
            .collect();
        let joined = handles.into_iter().map(|h| h.join());
        joined
            .map(|r| r.map_err(|_| "a thread panicked".to_owned()))
            .collect()
    })
}

/// [`on_threads`], timed from the moment every thread has started (and pinned itself) to
/// the last one's end: starting threads, which takes tens of microseconds each, is not part of
/// what a side of a comparison is measured on.
pub fn on_threads_timed<T: Send, R: Send>(
    inputs: Vec<T>,
    pinned: bool,
    f: impl Fn(usize, T) -> R + Sync,
) -> Result<(Vec<R>, Duration), String> {
    let ready = Barrier::new(inputs.len());
    let start = OnceLock::new();
    let results = on_threads(inputs, pinned, |t, input| {
        // The last thread to arrive starts the clock, and does not sleep before it runs.
        if ready.wait().is_leader() {
            let _ = start.set(Instant::now());
        }
        f(t, input)
    })?;
    let start = start.get().copied().unwrap_or_else(Instant::now);
    Ok((results, start.elapsed()))
}

/// A result whose error the bench reports as its text.
pub trait Text<T> {
    /// The error's text in place of the error.
    fn text(self) -> Result<T, String>;
}

impl<T, E: std::fmt::Display> Text<T> for Result<T, E> {
    fn text(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// The data behind `mutex`, whether or not a thread panicked holding it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` seeds from `first` on.
pub fn seeds(first: u64, n: u64) -> Vec<u64> {
    (0..n).map(|k| first.saturating_add(k)).collect()
}

/// The `p`-th percentile (0 < p ≤ 1) of `sorted` by the nearest-rank method: the smallest value
/// with at least a share `p` of the sample at or below it. Zero for an empty sample.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Simulated points run on `threads` threads (one per core unless `--threads` says otherwise),
/// each counted on a progress bar (drawn on stderr when it is a terminal, hidden otherwise).
/// Results do not depend on the number of threads.
pub struct Pool {
    threads: usize,
    bar: ProgressBar,
}

impl Pool {
    /// A pool for `total` points, its bar labelled `what`.
    pub fn new(threads: Option<usize>, total: u64, what: &str) -> Self {
        let bar = ProgressBar::new(total);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} runs ({eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        Pool {
            threads: threads.map_or_else(cores, |t| t.max(1)),
            bar,
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl PointRunner for Pool {
    fn run<T: Sync, R: Send>(&self, points: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
        let next = AtomicUsize::new(0);
        let threads = vec![(); self.threads.clamp(1, points.len().max(1))];
        let done = on_threads(threads, false, |_, ()| {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(point) = points.get(i) else {
                    break done;
                };
                done.push((i, f(point)));
                self.bar.inc(1);
            }
        });
        let mut done: Vec<(usize, R)> = done
            .expect("a point panicked")
            .into_iter()
            .flatten()
            .collect();
        done.sort_by_key(|d| d.0);
        done.into_iter().map(|d| d.1).collect()
    }
}

/// The policies `list` names, comma-separated, as option `flag` gave them (all of
/// [`PolicySpec::names`] without a list). A policy's parameters are comma-separated too
/// (`NAME:KEY=VALUE,KEY=VALUE`, as a policy prints): see [`split_policies`].
///
/// # Errors
/// A message naming the option and an unknown policy or a bad parameter.
pub fn parse_policies(flag: &str, list: Option<&str>) -> Result<Vec<PolicySpec>, String> {
    let Some(list) = list else {
        return Ok(PolicySpec::all());
    };
    let specs = (split_policies(list)
        .map_err(|e| format!("{flag}: {e}"))?
        .iter())
    .map(|s| s.parse::<PolicySpec>().map_err(|e| format!("{flag}: {e}")))
    .collect::<Result<Vec<_>, _>>()?;
    if specs.is_empty() {
        let names = PolicySpec::names().join(", ");
        return Err(format!("{flag}: no policy named; choose from {names}"));
    }
    Ok(specs)
}

/// The policies of a comma-separated list, each as one string `NAME` or
/// `NAME:KEY=VALUE,KEY=VALUE`. A comma starts a new policy unless what follows it is a
/// `KEY=VALUE` (an `=` with no `:` before it), which continues the previous policy's
/// parameters: `paper:alpha=0.1,beta=0.9,mct` is two policies. Empty items are skipped.
///
/// # Errors
/// A `KEY=VALUE` with no policy whose parameters it could continue (first in the list, or
/// after a policy written without `:`).
pub fn split_policies(list: &str) -> Result<Vec<String>, String> {
    let mut policies: Vec<String> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parameter = item.find('=').is_some_and(|eq| !item[..eq].contains(':'));
        match policies.last_mut() {
            Some(last) if parameter && last.contains(':') => {
                last.push(',');
                last.push_str(item);
            }
            Some(last) if parameter => {
                return Err(format!(
                    "{item:?} follows {last:?}, which has no parameters to continue: write \
                     {last}:{item}"
                ));
            }
            None if parameter => {
                return Err(format!(
                    "{item:?} is a parameter with no policy before it: write NAME:{item}"
                ));
            }
            _ => policies.push(item.to_owned()),
        }
    }
    Ok(policies)
}

/// The long help of a policy option: `intro`, then the library's policies (its registry), one
/// a line, each followed by its parameters with their defaults.
pub fn policy_help(intro: &str) -> String {
    let policies: Vec<String> = cryptodispatch::sched::policy::registry()
        .iter()
        .map(|entry| format!("  {entry:#}"))
        .collect();
    format!(
        "{intro}\n\nA policy is written NAME or NAME:KEY=VALUE,...; the policies:\n{}",
        policies.join("\n")
    )
}
