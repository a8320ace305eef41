//! Replaying an aggregated trace: each epoch's per-page counts become accesses again.
//!
//! An aggregated trace keeps how often each page was read and written per epoch, not the order,
//! threads or offsets; so every count is replayed as a random 64-byte access (lines within a page
//! visited in a scattered order, threads in turn). Knowing nothing of the order, the replay
//! spreads each page's accesses evenly over the epoch, its writes evenly among its reads, and
//! has pages no earlier epoch touched first touched in address order across the epoch (as an
//! initialisation loop would). Tier traffic and per-page heat per epoch are exact; locality and
//! the order within an epoch are not. docs/formats.md, "Replaying an aggregated trace", gives
//! what this order measured against exact traces and against the order before it.

use super::{TraceError, TraceReader, PAGE_SHIFT};
use crate::{AccessSource, WorkloadInfo};
use std::io::Read;
use terrace_model::{Access, PageCounts, PageIdx};

/// Lines per 4 KiB page.
const LINES: u64 = 64;
/// A stride coprime with 64, so consecutive accesses to one page land on lines far apart
/// (never the next line: the simulator would take that for a sequential stream).
const LINE_STRIDE: u64 = 37;

/// An [`AccessSource`] over an aggregated trace.
pub struct ExpandedTrace<R: Read> {
    reader: TraceReader<R>,
    info: WorkloadInfo,
    epoch: Vec<(PageIdx, PageCounts)>,
    /// Per entry of the epoch: accesses already emitted, when the next one falls and the time
    /// between two ([`EPOCH`] fixed point).
    emitted: Vec<u32>,
    next: Vec<u64>,
    step: Vec<u64>,
    /// Pages an earlier epoch touched, a bit each.
    touched: Vec<u64>,
    /// A calendar queue over the epoch: `due[b]` holds the entries whose next access falls in
    /// the b-th of `due.len()` equal parts of it, in the order they were scheduled.
    due: Vec<Vec<u32>>,
    bucket: usize,
    pos: usize,
    error: Option<TraceError>,
    /// A recording's time besides its accesses: each interval's accesses and the instructions
    /// before each of them (`RecordingInfo::interval_instructions`), the current interval and
    /// the accesses left in it, and the instructions of accesses past them
    /// (`instructions_per_access`, or 0 for anything but a recording).
    intervals: Vec<(u64, u32)>,
    interval: usize,
    left_in_interval: u64,
    instructions: u32,
}

/// The epoch's length in fixed point: `1 << EPOCH_SHIFT`.
const EPOCH_SHIFT: u32 = 40;
const EPOCH: u64 = 1 << EPOCH_SHIFT;
/// The most parts the calendar cuts an epoch into: finer than the simulator's 1,024-access
/// slices for epochs up to 4 million accesses; within a part, entries take turns.
const MAX_BUCKETS: u64 = 4096;

impl<R: Read> ExpandedTrace<R> {
    pub fn new(reader: TraceReader<R>) -> Self {
        let info = reader.info().clone();
        let pages = info.footprint_bytes.div_ceil(1 << PAGE_SHIFT);
        let recording = info.recording.as_ref();
        let intervals: Vec<(u64, u32)> = recording
            .map(|r| r.interval_accesses.iter().copied().zip(r.interval_instructions()).collect())
            .unwrap_or_default();
        ExpandedTrace {
            left_in_interval: intervals.first().map_or(0, |i| i.0),
            intervals,
            interval: 0,
            instructions: recording.map_or(0, |r| r.instructions_per_access),
            reader,
            info,
            epoch: Vec::new(),
            emitted: Vec::new(),
            next: Vec::new(),
            step: Vec::new(),
            touched: vec![0; pages.div_ceil(64) as usize],
            due: Vec::new(),
            bucket: 0,
            pos: 0,
            error: None,
        }
    }

    /// Instructions before the next access: its interval's, while the recording's intervals
    /// last (an access's interval is its place in the stream: the intervals' counts were cut
    /// into epochs in order), the one figure for every access otherwise.
    fn next_instructions(&mut self) -> u32 {
        while self.left_in_interval == 0 {
            let Some(&(accesses, _)) = self.intervals.get(self.interval + 1) else {
                return self.instructions;
            };
            self.interval += 1;
            self.left_in_interval = accesses;
        }
        self.left_in_interval -= 1;
        self.intervals[self.interval].1
    }

    /// Files entry `e` under the part of the epoch its next access falls in.
    fn schedule(&mut self, e: usize) {
        let buckets = self.due.len();
        let b = ((self.next[e] * buckets as u64) >> EPOCH_SHIFT) as usize;
        self.due[b.clamp(self.bucket, buckets - 1)].push(e as u32);
    }

    /// The next entry and its index among its accesses, or `None` at the end of the epoch.
    fn next_in_epoch(&mut self) -> Option<(usize, u32)> {
        loop {
            let list = self.due.get(self.bucket)?;
            if let Some(&e) = list.get(self.pos) {
                self.pos += 1;
                let e = e as usize;
                let c = self.epoch[e].1;
                let j = self.emitted[e];
                self.emitted[e] += 1;
                if j + 1 < c.reads + c.writes {
                    self.next[e] += self.step[e];
                    self.schedule(e);
                }
                return Some((e, j));
            }
            self.due[self.bucket].clear();
            self.bucket += 1;
            self.pos = 0;
        }
    }

    /// Times every entry's accesses. Each page's are spread evenly over the epoch from its
    /// first on, `step = (EPOCH - first) / total` apart. A page no earlier epoch touched is
    /// first touched at `rank / new` of the epoch, the new pages in address order (as a
    /// program's initialisation would touch them), so first-touch placement follows addresses
    /// rather than heat. A page touched before is first touched at `e / n` of its step (the
    /// e-th of the epoch's n entries), so pages of equal counts take turns in address order,
    /// as a sweep would, rather than all falling at once.
    fn start_epoch(&mut self) {
        let n = self.epoch.len();
        self.emitted.clear();
        self.emitted.resize(n, 0);
        self.next.clear();
        self.step.clear();
        let is_new = |touched: &[u64], page: usize| {
            touched.get(page / 64).is_some_and(|w| w & (1 << (page % 64)) == 0)
        };
        let new = self.epoch.iter().filter(|(p, _)| is_new(&self.touched, *p as usize)).count() as u128;
        let mut rank = 0u128;
        for (e, &(page, c)) in self.epoch.iter().enumerate() {
            let total = u64::from(c.reads + c.writes).max(1);
            let page = page as usize;
            if is_new(&self.touched, page) {
                let first = (rank * u128::from(EPOCH) / new) as u64;
                rank += 1;
                self.next.push(first);
                self.step.push((EPOCH - first) / total);
                self.touched[page / 64] |= 1 << (page % 64);
            } else {
                let step = EPOCH / total;
                self.next.push((u128::from(step) * e as u128 / n as u128) as u64);
                self.step.push(step);
            }
        }
        let accesses: u64 = self.epoch.iter().map(|(_, c)| u64::from(c.reads + c.writes)).sum();
        let buckets = accesses.clamp(1, MAX_BUCKETS) as usize;
        self.due.iter_mut().for_each(Vec::clear);
        self.due.resize_with(buckets, Vec::new);
        self.bucket = 0;
        self.pos = 0;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&e| (self.next[e], e));
        for e in order {
            self.schedule(e);
        }
    }
}

impl<R: Read + Send> AccessSource for ExpandedTrace<R> {
    fn info(&self) -> &WorkloadInfo {
        &self.info
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let threads = self.info.threads.clamp(1, 256);
        let mut n = 0;
        while n < max {
            let Some((e, j)) = self.next_in_epoch() else {
                match self.reader.read_epoch_into(&mut self.epoch) {
                    Ok(true) => {
                        self.start_epoch();
                        continue;
                    }
                    Ok(false) => break,
                    Err(e) => {
                        self.error = Some(e);
                        self.epoch.clear();
                        self.start_epoch();
                        break;
                    }
                }
            };
            let (page, counts) = self.epoch[e];
            // The page's accesses go to the threads in turn (starting at a thread of its own), so
            // each thread's k-th access of it is the page's (k * threads + i)-th: each thread
            // walks the lines LINE_STRIDE apart and repeats a line only after all 64 (with the
            // stride applied to the page's count, 16 threads would each see only 4 lines and the
            // simulator would merge their repeats as one transfer).
            let thread = ((u64::from(j) + page as u64) % u64::from(threads)) as u8;
            let k = u64::from(j) / u64::from(threads);
            let addr = ((page as u64) << PAGE_SHIFT) + (k * LINE_STRIDE % LINES) * 64;
            // The page's writes spread evenly among its reads (the j-th access is a write when
            // it completes another 1/writes of the page's accesses).
            let total = u64::from(counts.reads + counts.writes);
            let w = u64::from(counts.writes);
            let is_write = (u64::from(j) + 1) * w / total > u64::from(j) * w / total;
            let instructions = self.next_instructions();
            buf.push(if is_write {
                Access::write(addr, 64, thread, instructions)
            } else {
                Access::read(addr, 64, thread, instructions)
            });
            n += 1;
        }
        n
    }

    fn take_error(&mut self) -> Option<TraceError> {
        self.error.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::aggregate;
    use terrace_model::AccessKind;

    /// `accesses` over `pages` pages, aggregated in epochs of `epoch` accesses and replayed.
    fn replay(pages: u64, epoch: u32, accesses: Vec<Access>) -> Vec<Access> {
        let info = WorkloadInfo {
            name: "replay".into(),
            description: String::new(),
            footprint_bytes: pages * 4096,
            threads: 1,
            scale: 1.0,
            suggested_fast_bytes: 4096,
            accesses: accesses.len() as u64,
            recording: None,
        };
        let mut source = crate::MemorySource::new(info, accesses);
        let bytes = aggregate(&mut source, epoch, Vec::new()).unwrap();
        let mut expanded = ExpandedTrace::new(TraceReader::from_reader(&bytes[..]).unwrap());
        let mut replayed = Vec::new();
        while expanded.fill(&mut replayed, 7) > 0 {}
        assert!(expanded.take_error().is_none());
        replayed
    }

    /// New pages are first touched in address order, however hot: epoch 1 touches page 49 51
    /// times and pages 0-48 once each in reverse, epoch 2 page 99 51 times and pages 50-98 in
    /// reverse, and the replay touches them in address order. Then, in epoch 3, a page read 10
    /// times among 90 others' single reads falls once every tenth of the epoch, not in one run.
    #[test]
    fn a_page_s_accesses_spread_over_the_epoch_and_new_pages_come_in_address_order() {
        let read = |page: u64| Access::read(page * 4096, 64, 0, 0);
        let mut a: Vec<Access> = (0..49).rev().map(read).collect();
        a.extend((0..51).map(|_| read(49)));
        a.extend((50..99).rev().map(read));
        a.extend((0..51).map(|_| read(99)));
        a.extend((0..10).map(|_| read(0)));
        a.extend((1..91).map(read));
        let r = replay(100, 100, a);
        assert_eq!(r.len(), 300);
        let mut first = Vec::new();
        for x in &r[..200] {
            if !first.contains(&(x.addr >> 12)) {
                first.push(x.addr >> 12);
            }
        }
        assert_eq!(first, (0..100).collect::<Vec<u64>>());
        let at: Vec<usize> = (0..100).filter(|&i| r[200 + i].addr >> 12 == 0).collect();
        assert_eq!(at.len(), 10);
        for (j, &i) in at.iter().enumerate() {
            assert!(i.abs_diff(10 * j) <= 1, "page 0's accesses at {at:?}");
        }
    }

    /// A page's writes fall evenly among its reads: 30 reads and 10 writes replay as a write
    /// after every three reads.
    #[test]
    fn a_page_s_writes_spread_among_its_reads() {
        let mut a: Vec<Access> = (0..30).map(|_| Access::read(0, 64, 0, 0)).collect();
        a.extend((0..10).map(|_| Access::write(0, 64, 0, 0)));
        let kinds: String =
            replay(1, 40, a).iter().map(|x| if x.kind == AccessKind::Write { 'w' } else { 'r' }).collect();
        assert_eq!(kinds, "rrrw".repeat(10));
    }

    /// However many threads share a hot page, each one visits all of its lines before it comes
    /// back to one, never the next line after the last.
    #[test]
    fn each_thread_walks_a_pages_lines_before_it_repeats_one() {
        for threads in [1u32, 2, 3, 16, 32] {
            // One page read 64 times per thread, in one epoch.
            let accesses: Vec<Access> =
                (0..64 * u64::from(threads)).map(|_| Access::read(0, 64, 0, 0)).collect();
            let info = WorkloadInfo {
                name: "hot page".into(),
                description: String::new(),
                footprint_bytes: 4096,
                threads,
                scale: 1.0,
                suggested_fast_bytes: 4096,
                accesses: accesses.len() as u64,
                recording: None,
            };
            let mut source = crate::MemorySource::new(info, accesses);
            let bytes = aggregate(&mut source, 1 << 20, Vec::new()).unwrap();
            let mut expanded = ExpandedTrace::new(TraceReader::from_reader(&bytes[..]).unwrap());
            let mut replayed = Vec::new();
            while expanded.fill(&mut replayed, 10_000) > 0 {}
            for t in 0..threads as u8 {
                let lines: Vec<u64> =
                    replayed.iter().filter(|a| a.thread == t).map(|a| a.addr / 64).collect();
                let distinct: std::collections::BTreeSet<u64> = lines.iter().copied().collect();
                assert_eq!((lines.len(), distinct.len()), (64, 64), "{threads} threads, thread {t}");
                assert!(lines.windows(2).all(|w| w[1] != w[0] + 1), "{threads} threads: a sequential step");
            }
        }
    }

    #[test]
    fn expansion_keeps_every_pages_reads_and_writes_per_epoch() {
        let mut gups = crate::build("gups", 3, 1.0 / 64.0).unwrap();
        let bytes = aggregate(gups.as_mut(), 50_000, Vec::new()).unwrap();
        let mut exact = Vec::new();
        let mut again = crate::build("gups", 3, 1.0 / 64.0).unwrap();
        again.fill(&mut exact, usize::MAX >> 8);
        let mut expanded = ExpandedTrace::new(TraceReader::from_reader(&bytes[..]).unwrap());
        let mut replayed = Vec::new();
        while expanded.fill(&mut replayed, 10_000) > 0 {}
        assert!(expanded.take_error().is_none());
        assert_eq!(replayed.len(), exact.len());
        for (e, r) in exact.chunks(50_000).zip(replayed.chunks(50_000)) {
            let count = |v: &[Access]| {
                let mut m = std::collections::BTreeMap::new();
                for a in v {
                    *m.entry((a.addr >> 12, a.kind as u8)).or_insert(0u32) += 1;
                }
                m
            };
            assert_eq!(count(e), count(r));
        }
    }
}
