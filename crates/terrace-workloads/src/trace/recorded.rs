//! Recorded heat as an aggregated trace: what a live tracker saw, interval by interval, turned
//! into per-page access estimates and cut into epochs (`terrace record`, `terrace trace
//! import-damo`; docs/formats.md, "Recorded traces").
//!
//! A tracker does not count accesses: it sees a bit per page per interval (idle-page,
//! soft-dirty), or in how many of an interval's samples a region was accessed (DAMON). The
//! rule here: one observed touch of a page is [`ACCESSES_PER_TOUCH`] accesses, one per 64-byte
//! line, the least a page in use costs when each line is brought in once. So a DAMON region
//! accessed in `n` samples gives each of its pages `64 n` accesses that interval.
//!
//! Virtual addresses are sparse; the trace's pages are dense: every virtual page seen touched
//! in any interval gets an index, in address order, and the footprint is those pages. That is
//! known only at the end, so the intervals are buffered as spans (one per region or run of
//! pages, 32 bytes), never page by page.

use super::{TraceError, TraceForm, TraceWriter, PAGE_SHIFT};
use crate::{RecordingInfo, WorkloadInfo};
use std::io::Write;

/// The clock a recording's time is counted at: this host's, as /proc/cpuinfo's first "cpu MHz"
/// says, else 2 GHz (a choice: the middle of today's server clocks), for a host that does not say.
pub fn host_clock_ghz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map(|mhz| mhz / 1000.0)
        .filter(|ghz| (0.1..=10.0).contains(ghz))
        .unwrap_or(2.0)
}

/// Accesses one observed touch of a 4 KiB page stands for: one per 64-byte line.
pub const ACCESSES_PER_TOUCH: u64 = 64;

/// Pages `[first_page, first_page + pages)` (virtual page numbers), each read `reads` and
/// written `writes` times (estimates) in one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub first_page: u64,
    pub pages: u64,
    pub reads: u64,
    pub writes: u64,
}

/// What one interval saw: spans that do not overlap (overlapping ones add up).
pub type Interval = Vec<Span>;

/// Why recorded intervals cannot become a trace.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("nothing was recorded: no interval saw a page accessed")]
    Empty,
    #[error(
        "the recording touched {pages} distinct pages ({gib} GiB), more than the {max} GiB a trace may \
         hold; record a shorter run or a smaller program",
        gib = pages >> (30 - PAGE_SHIFT),
        max = WorkloadInfo::MAX_FOOTPRINT_BYTES >> 30
    )]
    TooLarge { pages: u64 },
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// The dense page index: sorted, disjoint runs of virtual pages, each with its first index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DensePages {
    /// (first virtual page, pages, first index)
    runs: Vec<(u64, u64, u64)>,
    pages: u64,
}

impl DensePages {
    /// Every page of every span with a count, merged into runs.
    pub fn of(intervals: &[Interval]) -> Self {
        let mut spans: Vec<(u64, u64)> = intervals
            .iter()
            .flatten()
            .filter(|s| s.pages > 0 && s.reads + s.writes > 0)
            .map(|s| (s.first_page, s.first_page.saturating_add(s.pages)))
            .collect();
        spans.sort_unstable();
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        let mut pages = 0u64;
        for (start, end) in spans {
            match runs.last_mut() {
                Some((first, len, _)) if start <= *first + *len => {
                    let grown = end.max(*first + *len) - *first;
                    pages += grown - *len;
                    *len = grown;
                }
                _ => {
                    runs.push((start, end - start, pages));
                    pages += end - start;
                }
            }
        }
        DensePages { runs, pages }
    }

    /// The runs of virtual pages, in index order, as (first address, pages): where each of the
    /// trace's pages was in the program ([`RecordingInfo::addresses`]).
    pub fn address_runs(&self) -> Vec<(u64, u64)> {
        self.runs.iter().map(|&(first, len, _)| (first << PAGE_SHIFT, len)).collect()
    }

    /// Distinct pages touched.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// The dense index of virtual page `vpn`, if it was touched.
    pub fn index(&self, vpn: u64) -> Option<u64> {
        let i = self.runs.partition_point(|&(first, _, _)| first <= vpn).checked_sub(1)?;
        let (first, len, index) = self.runs[i];
        (vpn < first + len).then(|| index + (vpn - first))
    }
}

/// What a recording comes to: its pages, its accesses and its epoch length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub pages: u64,
    pub accesses: u64,
    /// Intervals that saw any access.
    pub active_intervals: u64,
    /// N: the mean accesses of an active interval (at least 1, at most `u32::MAX`), so that an
    /// epoch is about one interval.
    pub epoch_accesses: u32,
}

/// The estimated accesses of one interval: every span's pages times its reads and writes.
fn interval_accesses(interval: &[Span]) -> u64 {
    interval
        .iter()
        .map(|s| s.pages.saturating_mul(s.reads.saturating_add(s.writes)))
        .fold(0, u64::saturating_add)
}

/// Counts a recording's pages and accesses and picks its epoch length.
pub fn shape(intervals: &[Interval], dense: &DensePages) -> Result<Shape, RecordError> {
    let mut accesses = 0u64;
    let mut active = 0u64;
    for interval in intervals {
        let sum = interval_accesses(interval);
        accesses = accesses.saturating_add(sum);
        active += u64::from(sum > 0);
    }
    if accesses == 0 {
        return Err(RecordError::Empty);
    }
    let pages = dense.pages();
    if pages << PAGE_SHIFT > WorkloadInfo::MAX_FOOTPRINT_BYTES {
        return Err(RecordError::TooLarge { pages });
    }
    let epoch_accesses = accesses.div_ceil(active).clamp(1, u64::from(u32::MAX)) as u32;
    Ok(Shape { pages, accesses, active_intervals: active, epoch_accesses })
}

/// Writes recorded `intervals` as an aggregated trace to `out`: pages made dense, epochs of
/// [`Shape::epoch_accesses`] accesses (all but the last), a page's count split across an epoch
/// boundary where it falls on one. `name` and `description` name the workload; the header
/// carries `recording`. Returns `out`, flushed, and the recording's shape.
pub fn write_recorded<W: Write>(
    intervals: &[Interval],
    name: &str,
    description: &str,
    mut recording: RecordingInfo,
    out: W,
) -> Result<(W, Shape), RecordError> {
    let dense = DensePages::of(intervals);
    let shape = shape(intervals, &dense)?;
    let runs = dense.address_runs();
    if runs.len() <= RecordingInfo::MAX_ADDRESS_RUNS {
        recording.addresses = runs;
    }
    // An epoch is about one interval: its accesses carry the interval's time as instructions.
    let per_access =
        recording.interval_us as f64 * 1e3 * recording.clock_ghz / f64::from(shape.epoch_accesses);
    recording.instructions_per_access = per_access.round().clamp(0.0, f64::from(u32::MAX)) as u32;
    // And each interval its own time, however many accesses it was estimated at.
    let active: Vec<u64> = intervals.iter().map(|i| interval_accesses(i)).filter(|&a| a > 0).collect();
    if active.len() <= RecordingInfo::MAX_INTERVALS {
        recording.interval_accesses = active;
    }
    let footprint_bytes = shape.pages << PAGE_SHIFT;
    let info = WorkloadInfo {
        name: name.to_string(),
        description: description.to_string(),
        footprint_bytes,
        // The aggregated form keeps no threads: replayed in turn by one.
        threads: 1,
        scale: 1.0,
        // Half of what was touched: a fast tier that cannot hold it all, so placement matters.
        suggested_fast_bytes: (shape.pages / 2).max(1) << PAGE_SHIFT,
        accesses: shape.accesses,
        recording: Some(recording),
    };
    let form = TraceForm::Aggregated { epoch_accesses: shape.epoch_accesses };
    let mut writer = TraceWriter::new(out, info, form)?;
    let mut sorted: Vec<&Span> = Vec::new();
    for interval in intervals {
        sorted.clear();
        sorted.extend(interval.iter().filter(|s| s.reads + s.writes > 0));
        sorted.sort_unstable_by_key(|s| s.first_page);
        for s in &sorted {
            for vpn in s.first_page..s.first_page.saturating_add(s.pages) {
                let page = dense.index(vpn).expect("every counted page is indexed") as u32;
                writer.write_page_counts(page, s.reads, s.writes)?;
            }
        }
    }
    Ok((writer.finish()?, shape))
}

/// Clips spans to mapped ranges: `regions` as ([start, end) addresses, reads and writes per
/// page) against the mapped `[start, end)` address ranges, in pages, pages partly inside
/// counted whole. DAMON's regions cover the gaps between mappings too; only mapped pages hold
/// memory.
pub fn clip_to_mapped(
    regions: impl IntoIterator<Item = (u64, u64, u64, u64)>,
    mapped: &[(u64, u64)],
    out: &mut Interval,
) {
    for (start, end, reads, writes) in regions {
        if reads + writes == 0 {
            continue;
        }
        for &(lo, hi) in mapped {
            let (a, b) = (start.max(lo), end.min(hi));
            if a >= b {
                continue;
            }
            let first = a >> PAGE_SHIFT;
            let last = (b - 1) >> PAGE_SHIFT;
            out.push(Span { first_page: first, pages: last - first + 1, reads, writes });
        }
    }
}

/// Spans of a process's pages from regions of *physical* memory (DAMON's `paddr`): each page
/// present at a frame takes the counts of the region holding its frame. `frames` gives (frame,
/// virtual page) sorted by frame; `regions` are ([start, end) physical addresses, reads and
/// writes per page), disjoint. The cost is a binary search per accessed region and the pages
/// found, not a search per page: most of a program's memory is cold in most intervals.
pub fn by_frame(frames: &[(u64, u64)], regions: &[(u64, u64, u64, u64)], out: &mut Interval) {
    for &(start, end, reads, writes) in regions {
        if reads + writes == 0 || end <= start {
            continue;
        }
        let (first, last) = (start >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT);
        let from = frames.partition_point(|f| f.0 < first);
        for &(_, vpn) in frames[from..].iter().take_while(|f| f.0 <= last) {
            match out.last_mut() {
                Some(s) if s.first_page + s.pages == vpn && s.reads == reads && s.writes == writes => {
                    s.pages += 1
                }
                _ => out.push(Span { first_page: vpn, pages: 1, reads, writes }),
            }
        }
    }
}

/// A page seen accessed in a scan's interval ([`by_page_bits`]): the idle-page bitmap's bit
/// cleared, or soft-dirty set (a write is an access).
pub const SEEN_ACCESSED: u8 = 1;
/// A page seen written in a scan's interval: its soft-dirty bit set.
pub const SEEN_WRITTEN: u8 = 2;
/// A page seen in a sample of the address space: it stands for the pages not sampled, and
/// counts [`by_page_bits`]'s `sampled_weight` touches.
pub const SEEN_SAMPLED: u8 = 4;

/// Spans of a process's pages from one scan of its page table (idle-page, soft-dirty): `bits`
/// holds [`SEEN_ACCESSED`]/[`SEEN_WRITTEN`] for each page of the scan, and `runs` places them:
/// (index of the run's first page in `bits`, its first virtual page, pages). A bit says only
/// that a page was touched, once or a million times, so a page seen accessed counts
/// [`ACCESSES_PER_TOUCH`] accesses, as one DAMON sample does: reads, or writes when it was seen
/// written (one bit cannot tell how many of a written page's accesses were reads); a page seen
/// in a sample ([`SEEN_SAMPLED`]: one part in `sampled_weight` of the address space was watched)
/// counts `sampled_weight` touches, so that the interval's total is an unbiased estimate.
/// Neighbouring pages with equal counts make one span.
pub fn by_page_bits(
    runs: impl IntoIterator<Item = (u32, u64, u64)>,
    bits: &[u8],
    sampled_weight: u64,
    out: &mut Interval,
) {
    for (first, vpn, pages) in runs {
        for k in 0..pages {
            let Some(&b) = bits.get(first as usize + k as usize) else { break };
            if b & (SEEN_ACCESSED | SEEN_WRITTEN) == 0 {
                continue;
            }
            let touches = if b & SEEN_SAMPLED != 0 { sampled_weight } else { 1 };
            let accesses = touches * ACCESSES_PER_TOUCH;
            let (reads, writes) = if b & SEEN_WRITTEN != 0 { (0, accesses) } else { (accesses, 0) };
            let page = vpn + k;
            match out.last_mut() {
                Some(s) if s.first_page + s.pages == page && s.reads == reads && s.writes == writes => {
                    s.pages += 1
                }
                _ => out.push(Span { first_page: page, pages: 1, reads, writes }),
            }
        }
    }
}

/// Spans of the pages an interval's samples hit (the perf sampler): `samples` holds each
/// sample's virtual page and whether it was a store, and is sorted here. A sample stands for
/// `per_sample` accesses of its kind (the sampling period: one sample in that many load or store
/// instructions), so a page's counts are its samples of each kind times the period. Neighbouring
/// pages with equal counts make one span.
pub fn by_samples(samples: &mut [(u64, bool)], per_sample: u64, out: &mut Interval) {
    samples.sort_unstable();
    let mut i = 0;
    while i < samples.len() {
        let page = samples[i].0;
        let (mut reads, mut writes) = (0u64, 0u64);
        while i < samples.len() && samples[i].0 == page {
            if samples[i].1 {
                writes += per_sample;
            } else {
                reads += per_sample;
            }
            i += 1;
        }
        match out.last_mut() {
            Some(s) if s.first_page + s.pages == page && s.reads == reads && s.writes == writes => {
                s.pages += 1
            }
            _ => out.push(Span { first_page: page, pages: 1, reads, writes }),
        }
    }
}

/// Tells an interval's writes apart with soft-dirty beside a tracker that cannot (DAMON):
/// `written` lists the virtual pages seen written in the interval, sorted. Of a written page's
/// estimated accesses, [`ACCESSES_PER_TOUCH`] become writes (one touch: the bit says it was
/// written, not how often) and the rest stay reads; a written page the tracker did not see gets
/// one touch of writes. Spans are left sorted by address.
pub fn mark_written(interval: &mut Interval, written: &[u64]) {
    if written.is_empty() {
        return;
    }
    interval.sort_unstable_by_key(|s| s.first_page);
    let spans = std::mem::take(interval);
    let mut w = 0; // the next written page not yet placed
    let push = |out: &mut Interval, first_page: u64, pages: u64, reads: u64, writes: u64| {
        if pages == 0 {
            return;
        }
        match out.last_mut() {
            Some(s) if s.first_page + s.pages == first_page && s.reads == reads && s.writes == writes => {
                s.pages += pages
            }
            _ => out.push(Span { first_page, pages, reads, writes }),
        }
    };
    for s in spans {
        let end = s.first_page + s.pages;
        // Written pages before this span: seen only by soft-dirty.
        while w < written.len() && written[w] < s.first_page {
            push(interval, written[w], 1, 0, ACCESSES_PER_TOUCH);
            w += 1;
        }
        let total = s.reads + s.writes;
        let written_writes = s.writes.max(ACCESSES_PER_TOUCH.min(total));
        let mut at = s.first_page;
        while w < written.len() && written[w] < end {
            let page = written[w];
            push(interval, at, page - at, s.reads, s.writes);
            push(interval, page, 1, total - written_writes, written_writes);
            at = page + 1;
            w += 1;
        }
        push(interval, at, end - at, s.reads, s.writes);
    }
    for &page in &written[w..] {
        push(interval, page, 1, 0, ACCESSES_PER_TOUCH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceReader;
    use proptest::prelude::*;
    use terrace_model::PageCounts;

    #[test]
    fn samples_count_their_period_by_page_and_kind() {
        // Pages 7 and 8: two loads each; page 9: a load and a store; page 12: three stores.
        let mut samples = vec![(9, true), (7, false), (12, true), (8, false), (12, true), (9, false)];
        samples.extend([(7, false), (8, false), (12, true)]);
        let mut out = Interval::new();
        by_samples(&mut samples, 1000, &mut out);
        let span = |first_page, pages, reads, writes| Span { first_page, pages, reads, writes };
        assert_eq!(out, vec![span(7, 2, 2000, 0), span(9, 1, 1000, 1000), span(12, 1, 0, 3000)]);
    }

    /// A scan's bits become spans: untouched pages none, accessed ones reads, written ones writes,
    /// neighbours with equal counts merged, and runs of the scan kept apart by their addresses.
    #[test]
    fn page_bits_become_read_and_write_spans() {
        // Run 0: pages 100..104 at bits[0..4]; run 1: pages 200..202 at bits[4..6].
        let runs = [(0u32, 100u64, 4u64), (4, 200, 2)];
        let bits =
            [SEEN_ACCESSED, SEEN_ACCESSED, 0, SEEN_ACCESSED | SEEN_WRITTEN, SEEN_WRITTEN, SEEN_ACCESSED];
        let mut out = Interval::new();
        by_page_bits(runs, &bits, 8, &mut out);
        let t = ACCESSES_PER_TOUCH;
        assert_eq!(
            out,
            vec![
                Span { first_page: 100, pages: 2, reads: t, writes: 0 },
                Span { first_page: 103, pages: 1, reads: 0, writes: t },
                Span { first_page: 200, pages: 1, reads: 0, writes: t },
                Span { first_page: 201, pages: 1, reads: t, writes: 0 },
            ]
        );
        // Bits shorter than the runs (a mapping grew since the scan): the rest is unseen.
        let mut out = Interval::new();
        by_page_bits([(0u32, 100u64, 10u64)], &[SEEN_ACCESSED; 3], 1, &mut out);
        assert_eq!(out, vec![Span { first_page: 100, pages: 3, reads: t, writes: 0 }]);
        // Pages seen in a sample of one part in 8 count 8 touches; others seen whole, one.
        let sampled = SEEN_ACCESSED | SEEN_WRITTEN | SEEN_SAMPLED;
        let mut out = Interval::new();
        by_page_bits(
            [(0u32, 100u64, 4u64)],
            &[sampled, sampled, SEEN_ACCESSED | SEEN_WRITTEN, 0],
            8,
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Span { first_page: 100, pages: 2, reads: 0, writes: 8 * t },
                Span { first_page: 102, pages: 1, reads: 0, writes: t },
            ]
        );
    }

    /// Soft-dirty beside DAMON: a written page's first touch becomes writes, the rest stay reads;
    /// written pages DAMON missed get one touch of writes; unwritten pages keep their counts.
    #[test]
    fn written_pages_take_one_touch_of_writes() {
        let t = ACCESSES_PER_TOUCH;
        // Spans out of address order, as the frame-ordered recorder gives them.
        let mut interval = vec![
            Span { first_page: 20, pages: 2, reads: 3 * t, writes: 0 },
            Span { first_page: 10, pages: 4, reads: 2 * t, writes: 0 },
        ];
        mark_written(&mut interval, &[5, 11, 12, 21, 30]);
        assert_eq!(
            interval,
            vec![
                Span { first_page: 5, pages: 1, reads: 0, writes: t },
                Span { first_page: 10, pages: 1, reads: 2 * t, writes: 0 },
                Span { first_page: 11, pages: 2, reads: t, writes: t },
                Span { first_page: 13, pages: 1, reads: 2 * t, writes: 0 },
                Span { first_page: 20, pages: 1, reads: 3 * t, writes: 0 },
                Span { first_page: 21, pages: 1, reads: 2 * t, writes: t },
                Span { first_page: 30, pages: 1, reads: 0, writes: t },
            ]
        );
        let accesses = |i: &Interval| i.iter().map(|s| s.pages * (s.reads + s.writes)).sum::<u64>();
        // Counts are kept: only the pages DAMON missed add accesses.
        assert_eq!(accesses(&interval), 2 * 3 * t + 4 * 2 * t + 2 * t);
        // Nothing written: nothing changes.
        let mut same = vec![Span { first_page: 1, pages: 1, reads: t, writes: 0 }];
        mark_written(&mut same, &[]);
        assert_eq!(same, vec![Span { first_page: 1, pages: 1, reads: t, writes: 0 }]);
    }

    fn recording() -> RecordingInfo {
        RecordingInfo {
            tracker: "test".into(),
            interval_us: 100_000,
            resolution: "4 KiB page".into(),
            estimate: "test".into(),
            command: None,
            addresses: Vec::new(),
            clock_ghz: 2.0,
            instructions_per_access: 0,
            interval_accesses: Vec::new(),
        }
    }

    fn span(first_page: u64, pages: u64, reads: u64, writes: u64) -> Span {
        Span { first_page, pages, reads, writes }
    }

    /// Writes `intervals` and reads every epoch back.
    fn round_trip(intervals: &[Interval]) -> (Shape, Vec<Vec<(u32, PageCounts)>>) {
        let (bytes, shape) = write_recorded(intervals, "rec", "recorded", recording(), Vec::new()).unwrap();
        let mut reader = TraceReader::from_reader(&bytes[..]).unwrap();
        let kept = reader.info().recording.clone().unwrap();
        // The writer adds where the pages were and the time between accesses.
        let want = RecordingInfo {
            addresses: DensePages::of(intervals).address_runs(),
            instructions_per_access: (100_000.0 * 1e3 * 2.0 / f64::from(shape.epoch_accesses)).round() as u32,
            interval_accesses: intervals
                .iter()
                .map(|i| i.iter().map(|s| s.pages * (s.reads + s.writes)).sum::<u64>())
                .filter(|&a| a > 0)
                .collect(),
            ..recording()
        };
        assert_eq!(kept, want);
        for (i, &(first, _)) in kept.addresses.iter().enumerate() {
            let index = DensePages::of(intervals).index(first >> PAGE_SHIFT).unwrap();
            assert_eq!(kept.address_of(index), Some(first), "run {i}'s first page maps back");
        }
        let mut epochs = Vec::new();
        while let Some(e) = reader.next_epoch().unwrap() {
            epochs.push(e);
        }
        (shape, epochs)
    }

    /// An interval estimated at six times the others' accesses replays in one interval's time,
    /// as the program ran it, not in six (which would shift every later interval in time).
    #[test]
    fn each_interval_replays_in_its_own_wall_time() {
        use crate::AccessSource;
        // 600, 100 and 100 accesses: N = 267, so one figure for every access would give the
        // first interval 600 x 749,064 instructions, 2.25 intervals of 100 ms at 2 GHz.
        let intervals =
            [vec![span(0, 6, 100, 0)], vec![span(6, 1, 50, 50)], vec![], vec![span(7, 1, 100, 0)]];
        let (bytes, shape) = write_recorded(&intervals, "rec", "recorded", recording(), Vec::new()).unwrap();
        assert_eq!(shape.epoch_accesses, 267);
        let mut replay = crate::trace::ExpandedTrace::new(TraceReader::from_reader(&bytes[..]).unwrap());
        let mut accesses = Vec::new();
        while replay.fill(&mut accesses, 1000) > 0 {}
        assert!(replay.take_error().is_none());
        let instructions: Vec<u64> = accesses.iter().map(|a| u64::from(a.instructions)).collect();
        assert_eq!(instructions.len(), 800);
        // 100 ms at 2 GHz each: 2e8 / 600 = 333,333.3 and 2e8 / 100, rounded per access.
        assert_eq!(instructions[..600].iter().sum::<u64>(), 600 * 333_333);
        assert_eq!(instructions[600..700].iter().sum::<u64>(), 200_000_000);
        assert_eq!(instructions[700..].iter().sum::<u64>(), 200_000_000);
    }

    #[test]
    fn interval_counts_that_are_not_the_traces_are_refused() {
        let (bytes, _) = write_recorded(
            &[vec![span(0, 2, 10, 0)], vec![span(2, 1, 5, 0)]],
            "rec",
            "recorded",
            recording(),
            Vec::new(),
        )
        .unwrap();
        let info = TraceReader::from_reader(&bytes[..]).unwrap().info().clone();
        assert_eq!(info.recording.as_ref().unwrap().interval_accesses, vec![20, 5]);
        assert!(info.validate().is_ok());
        for bad in [vec![20, 4], vec![20, 5, 0], vec![26], vec![u64::MAX, 6]] {
            let mut info = info.clone();
            info.recording.as_mut().unwrap().interval_accesses = bad.clone();
            let err = info.validate().unwrap_err();
            assert!(
                err.contains("interval_accesses must be counts above 0 that add up to the trace's 25"),
                "{bad:?}: {err}"
            );
        }
        let mut info = info.clone();
        info.recording.as_mut().unwrap().interval_accesses = vec![1; RecordingInfo::MAX_INTERVALS + 1];
        assert!(info.validate().unwrap_err().contains("at most 16384 are kept"));
    }

    #[test]
    fn sparse_pages_become_dense_in_address_order() {
        let d = DensePages::of(&[vec![span(1000, 2, 1, 0), span(10, 1, 0, 1)], vec![span(1001, 3, 1, 0)]]);
        assert_eq!(d.pages(), 5);
        assert_eq!(d.index(10), Some(0));
        assert_eq!(d.index(1000), Some(1));
        assert_eq!(d.index(1003), Some(4));
        assert_eq!(d.index(11), None);
        assert_eq!(d.index(1004), None);
        assert_eq!(d.index(0), None);
    }

    #[test]
    fn a_count_across_an_epoch_boundary_is_split() {
        // Two intervals of 100 accesses: N = 100. The first interval's page 0 (60) fills 60,
        // page 1's 40 reads fill the epoch; the second interval is one page of 100.
        let (shape, epochs) =
            round_trip(&[vec![span(0, 1, 60, 0), span(1, 1, 30, 10)], vec![span(5, 1, 0, 100)]]);
        assert_eq!(shape.epoch_accesses, 100);
        assert_eq!(epochs.len(), 2);
        assert_eq!(
            epochs[0],
            vec![(0, PageCounts { reads: 60, writes: 0 }), (1, PageCounts { reads: 30, writes: 10 })]
        );
        assert_eq!(epochs[1], vec![(2, PageCounts { reads: 0, writes: 100 })]);
        // Uneven: 150 then 50 accesses, N = 100; page 0's 150 reads straddle the boundary.
        let (_, epochs) = round_trip(&[vec![span(0, 1, 150, 0)], vec![span(1, 1, 50, 0)]]);
        assert_eq!(epochs[0], vec![(0, PageCounts { reads: 100, writes: 0 })]);
        assert_eq!(
            epochs[1],
            vec![(0, PageCounts { reads: 50, writes: 0 }), (1, PageCounts { reads: 50, writes: 0 })]
        );
    }

    #[test]
    fn nothing_recorded_is_refused() {
        let r = write_recorded(&[vec![], vec![span(3, 2, 0, 0)]], "rec", "d", recording(), Vec::new());
        assert!(matches!(r, Err(RecordError::Empty)), "{:?}", r.map(|(_, s)| s));
    }

    #[test]
    fn regions_are_clipped_to_mappings() {
        let mut out = Vec::new();
        let mapped = [(0x1000, 0x3000), (0x10_000, 0x20_000)];
        clip_to_mapped(
            [(0x0, 0x18_000, 5, 0), (0x30_000, 0x40_000, 7, 0), (0, 0x0100_0000, 0, 0)],
            &mapped,
            &mut out,
        );
        assert_eq!(out, vec![span(1, 2, 5, 0), span(0x10, 8, 5, 0)]);
    }

    #[test]
    fn pages_take_their_frames_regions_counts() {
        let regions = [(0x10_000, 0x20_000, 3, 0), (0x20_000, 0x30_000, 0, 0), (0x40_000, 0x50_000, 5, 0)];
        let mut out = Vec::new();
        // Pages 100..105 at frames 0x10, 0x11 (region 0), 0x25 (cold), 0x41 (region 2), 0x99
        // and 0x5 (in no region); sorted by frame.
        let mut frames = vec![(0x10, 100), (0x11, 101), (0x25, 102), (0x41, 103), (0x99, 104), (0x5, 105)];
        frames.sort_unstable();
        by_frame(&frames, &regions, &mut out);
        assert_eq!(out, vec![span(100, 2, 3, 0), span(103, 1, 5, 0)]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every epoch but the last holds exactly N accesses, the last at most N; every count is
        /// kept (per page, summed over epochs); every page is inside the footprint.
        #[test]
        fn epochs_are_exact_and_counts_conserved(
            intervals in prop::collection::vec(
                prop::collection::vec((0u64..64, 1u64..4, 0u64..300, 0u64..300), 0..5), 1..8)
        ) {
            let intervals: Vec<Interval> = intervals
                .into_iter()
                .map(|v| v.into_iter().map(|(p, n, r, w)| span(p * 5, n, r, w)).collect())
                .collect();
            let dense = DensePages::of(&intervals);
            let total: u64 = intervals.iter().flatten().map(|s| s.pages * (s.reads + s.writes)).sum();
            if total == 0 {
                return Ok(());
            }
            // Expected per dense page: reads and writes summed over intervals.
            let mut expected = vec![(0u64, 0u64); dense.pages() as usize];
            for s in intervals.iter().flatten().filter(|s| s.reads + s.writes > 0) {
                for vpn in s.first_page..s.first_page + s.pages {
                    let i = dense.index(vpn).unwrap() as usize;
                    expected[i].0 += s.reads;
                    expected[i].1 += s.writes;
                }
            }
            let (shape, epochs) = round_trip(&intervals);
            prop_assert_eq!(shape.accesses, total);
            let mut got = vec![(0u64, 0u64); dense.pages() as usize];
            for (k, e) in epochs.iter().enumerate() {
                let sum: u64 = e.iter().map(|(_, c)| u64::from(c.reads) + u64::from(c.writes)).sum();
                if k + 1 < epochs.len() {
                    prop_assert_eq!(sum, u64::from(shape.epoch_accesses));
                } else {
                    prop_assert!(sum <= u64::from(shape.epoch_accesses) && sum > 0);
                }
                for (p, c) in e {
                    prop_assert!(u64::from(*p) < shape.pages);
                    got[*p as usize].0 += u64::from(c.reads);
                    got[*p as usize].1 += u64::from(c.writes);
                }
            }
            prop_assert_eq!(got, expected);
        }
    }
}
