//! How often Terrace's periodic work inside a live run may come round: full scans of the
//! program's pages and the fault sampler's re-arming each cost CPU time that, on a small machine,
//! is taken from the program (docs/live.md, "Tracking cost"). Each runs at its period, or less
//! often when one round takes so long that it would use more than [`SHARE`] of a CPU, but never
//! less often than its own bound, so that the information it gives does not go stale.

use std::time::Duration;

/// The share of one CPU each kind of periodic work may take.
pub const SHARE: f64 = 0.02;

/// When the next round is due after one that took `took`: `period`, or the spacing at which
/// rounds take [`SHARE`] of a CPU, whichever is longer, and at most `longest`.
pub fn spaced(period: Duration, took: Duration, longest: Duration) -> Duration {
    period.max(took.div_f64(SHARE)).min(longest.max(period))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_spaced_to_the_budget_within_their_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(spaced(ms(100), Duration::ZERO, ms(1000)), ms(100));
        assert_eq!(spaced(ms(100), ms(1), ms(1000)), ms(100), "1 ms every 100 ms is 1%");
        assert_eq!(spaced(ms(100), ms(10), ms(1000)), ms(500), "10 ms at 2% is every 500 ms");
        assert_eq!(spaced(ms(100), ms(100), ms(1000)), ms(1000), "never beyond the bound");
        assert_eq!(spaced(ms(100), ms(100), ms(50)), ms(100), "nor below the period");
    }
}
