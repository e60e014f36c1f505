//! Helpers the workloads share: the machine's cores and pinning to one, percentiles, progress
//! bars.

use indicatif::{ProgressBar, ProgressStyle};

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

/// The `p`-th percentile (0 < p ≤ 1) of `sorted` by the nearest-rank method: the smallest value
/// with at least a share `p` of the sample at or below it. Zero for an empty sample.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// A progress bar for `total` runs (drawn on stderr when it is a terminal, hidden otherwise).
pub fn progress(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} runs ({eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_is_the_nearest_rank() {
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&hundred, 0.99), 99);
        assert_eq!(percentile(&hundred, 1.0), 100);
        assert_eq!(percentile(&hundred, 0.5), 50);
        // A small sample's p99 is its largest value, not one past the end.
        assert_eq!(percentile(&[3u64, 7, 9], 0.99), 9);
        assert_eq!(percentile::<u64>(&[], 0.99), 0);
    }
}
