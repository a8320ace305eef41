//! Rate-limited warnings: a problem that repeats every tick (a range the fault sampler cannot
//! register, batches that mostly fail) is logged once per [`WARN_EVERY`] per kind, and the next
//! line says how many were held back in between, so the log says what is wrong without flooding.
//! Every occurrence is still counted in the metrics, whether logged or not.

use std::time::{Duration, Instant};

/// At most one warning of a kind per this long.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// One kind of warning's limiter.
#[derive(Clone, Debug, Default)]
pub struct WarnLimit {
    last: Option<Instant>,
    suppressed: u64,
}

impl WarnLimit {
    /// Whether to log an occurrence at `now`: `Some(n)` with the `n` held back since the last
    /// logged one, or `None` to hold this one back too.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now.saturating_duration_since(t) < WARN_EVERY => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }

    /// Logs `message` as a warning unless one of this kind was logged in the last minute; the
    /// line ends with how many were held back since the previous one.
    pub fn warn(&mut self, message: impl FnOnce() -> String) {
        if let Some(held) = self.allow(Instant::now()) {
            let m = message();
            if held > 0 {
                tracing::warn!("{m} ({held} more like this in the last minute not logged)");
            } else {
                tracing::warn!("{m}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_a_minute_with_the_count_held_back() {
        let mut w = WarnLimit::default();
        let t0 = Instant::now();
        assert_eq!(w.allow(t0), Some(0));
        assert_eq!(w.allow(t0 + Duration::from_secs(1)), None);
        assert_eq!(w.allow(t0 + Duration::from_secs(59)), None);
        assert_eq!(w.allow(t0 + Duration::from_secs(60)), Some(2));
        assert_eq!(w.allow(t0 + Duration::from_secs(61)), None);
        assert_eq!(w.allow(t0 + Duration::from_secs(200)), Some(1));
    }
}
