//! Replaying an aggregated trace: each epoch's per-page counts become accesses again.
//!
//! An aggregated trace keeps how often each page was read and written per epoch, not the order,
//! threads or offsets; so every count is replayed as a random 64-byte access (lines within a page
//! visited in a scattered order, threads in turn), pages in increasing order within an epoch,
//! reads before writes. Tier traffic and per-page heat per epoch are exact; locality and
//! first-touch order within an epoch are not.

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
    /// Position in the epoch: entry, and accesses of that entry already emitted.
    entry: usize,
    emitted: u32,
    next_thread: u32,
    error: Option<TraceError>,
}

impl<R: Read> ExpandedTrace<R> {
    pub fn new(reader: TraceReader<R>) -> Self {
        let info = reader.info().clone();
        ExpandedTrace { reader, info, epoch: Vec::new(), entry: 0, emitted: 0, next_thread: 0, error: None }
    }
}

impl<R: Read + Send> AccessSource for ExpandedTrace<R> {
    fn info(&self) -> &WorkloadInfo {
        &self.info
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let threads = self.info.threads.max(1);
        // A recording's time besides its accesses (zero for anything else).
        let instructions = self.info.recording.as_ref().map_or(0, |r| r.instructions_per_access);
        let mut n = 0;
        while n < max {
            let Some(&(page, counts)) = self.epoch.get(self.entry) else {
                match self.reader.read_epoch_into(&mut self.epoch) {
                    Ok(true) => {
                        self.entry = 0;
                        self.emitted = 0;
                        continue;
                    }
                    Ok(false) => break,
                    Err(e) => {
                        self.error = Some(e);
                        self.epoch.clear();
                        break;
                    }
                }
            };
            let total = counts.reads + counts.writes;
            if self.emitted == total {
                self.entry += 1;
                self.emitted = 0;
                continue;
            }
            // Threads take the page's accesses in turn, so each thread's own j-th access of it is
            // the page's (j * threads + i)-th: each thread walks the lines LINE_STRIDE apart,
            // and repeats a line only after all 64 (with the stride applied to the page's count,
            // 16 threads would each see only 4 lines and the simulator would merge their
            // repeats as one transfer).
            let k = self.emitted as u64 / u64::from(threads.min(256));
            let addr = ((page as u64) << PAGE_SHIFT) + (k * LINE_STRIDE % LINES) * 64;
            let thread = self.next_thread as u8;
            self.next_thread = (self.next_thread + 1) % threads.min(256);
            buf.push(if self.emitted < counts.reads {
                Access::read(addr, 64, thread, instructions)
            } else {
                Access::write(addr, 64, thread, instructions)
            });
            self.emitted += 1;
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
