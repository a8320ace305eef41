//! Placement over time, recorded only when asked for ([`crate::simulate_with_timeline`], what
//! `terrace sim --plot` draws): per epoch, where each range of pages was, how often it was
//! touched, the fast tier's hit rate and the bytes migrated. Pages are grouped into at most
//! [`MAX_RANGES`] ranges and the run into at most [`MAX_EPOCHS`] epochs, so the record stays a few
//! MiB whatever the footprint and length; a run not recording pays one branch per slice.

use crate::placement::Placement;
use crate::report::TierTotals;
use serde::Serialize;
use terrace_model::Access;

/// Most page ranges the footprint is cut into (a range is one page when the footprint is small).
pub const MAX_RANGES: u64 = 512;
/// Epochs a run is cut into when its length is known; the record never holds more than twice
/// this (two neighbours merge when it would).
pub const TARGET_EPOCHS: u64 = 256;
/// Most epochs kept.
pub const MAX_EPOCHS: usize = 2 * TARGET_EPOCHS as usize;

/// A run's placement over time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Timeline {
    /// Bytes of one page (the policy's page size).
    pub page_bytes: u64,
    pub pages: u64,
    /// Pages per range; the last range may hold fewer.
    pub pages_per_range: u64,
    pub epochs: Vec<Epoch>,
}

/// One stretch of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Epoch {
    /// Simulated time at the epoch's end, ns (the next epoch starts there; the first at 0).
    pub end_ns: f64,
    /// Accesses of the epoch, and those the fast tier served.
    pub accesses: u64,
    pub fast_accesses: u64,
    /// Bytes whose copies landed in the epoch.
    pub bytes_migrated: u64,
    /// Per range: the tier holding most of its pages at the epoch's end (the fastest of a tie),
    /// or `None` while none of its pages has been touched.
    pub tier: Vec<Option<u8>>,
    /// Per range: the accesses of the epoch.
    pub range_accesses: Vec<u64>,
}

impl Timeline {
    /// How many ranges the footprint is cut into.
    pub fn ranges(&self) -> usize {
        self.pages.div_ceil(self.pages_per_range.max(1)) as usize
    }
}

/// Builds a [`Timeline`] as the machine replays.
#[derive(Debug, Default)]
pub(crate) struct TimelineRecorder {
    timeline: Timeline,
    tiers: usize,
    /// Accesses per epoch, and the access count at which the open epoch closes.
    epoch_accesses: u64,
    next_close: u64,
    /// The open epoch's access counts per range.
    counts: Vec<u64>,
    /// Run totals at the last close: accesses, fast-tier accesses, bytes migrated.
    closed: (u64, u64, u64),
}

impl TimelineRecorder {
    /// Starts recording a run of `pages` pages of `page_bytes` over `tiers` tiers, whose stream
    /// makes `accesses` accesses.
    pub(crate) fn start(&mut self, pages: u64, page_bytes: u64, tiers: usize, accesses: u64) {
        let pages_per_range = pages.div_ceil(MAX_RANGES).max(1);
        self.timeline = Timeline { page_bytes, pages, pages_per_range, epochs: Vec::new() };
        self.tiers = tiers;
        self.epoch_accesses = (accesses / TARGET_EPOCHS).max(crate::machine::SLICE_ACCESSES as u64);
        self.next_close = self.epoch_accesses;
        self.counts = vec![0; self.timeline.ranges()];
        self.closed = (0, 0, 0);
    }

    /// Counts a slice's accesses against their ranges.
    pub(crate) fn count(&mut self, slice: &[Access], page_shift: u32) {
        let per_range = self.timeline.pages_per_range;
        let last = self.counts.len().saturating_sub(1);
        for a in slice {
            let range = ((a.addr >> page_shift) / per_range) as usize;
            self.counts[range.min(last)] += 1;
        }
    }

    /// Whether the open epoch has come to its end.
    pub(crate) fn due(&self, accesses: u64) -> bool {
        accesses >= self.next_close
    }

    /// Closes the open epoch at `now_ns`, with the run's totals and placement then.
    pub(crate) fn close(&mut self, now_ns: f64, accesses: u64, totals: &[TierTotals], placement: &Placement) {
        let fast: u64 = totals.first().map_or(0, |t| t.reads + t.writes);
        let all: u64 = totals.iter().map(|t| t.reads + t.writes).sum();
        let migrated: u64 = totals.iter().map(|t| t.copy_write_bytes).sum();
        let ranges = self.counts.len();
        let mut pages_in = vec![0u64; ranges * self.tiers];
        let per_range = self.timeline.pages_per_range as usize;
        for (page, t) in placement.tiers.iter().enumerate() {
            if t.is_placed() && t.index() < self.tiers {
                pages_in[(page / per_range).min(ranges - 1) * self.tiers + t.index()] += 1;
            }
        }
        let tier = pages_in
            .chunks(self.tiers)
            .map(|n| {
                let most = *n.iter().max().unwrap_or(&0);
                (most > 0).then(|| n.iter().position(|&c| c == most).unwrap_or(0) as u8)
            })
            .collect();
        self.timeline.epochs.push(Epoch {
            end_ns: now_ns,
            accesses: all - self.closed.0,
            fast_accesses: fast - self.closed.1,
            bytes_migrated: migrated - self.closed.2,
            tier,
            range_accesses: std::mem::replace(&mut self.counts, vec![0; ranges]),
        });
        self.closed = (all, fast, migrated);
        if self.timeline.epochs.len() >= MAX_EPOCHS {
            self.halve();
        }
        while self.next_close <= accesses {
            self.next_close += self.epoch_accesses;
        }
    }

    /// Merges neighbouring epochs two by two (a stream longer than it said): the record keeps
    /// its bound, at half the resolution.
    fn halve(&mut self) {
        let epochs = std::mem::take(&mut self.timeline.epochs);
        let mut it = epochs.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.end_ns = b.end_ns;
                a.accesses += b.accesses;
                a.fast_accesses += b.fast_accesses;
                a.bytes_migrated += b.bytes_migrated;
                a.tier = b.tier;
                for (x, y) in a.range_accesses.iter_mut().zip(b.range_accesses) {
                    *x += y;
                }
            }
            self.timeline.epochs.push(a);
        }
        self.epoch_accesses *= 2;
    }

    /// The record, the open epoch closed at the run's end.
    pub(crate) fn finish(
        mut self,
        now_ns: f64,
        accesses: u64,
        totals: &[TierTotals],
        placement: &Placement,
    ) -> Timeline {
        let all: u64 = totals.iter().map(|t| t.reads + t.writes).sum();
        let migrated: u64 = totals.iter().map(|t| t.copy_write_bytes).sum();
        if all > self.closed.0 || migrated > self.closed.2 || self.timeline.epochs.is_empty() {
            self.close(now_ns, accesses, totals, placement);
        }
        self.timeline
    }
}
