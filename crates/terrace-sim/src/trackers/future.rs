//! The oracle's tracker: per-page access counts over a window of the stream that has not been
//! replayed yet. Only a simulator can have it. The window slides: accesses are added when they
//! are buffered ahead and removed when they are replayed, so keeping it costs O(1) per access
//! however far ahead it looks.

use terrace_model::{Access, AccessKind, PageCounts};

#[derive(Clone, Debug)]
pub struct FutureWindow {
    pub counts: Vec<PageCounts>,
    /// How many intervals' worth of accesses to look ahead.
    pub intervals: u32,
    /// Absolute index (in accesses since the start) of the first access not yet counted.
    counted_upto: u64,
}

impl FutureWindow {
    pub fn new(pages: u64, intervals: u32) -> Self {
        FutureWindow {
            counts: vec![PageCounts::default(); pages as usize],
            intervals: intervals.max(1),
            counted_upto: 0,
        }
    }

    fn bump(&mut self, a: &Access, shift: u32, add: bool) {
        if let Some(c) = self.counts.get_mut((a.addr >> shift) as usize) {
            let n = match a.kind {
                AccessKind::Read => &mut c.reads,
                AccessKind::Write => &mut c.writes,
            };
            *n = if add { *n + 1 } else { *n - 1 };
        }
    }

    /// Extends the window over `ahead`, the buffered accesses from absolute index `first` on.
    pub fn extend(&mut self, first: u64, ahead: &[Access], shift: u32) {
        let skip = (self.counted_upto.max(first) - first) as usize;
        for a in ahead.iter().skip(skip) {
            self.bump(a, shift, true);
        }
        self.counted_upto = self.counted_upto.max(first + ahead.len() as u64);
    }

    /// Adds `ahead` to the window, accesses a source reports as lying ahead in an order it has
    /// not fixed ([`terrace_workloads::AccessSource::read_ahead`]).
    pub fn add(&mut self, ahead: &[Access], shift: u32) {
        for a in ahead {
            self.bump(a, shift, true);
        }
    }

    /// Takes `replayed` out of the window, each access of it added before by [`Self::add`].
    pub fn remove(&mut self, replayed: &[Access], shift: u32) {
        for a in replayed {
            self.bump(a, shift, false);
        }
    }

    /// Takes `replayed` (starting at absolute index `first`) out of the window.
    pub fn consume(&mut self, first: u64, replayed: &[Access], shift: u32) {
        let counted = self.counted_upto.saturating_sub(first).min(replayed.len() as u64) as usize;
        for a in &replayed[..counted] {
            self.bump(a, shift, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_counts_exactly_what_lies_ahead() {
        let stream: Vec<Access> = (0..100u64).map(|i| Access::read((i % 7) * 4096, 64, 0, 0)).collect();
        let mut w = FutureWindow::new(7, 1);
        w.extend(0, &stream[..40], 12);
        w.consume(0, &stream[..10], 12);
        w.extend(10, &stream[10..60], 12);
        w.consume(10, &stream[10..25], 12);
        let want: Vec<u32> =
            (0..7).map(|p| stream[25..60].iter().filter(|a| a.addr / 4096 == p).count() as u32).collect();
        assert_eq!(w.counts.iter().map(|c| c.reads).collect::<Vec<_>>(), want);
    }
}
