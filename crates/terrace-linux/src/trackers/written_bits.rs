//! Written bits where the kernel has no soft-dirty: userfaultfd's asynchronous write-protection
//! (`UFFD_FEATURE_WP_ASYNC`, Linux 6.7), read and reset with PAGEMAP_SCAN.
//!
//! Every page of the program's anonymous memory is write-protected; the first write to a page
//! faults, and the kernel lifts the page's protection itself, at once (the program never waits
//! for Terrace). Each scan asks PAGEMAP_SCAN for the pages whose protection is gone and protects
//! them again in the same call (`PM_SCAN_WP_MATCHING`), as soft-dirty's read of
//! `/proc/PID/pagemap` and write of `clear_refs` do together, so what a scan reports is each page
//! written since the one before (where a sample of chunks was watched, a scan reads first and
//! protects after, once it knows which chunks the next interval watches: [`WrittenBits::take`]). It costs the program
//! what soft-dirty does: a fault on the first write to each page after each scan. Unlike
//! soft-dirty it needs a userfaultfd made inside the program ([`crate::remote_syscall`]), which
//! acts on one address space, so an exec takes a new one ([`WrittenBits::follow`]).
//!
//! A range's present pages are protected when it is registered, by the same call, which reports
//! those already written (in a range mapped since the last scan, or after an exec, written since
//! it); a page not there yet is protected at the first scan after its first touch, which
//! reports it written if that touch was a write (a read maps the shared zero page, which is
//! never reported: nothing was written). Protecting unpopulated pages ahead would fill the page
//! tables of every sparse reservation a program maps. If Terrace dies, the kernel closes the
//! descriptor, which lifts every protection.

use crate::pagemap_scan::PagemapScan;
use crate::userfaultfd::{Userfaultfd, UFFD_FEATURE_WP_ASYNC};
use std::io;

/// Whether this kernel and Terrace's privileges allow it (the probe of
/// [`crate::userfaultfd::probe_kernel_resolved`]); the error says what is missing.
pub fn works_here() -> Result<(), String> {
    crate::userfaultfd::probe_kernel_resolved()
}

/// Sampling is by aligned chunks of this many bytes (a huge page's): a chunk is protected whole
/// or not at all, so the calls per scan grow with the chunks sampled, not with the pages.
pub const CHUNK_BYTES: u64 = 2 << 20;
/// The sparsest sampling: one chunk in this many each interval, so every chunk is seen at least
/// once every this many intervals (6.4 s at the default 100 ms).
pub const MAX_EVERY: u64 = 64;
/// The fewest chunks an interval watches where the program has more: a sample of one or two
/// chunks would make the estimate swing with whichever chunk it hit (a program's writes gather
/// in few places), so a small program pays somewhat over the budget rather than be missed.
pub const MIN_CHUNKS_WATCHED: u64 = 8;

/// The written bits of one process, through a userfaultfd of its address space.
///
/// With a budget, the pages protected each interval are a sample: when the last interval's
/// estimated cost exceeds the budget ([`every_for`]; or a burst within an interval does,
/// [`WrittenBits::check_burst`]), only one 2 MiB chunk in `every` (a power of two, at most
/// [`MAX_EVERY`], and never fewer than [`MIN_CHUNKS_WATCHED`] chunks) is protected for the
/// next, the chunks whose number plus the interval's is a multiple of `every`, so each chunk is
/// sampled once every `every` intervals, in turn, as its neighbours are in the intervals
/// between. The others are left unprotected and cost nothing. The cost, one fault per page
/// written per interval and a TLB flush per chunk whose protection changes
/// ([`FLUSH_IN_FAULTS`]), then falls to about the budget, and what a scan reports is each
/// written page of the sampled chunks, which the caller counts `every` times (each stands for
/// the chunks not sampled): an unbiased estimate of the pages written, at a page's time
/// resolution of `every` intervals. This is DAMON's trade (one sampled page stands for its
/// region) applied to writes, and it is why DAMON can run always-on.
pub struct WrittenBits {
    uffd: Userfaultfd,
    pagemap: PagemapScan,
    pid: i32,
    /// Ranges registered, [start, end).
    registered: Vec<(u64, u64)>,
    /// Written pages a scan may cost before the next interval is sampled (`None`: every page,
    /// every interval).
    budget: Option<u64>,
    /// The interval running now protects one chunk in `every`.
    every: u64,
    /// The interval running now, counted from the start (the chunks' turn).
    round: u64,
    /// The program's minor faults when they were last looked at (a burst's first sign).
    process: procfs::process::Process,
    faults_seen: u64,
}

/// What a scan does to a piece of a range. At the end of an interval it first reads the written
/// pages of the chunks sampled in it, then, the next interval's sampling known, protects those
/// of the next again, releases those not sampled in it, and protects those new to it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Turn {
    /// Report its written pages and protect them again (every chunk, when every chunk was
    /// watched; a chunk watched in a range new since the last scan; or one watched in the
    /// interval that ends and the next, read already, for what was written since).
    Report,
    /// Sampled in the interval that ended only: lift the protection of its pages.
    Release,
    /// Sampled in the interval that begins only: protect its pages, reporting nothing (what the
    /// kernel calls written there is everything unprotected since its last turn).
    Protect,
    /// Report its written pages, leaving their protection as it is: a chunk read before the next
    /// interval's sampling is known, a chunk out of turn in a range new since the last scan
    /// (never protected), or one read in the middle of an interval.
    Count,
    /// Nothing to do.
    Skip,
}

/// The chunks (numbered by address / [`CHUNK_BYTES`]) that hold a page of `runs`.
fn chunks_of(runs: &[(u64, u64)]) -> std::collections::HashSet<u64> {
    runs.iter().flat_map(|&(s, e)| s / CHUNK_BYTES..=(e - 1) / CHUNK_BYTES).collect()
}

/// The runs of `runs` outside every run of `taken`, both sorted by address, each run
/// [start, end).
fn runs_minus(runs: &[(u64, u64)], taken: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut t = 0;
    for &(mut s, e) in runs {
        while t < taken.len() && taken[t].1 <= s {
            t += 1;
        }
        let mut u = t;
        while s < e && u < taken.len() && taken[u].0 < e {
            if taken[u].0 > s {
                out.push((s, taken[u].0));
            }
            s = s.max(taken[u].1);
            u += 1;
        }
        if s < e {
            out.push((s, e));
        }
    }
    out
}

/// Whether the chunk holding `addr` is sampled in interval `round` at one chunk in `every`.
pub fn sampled(addr: u64, round: u64, every: u64) -> bool {
    (addr / CHUNK_BYTES + round).is_multiple_of(every)
}

/// What one TLB flush of the program's cores costs it, in write-protect faults: each change of
/// a chunk's protection (protecting a chunk whose turn comes, releasing one whose turn ends, or
/// protecting the pages written in a chunk watched on) flushes the range from every core the
/// program runs on, an interrupt to each. Measured on the development host (a virtual machine,
/// where an interrupt between cores exits to the hypervisor): 11 us of a program's time per
/// flush (`mprotect` of one page from another thread, 1,950 a second, slowed a loop of random
/// reads and writes over 512 MiB by 3-5%), against about 1 us per fault (docs/live.md,
/// "Overhead"). On a machine without a hypervisor both cost less; the ratio is what counts here.
pub const FLUSH_IN_FAULTS: u64 = 10;

/// What an interval cost, estimated for the whole address space (what was seen, times the
/// sampling it was seen at), to choose the next interval's sampling from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cost {
    /// Pages written.
    pub pages: u64,
    /// Chunks holding a page written.
    pub written_chunks: u64,
    /// Chunks registered.
    pub chunks: u64,
}

/// The sampling for the next interval: one chunk in the least power of two that brings the
/// cost of an interval within `budget` faults, at most [`MAX_EVERY`]. Watching every chunk costs
/// a fault per page written and a flush per chunk written (each is protected again); one chunk in
/// `k` costs the faults of one chunk in `k` and, as the chunks take turns, a protection and a
/// release of one chunk in `k`, whether written or not, each a flush ([`FLUSH_IN_FAULTS`]).
pub fn every_for(cost: Cost, budget: u64) -> u64 {
    if cost.pages + FLUSH_IN_FAULTS * cost.written_chunks <= budget.max(1) {
        return 1;
    }
    every_in_turns(cost.pages, cost.chunks, budget)
}

/// The least power of two k from 2 to [`MAX_EVERY`] at which watching one chunk in k, in turn,
/// costs at most `budget` faults an interval: the faults of 1/k of `pages` written and a
/// protection and a release of 1/k of `chunks`.
fn every_in_turns(pages: u64, chunks: u64, budget: u64) -> u64 {
    (pages + 2 * FLUSH_IN_FAULTS * chunks).div_ceil(budget.max(1)).next_power_of_two().clamp(2, MAX_EVERY)
}

/// [`WrittenBits::sparsest`] for `chunks` chunks registered.
fn sparsest_for(chunks: u64) -> u64 {
    match chunks / MIN_CHUNKS_WATCHED {
        0 => 1,
        n => (1u64 << n.ilog2()).min(MAX_EVERY),
    }
}

/// The next interval's sampling after one at `every` whose report estimates `cost`:
/// [`every_for`], but sparser by any factor at once and denser by at most 2, as an estimate from
/// a few chunks is noisy and a low one would cost the program a burst.
fn next_every(every: u64, cost: Cost, budget: u64) -> u64 {
    every_for(cost, budget).max(every / 2)
}

/// The parts of [start, end) that no range of `old` covers (each [start, end), in order).
fn fresh_parts(start: u64, end: u64, old: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut covered: Vec<(u64, u64)> =
        old.iter().map(|&(s, e)| (s.max(start), e.min(end))).filter(|&(s, e)| s < e).collect();
    covered.sort_unstable();
    let mut out = Vec::new();
    let mut at = start;
    for (s, e) in covered {
        if s > at {
            out.push((at, s));
        }
        at = at.max(e);
    }
    if at < end {
        out.push((at, end));
    }
    out
}

/// The pieces of [start, end) that each scan treats alike, merged where neighbours are: `turn`
/// gives a chunk's, by its first address.
fn pieces(start: u64, end: u64, turn: impl Fn(u64) -> Turn) -> Vec<(u64, u64, Turn)> {
    let mut out: Vec<(u64, u64, Turn)> = Vec::new();
    if start >= end {
        return out;
    }
    let mut s = start;
    while s < end {
        let e = ((s / CHUNK_BYTES + 1) * CHUNK_BYTES).min(end);
        let t = turn(s);
        match out.last_mut() {
            Some(last) if last.2 == t && last.1 == s => last.1 = e,
            _ => out.push((s, e, t)),
        }
        s = e;
    }
    out
}

impl WrittenBits {
    /// Starts on `uffd`, a userfaultfd made inside process `pid`: nothing is registered yet.
    /// `budget`: the written pages a scan may cost before the next interval is sampled (`None`:
    /// every page, every interval).
    pub fn start(uffd: Userfaultfd, pid: i32, budget: Option<u64>) -> io::Result<Self> {
        let pagemap = PagemapScan::open(&pid.to_string())?;
        uffd.handshake_requiring(UFFD_FEATURE_WP_ASYNC)?;
        let process = procfs::process::Process::new(pid).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(WrittenBits {
            uffd,
            pagemap,
            pid,
            registered: Vec::new(),
            budget,
            every: 1,
            round: 0,
            process,
            faults_seen: 0,
        })
    }

    /// Sets the written pages a scan may cost from now on: a recording of several processes
    /// shares its budget among them as they come and go.
    pub fn set_budget(&mut self, budget: Option<u64>) {
        self.budget = budget;
    }

    /// Moves to `uffd`, a userfaultfd made inside the program that process `pid` exec'd: what
    /// was registered belonged to the address space it left.
    pub fn follow(&mut self, uffd: Userfaultfd) -> io::Result<()> {
        *self = WrittenBits::start(uffd, self.pid, self.budget)?;
        Ok(())
    }

    /// Registers and protects every range of `ranges` ([start, end) of anonymous private
    /// memory) not registered yet, appending to `out` the runs of its pages already written
    /// (present, not the zero page), and forgets registered ranges no longer among `ranges`
    /// (unmapped, or grown into a new one). A range new since the last call was mapped since
    /// it, so its written pages were written since it, as soft-dirty would report them in a
    /// new mapping or after an exec; only at the first call of a recording do they predate it,
    /// and the caller drops them. These are every written page of the range, not a sample. Its
    /// chunks not sampled in the interval running now are then released. Of a range grown past
    /// its old end (or merged with a neighbour) only the new part is: the scan reports the old
    /// part's writes, sampled as the rest. A range the kernel
    /// refuses (another userfaultfd has it, the mapping changed meanwhile) is left out, and
    /// tried again at the next call; returns how many were.
    pub fn register(
        &mut self,
        ranges: impl IntoIterator<Item = (u64, u64)>,
        out: &mut Vec<(u64, u64)>,
    ) -> usize {
        let mut refused = 0;
        let mut now = Vec::with_capacity(self.registered.len());
        for (s, e) in ranges {
            if self.registered.contains(&(s, e)) {
                now.push((s, e));
                continue;
            }
            let (round, every) = (self.round, self.every);
            // Only the parts not registered before are new: the rest (a range grown past its old
            // end, or merged with a neighbour) keeps its protection, or its release, and the
            // scan reports it as it does every chunk.
            let fresh = fresh_parts(s, e, &self.registered);
            let registered = self.uffd.register_wp(s, e - s).and_then(|()| {
                for &(fs, fe) in &fresh {
                    if every == 1 {
                        self.pagemap.take_written(fs, fe, out)?;
                        continue;
                    }
                    // A chunk out of turn is read and left unprotected: protecting it, only to
                    // release it, would cost the program two TLB flushes for nothing.
                    let turn = |a: u64| if sampled(a, round, every) { Turn::Report } else { Turn::Count };
                    for (ps, pe, t) in pieces(fs, fe, turn) {
                        self.do_turn(ps, pe, t, out)?;
                    }
                }
                Ok(())
            });
            match registered {
                Ok(()) => now.push((s, e)),
                Err(_) => refused += 1,
            }
        }
        self.registered = now;
        refused
    }

    /// Appends to `out` the runs of pages written in the interval that ends now, [start, end),
    /// of the chunks it sampled, and protects those of the next; returns the sampling of the
    /// interval that ended, one chunk in how many, the count each page reported stands for.
    pub fn take(&mut self, out: &mut Vec<(u64, u64)>) -> io::Result<u64> {
        let (round, every) = (self.round, self.every);
        let from = out.len();
        let Some(budget) = self.budget else {
            // Every chunk, every interval: one call a range reports and protects again.
            self.walk_whole(Turn::Report, out)?;
            self.round += 1;
            return Ok(1);
        };
        // Watching every chunk, one call a range reports and protects again: most intervals
        // watch every chunk next too. Watching a sample, the chunks watched are read first and
        // their protection left as it is: which of them stay watched depends on the next
        // interval's sampling, which depends on what they report, and a chunk about to be
        // released need not be protected again (each change of a chunk's protection flushes the
        // program's TLB, an interrupt to its core).
        if every == 1 {
            self.walk_whole(Turn::Report, out)?;
        } else {
            self.walk(|a| if sampled(a, round, every) { Turn::Count } else { Turn::Skip }, out)?;
        }
        let pages: u64 = out[from..].iter().map(|&(s, e)| (e - s) / 4096).sum();
        let written = chunks_of(&out[from..]).len() as u64;
        // The next interval's sampling, from this one's report: none while the budget holds.
        let cost = Cost { pages: pages * every, written_chunks: written * every, chunks: self.chunks() };
        let next = next_every(every, cost, budget).min(self.sparsest());
        tracing::debug!(round, every, next, pages, written, "written bits");
        // Then each chunk is set for the next interval: one watched in both and only read is
        // protected again, and what was written since it was read is reported too (once: the
        // runs already read are taken out); one watched in the interval that ends only is
        // released, one watched in the next only protected.
        let mut late = Vec::new();
        let turn = |a: u64| match (sampled(a, round, every), sampled(a, round + 1, next)) {
            (true, true) if every == 1 => Turn::Skip,
            (true, true) => Turn::Report,
            (true, false) => Turn::Release,
            (false, true) => Turn::Protect,
            (false, false) => Turn::Skip,
        };
        if every > 1 || next > 1 {
            self.walk(turn, &mut late)?;
        }
        if !late.is_empty() {
            let mut read: Vec<(u64, u64)> = out[from..].to_vec();
            read.sort_unstable();
            late.sort_unstable();
            out.extend(runs_minus(&late, &read));
        }
        self.round += 1;
        self.every = next;
        self.faults_seen = self.minor_faults();
        Ok(every)
    }

    /// Between scans: where the program has already written more pages of the chunks watched
    /// than the interval's budget, watches fewer of them for the rest of the interval (one in a
    /// larger power of two, a subset of those watched so far, the others released unread), so
    /// that a burst of writes after a quiet spell costs about the budget rather than a fault on
    /// each page it writes; the scan reports the chunks still watched, watched the whole
    /// interval, at the new sampling. `elapsed`: the share of the interval gone. A rise in the
    /// program's minor faults (one read of /proc/PID/stat) decides whether to count.
    pub fn check_burst(&mut self, elapsed: f64) -> io::Result<()> {
        let Some(budget) = self.budget else { return Ok(()) };
        let sparsest = self.sparsest();
        if self.every >= sparsest {
            return Ok(());
        }
        let faults = self.minor_faults();
        if faults.saturating_sub(self.faults_seen) <= budget / 2 {
            return Ok(());
        }
        self.faults_seen = faults;
        let (round, every) = (self.round, self.every);
        let mut written = Vec::new();
        self.walk(|a| if sampled(a, round, every) { Turn::Count } else { Turn::Skip }, &mut written)?;
        let pages: u64 = written.iter().map(|&(s, e)| (e - s) / 4096).sum();
        if pages <= budget {
            return Ok(());
        }
        let projected = (pages * every) as f64 / elapsed.clamp(0.05, 1.0);
        let next = every_in_turns(projected as u64, self.chunks(), budget).max(every * 2).min(sparsest);
        tracing::debug!(round, every, next, pages, elapsed, "written bits: a burst");
        self.walk(
            |a| if sampled(a, round, every) && !sampled(a, round, next) { Turn::Release } else { Turn::Skip },
            &mut Vec::new(),
        )?;
        self.every = next;
        Ok(())
    }

    /// The sparsest sampling that still watches [`MIN_CHUNKS_WATCHED`] chunks an interval, at
    /// most [`MAX_EVERY`]: a power of two.
    fn sparsest(&self) -> u64 {
        sparsest_for(self.chunks())
    }

    /// The chunks registered.
    fn chunks(&self) -> u64 {
        self.registered.iter().map(|&(s, e)| (e - 1) / CHUNK_BYTES - s / CHUNK_BYTES + 1).sum()
    }

    /// The program's minor faults so far (0 if they cannot be read).
    fn minor_faults(&self) -> u64 {
        self.process.stat().map_or(0, |s| s.minflt)
    }

    /// Does each registered range's pieces' `turn`, appending what a report finds to `out`.
    fn walk(&self, turn: impl Fn(u64) -> Turn + Copy, out: &mut Vec<(u64, u64)>) -> io::Result<()> {
        self.walk_pieces(|s, e| pieces(s, e, turn), out)
    }

    /// Does `turn` to each registered range whole.
    fn walk_whole(&self, turn: Turn, out: &mut Vec<(u64, u64)>) -> io::Result<()> {
        self.walk_pieces(|s, e| vec![(s, e, turn)], out)
    }

    fn walk_pieces(
        &self,
        pieces_of: impl Fn(u64, u64) -> Vec<(u64, u64, Turn)>,
        out: &mut Vec<(u64, u64)>,
    ) -> io::Result<()> {
        for &(s, e) in &self.registered {
            let done = pieces_of(s, e).into_iter().try_for_each(|(ps, pe, t)| self.do_turn(ps, pe, t, out));
            match done {
                Ok(()) => {}
                // Unmapped since it was registered: nothing of it to read.
                Err(err)
                    if err.raw_os_error() == Some(libc::ENOMEM)
                        || err.raw_os_error() == Some(libc::ENOENT) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Does `turn` to the piece [start, end), appending what a report or a count finds to `out`.
    fn do_turn(&self, start: u64, end: u64, turn: Turn, out: &mut Vec<(u64, u64)>) -> io::Result<()> {
        match turn {
            Turn::Report => self.pagemap.take_written(start, end, out),
            Turn::Release => self.uffd.write_protect(start, end - start, false),
            Turn::Protect => self.pagemap.take_written(start, end, &mut Vec::new()),
            Turn::Count => self.pagemap.written(start, end, out),
            Turn::Skip => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recording of this process's own writes: pages written between two scans come back
    /// once, pages only read or not touched never, and the values written stay.
    #[test]
    #[ignore = "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest"]
    fn each_scan_reports_the_pages_written_since_the_last() {
        if let Err(e) = works_here() {
            panic!("the kernel cannot resolve write-protect faults ({e}); this test runs in the guest");
        }
        use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
        let len = 16 * 4096usize;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p = unsafe { mmap_anonymous(None, len.try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }.unwrap();
        let base = p.as_ptr() as u64;
        // SAFETY: our mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u8>(), len) };
        // Pages 0-7 present, 8-15 untouched.
        mem[..8 * 4096].fill(1);
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        let mut bits = WrittenBits::start(uffd, std::process::id() as i32, None).unwrap();
        let page = |i: u64| (base + i * 4096, base + (i + 1) * 4096);
        let mut out = Vec::new();
        assert_eq!(bits.register([(base, base + len as u64)], &mut out), 0);
        assert_eq!(out, vec![(base, page(7).1)], "the pages written before the range was registered");
        out.clear();
        assert_eq!(bits.register([(base, base + len as u64)], &mut out), 0);
        assert!(out.is_empty(), "a registered range registers once: {out:x?}");
        assert_eq!(bits.take(&mut out).unwrap(), 1);
        assert!(out.is_empty(), "nothing written since the range was registered: {out:x?}");
        // Writes to 2, 3 (twice) and 9 (unpopulated until now); reads of 5 and 12 (unpopulated:
        // the zero page).
        mem[2 * 4096] = 7;
        mem[3 * 4096] = 8;
        mem[3 * 4096 + 1] = 9;
        mem[9 * 4096] = 10;
        let read = std::hint::black_box(mem[5 * 4096]) + std::hint::black_box(mem[12 * 4096]);
        assert_eq!(read, 1);
        assert_eq!(bits.take(&mut out).unwrap(), 1);
        assert_eq!(out, vec![(page(2).0, page(3).1), page(9)]);
        out.clear();
        assert_eq!(bits.take(&mut out).unwrap(), 1);
        assert!(out.is_empty(), "a write reported twice: {out:x?}");
        mem[3 * 4096] = 11;
        assert_eq!(bits.take(&mut out).unwrap(), 1);
        assert_eq!(out, vec![page(3)]);
        assert_eq!((mem[2 * 4096], mem[3 * 4096], mem[3 * 4096 + 1], mem[9 * 4096]), (7, 11, 9, 10));
        drop(bits);
        // SAFETY: unmapping the test's own mapping.
        unsafe { nix::sys::mman::munmap(p, len) }.unwrap();
    }

    /// A sparse range: the pages only read (the zero page) and the holes are neither reported
    /// written when it is registered nor protected (which would fill its page tables); the one
    /// page written is reported, and a hole written later is reported at the next scan.
    #[test]
    #[ignore = "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest"]
    fn a_sparse_range_reports_only_its_written_pages() {
        if let Err(e) = works_here() {
            panic!("the kernel cannot resolve write-protect faults ({e}); this test runs in the guest");
        }
        use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
        let len = 64usize << 20;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p = unsafe { mmap_anonymous(None, len.try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }.unwrap();
        let base = p.as_ptr() as u64;
        // Base pages, where THP is `always` (the guest's): a write would fill, and report, 2 MiB.
        // SAFETY: advice on our own mapping.
        unsafe { nix::sys::mman::madvise(p, len, nix::sys::mman::MmapAdvise::MADV_NOHUGEPAGE) }.unwrap();
        // SAFETY: our mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u8>(), len) };
        let page = |i: u64| (base + i * 4096, base + (i + 1) * 4096);
        let read: u64 = (0..1000).map(|i| u64::from(std::hint::black_box(mem[i * 4096]))).sum();
        assert_eq!(read, 0);
        mem[5000 * 4096] = 1;
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        let mut bits = WrittenBits::start(uffd, std::process::id() as i32, None).unwrap();
        let mut out = Vec::new();
        assert_eq!(bits.register([(base, base + len as u64)], &mut out), 0);
        assert_eq!(out, vec![page(5000)], "only the page written, not the holes after the pages read");
        out.clear();
        let read: u64 = (0..2000).map(|i| u64::from(std::hint::black_box(mem[i * 4096]))).sum();
        assert_eq!(read, 0);
        mem[9000 * 4096] = 2;
        assert_eq!(bits.take(&mut out).unwrap(), 1);
        assert_eq!(out, vec![page(9000)]);
        drop(bits);
        // SAFETY: unmapping the test's own mapping.
        unsafe { nix::sys::mman::munmap(p, len) }.unwrap();
    }
    /// An interval's cost of `pages` written faults, nothing in chunks (no flush counted).
    fn faults(pages: u64) -> Cost {
        Cost { pages, written_chunks: 0, chunks: 0 }
    }

    #[test]
    fn the_sampling_brings_the_estimate_within_the_budget_in_powers_of_two() {
        assert_eq!(every_for(faults(0), 1000), 1);
        assert_eq!(every_for(faults(1000), 1000), 1);
        assert_eq!(every_for(faults(1001), 1000), 2);
        assert_eq!(every_for(faults(4000), 1000), 4);
        assert_eq!(every_for(faults(4001), 1000), 8);
        assert_eq!(every_for(faults(u64::MAX / 4), 1), MAX_EVERY);
        assert_eq!(every_for(faults(5), 0), 8, "a budget of 0 is read as 1");
    }

    /// Each change of a chunk's protection flushes the program's TLB: watching every chunk costs
    /// a flush per chunk written, taking turns a flush per chunk protected and per chunk
    /// released, written or not. A program writing a little in many chunks is watched whole
    /// where that fits, and otherwise sparsely enough that the turns fit too.
    #[test]
    fn the_sampling_counts_a_flush_per_change_of_a_chunks_protection() {
        let cost = |pages, written_chunks, chunks| Cost { pages, written_chunks, chunks };
        // 500 faults and 40 flushes: every chunk.
        assert_eq!(every_for(cost(500, 40, 300), 1000), 1);
        // 700 faults and 40 flushes do not fit; in turns, 700 faults and 600 flushes a round of
        // 300 chunks (6,700) fit at one chunk in 8, not in 4 (1,675).
        assert_eq!(every_for(cost(700, 40, 300), 1000), 8);
        // Faults alone would take one in 2.
        assert_eq!(every_for(faults(1100), 1000), 2);
        assert_eq!(every_for(cost(1100, 1, 300), 1000), 8);
        // A small program's turns cost little: 8 chunks, 160 fault's worth.
        assert_eq!(every_for(cost(1100, 8, 8), 1000), 2);
    }

    #[test]
    fn the_sampling_grows_sparser_at_once_and_denser_by_halves() {
        assert_eq!(next_every(1, faults(8000), 1000), 8);
        assert_eq!(next_every(8, faults(100), 1000), 4, "a low estimate halves it");
        assert_eq!(next_every(4, faults(100), 1000), 2);
        assert_eq!(next_every(2, faults(0), 1000), 1);
        assert_eq!(next_every(4, faults(30_000), 1000), 32);
    }

    #[test]
    fn the_fresh_parts_of_a_range_are_those_no_old_range_covers() {
        assert_eq!(fresh_parts(0, 100, &[]), vec![(0, 100)]);
        assert_eq!(fresh_parts(0, 100, &[(0, 60)]), vec![(60, 100)], "grown past its old end");
        assert_eq!(
            fresh_parts(0, 100, &[(70, 80), (10, 20), (200, 300)]),
            vec![(0, 10), (20, 70), (80, 100)]
        );
        assert!(fresh_parts(10, 20, &[(0, 15), (15, 40)]).is_empty());
    }

    #[test]
    fn an_interval_watches_at_least_eight_chunks_where_there_are() {
        assert_eq!(sparsest_for(0), 1);
        assert_eq!(sparsest_for(15), 1);
        assert_eq!(sparsest_for(16), 2);
        assert_eq!(sparsest_for(150), 16);
        assert_eq!(sparsest_for(100_000), MAX_EVERY);
    }

    #[test]
    fn chunks_take_turns_so_each_is_sampled_once_in_every_intervals() {
        for every in [1, 2, 4, 64] {
            for chunk in 0..200u64 {
                let addr = chunk * CHUNK_BYTES + 4096;
                let turns = (7..7 + every).filter(|&r| sampled(addr, r, every)).count();
                assert_eq!(turns, 1, "chunk {chunk} at 1 in {every}");
            }
        }
    }

    #[test]
    fn the_runs_left_are_those_outside_every_run_taken() {
        assert_eq!(runs_minus(&[(0, 100)], &[]), vec![(0, 100)]);
        assert_eq!(runs_minus(&[(0, 100)], &[(0, 100)]), vec![]);
        assert_eq!(runs_minus(&[(0, 100)], &[(10, 20), (30, 40)]), vec![(0, 10), (20, 30), (40, 100)]);
        assert_eq!(
            runs_minus(&[(0, 10), (20, 30), (50, 60)], &[(5, 25), (55, 70)]),
            vec![(0, 5), (25, 30), (50, 55)]
        );
        assert_eq!(runs_minus(&[(10, 20)], &[(0, 5), (30, 40)]), vec![(10, 20)]);
    }

    #[test]
    fn pieces_follow_chunk_edges_and_merge_alike_neighbours() {
        let c = CHUNK_BYTES;
        // A range from the middle of chunk 1 to the middle of chunk 5; chunks 2 and 3 alike.
        let turn = |a: u64| match a / c {
            2 | 3 => Turn::Report,
            4 => Turn::Protect,
            _ => Turn::Skip,
        };
        let got = pieces(c + c / 2, 5 * c + 4096, turn);
        assert_eq!(
            got,
            vec![
                (c + c / 2, 2 * c, Turn::Skip),
                (2 * c, 4 * c, Turn::Report),
                (4 * c, 5 * c, Turn::Protect),
                (5 * c, 5 * c + 4096, Turn::Skip)
            ]
        );
        assert_eq!(pieces(c, 3 * c, |_| Turn::Report), vec![(c, 3 * c, Turn::Report)]);
        assert!(pieces(c, c, |_| Turn::Report).is_empty());
    }

    /// Sampling on a real userfaultfd: a program writing half the pages of 64 MiB (32 chunks, of
    /// which one in 4 is 8, the fewest an interval watches)
    /// every interval, at a budget of a quarter of those, is sampled at one chunk in 4 from the
    /// second scan on (the first scan's report sets it); each scan then
    /// reports exactly the written pages of the chunks whose turn it was, so that over 4 scans
    /// every page written is reported exactly once; the chunks out of turn are left unprotected,
    /// the pages not written included; and the values written stay.
    #[test]
    #[ignore = "needs UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN (Linux 6.7): runs in the guest"]
    fn a_sample_of_chunks_is_reported_in_turn_within_the_budget() {
        if let Err(e) = works_here() {
            panic!("the kernel cannot resolve write-protect faults ({e}); this test runs in the guest");
        }
        use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
        let len = 64usize << 20;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        let map_len = len + CHUNK_BYTES as usize;
        // SAFETY: a fresh private anonymous mapping, unmapped below.
        let p =
            unsafe { mmap_anonymous(None, map_len.try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }.unwrap();
        // SAFETY: advice on our own mapping (base pages: a written huge page reports whole).
        unsafe { nix::sys::mman::madvise(p, map_len, nix::sys::mman::MmapAdvise::MADV_NOHUGEPAGE) }.unwrap();
        let base = (p.as_ptr() as u64).next_multiple_of(CHUNK_BYTES);
        // SAFETY: inside our mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(base as *mut u8, len) };
        let pages = (len / 4096) as u64;
        mem.iter_mut().step_by(4096).for_each(|b| *b = 1);
        // The odd pages.
        let write_half =
            |mem: &mut [u8], v: u8| mem.iter_mut().skip(4096).step_by(2 * 4096).for_each(|b| *b = v);
        let uffd = Userfaultfd::new_here(libc::O_CLOEXEC | libc::O_NONBLOCK).unwrap();
        let mut bits = WrittenBits::start(uffd, std::process::id() as i32, Some(pages / 8)).unwrap();
        let mut out = Vec::new();
        assert_eq!(bits.register([(base, base + len as u64)], &mut out), 0);
        let count = |out: &[(u64, u64)]| out.iter().map(|&(s, e)| (e - s) / 4096).sum::<u64>();
        assert_eq!(count(&out), pages);
        let mut seen = vec![0u32; pages as usize];
        let mut everies = Vec::new();
        for round in 0..5u8 {
            write_half(mem, round + 2);
            out.clear();
            let every = bits.take(&mut out).unwrap();
            everies.push(every);
            if every == 1 {
                assert_eq!(count(&out), pages / 2, "scan {round}, every page written: {out:x?}");
                continue;
            }
            assert_eq!(count(&out), pages / 2 / every, "scan {round}: {out:x?}");
            // Only the next turn's chunks are protected: the others cost the program nothing
            // (the kernel calls an unprotected page written).
            let mut unprotected = Vec::new();
            PagemapScan::open("self").unwrap().written(base, base + len as u64, &mut unprotected).unwrap();
            assert_eq!(count(&unprotected), pages - pages / every, "scan {round}");
            // The chunks of one turn: one residue of their number.
            let turn = (out[0].0 / CHUNK_BYTES) % every;
            for &(s, e) in &out {
                assert!(
                    (s / CHUNK_BYTES) % every == turn && ((e - 1) / CHUNK_BYTES) % every == turn,
                    "{out:x?}"
                );
                for a in (s..e).step_by(4096) {
                    seen[((a - base) / 4096) as usize] += 1;
                }
            }
        }
        assert_eq!(everies, vec![1, 4, 4, 4, 4], "sampled from the second scan on");
        assert!(
            seen.iter().enumerate().all(|(i, &n)| n == (i % 2) as u32),
            "each page written reported once in 4 sampled scans, no other"
        );
        assert!(
            (0..pages as usize).all(|i| mem[i * 4096] == if i % 2 == 1 { 6 } else { 1 }),
            "the values stay"
        );
        drop(bits);
        // SAFETY: unmapping the test's own mapping.
        unsafe { nix::sys::mman::munmap(p, map_len) }.unwrap();
    }
}
