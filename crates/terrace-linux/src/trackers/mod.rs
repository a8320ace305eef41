//! Real trackers: the kernel interfaces behind the observations a policy asks for. Each reports
//! what its modelled twin in terrace-sim reports.
//!
//! Each tracker is a module behind one interface, [`LiveTracker`], as memtierd's trackers and
//! DAMON's operations are: the live machine holds a [`TrackerSet`] and knows none of them by
//! type. Which ones a policy gets is decided in one place, [`select::build`], from what the
//! policy asks for, the config's `[trackers]` choices and what the kernel offers.

pub mod damon;
pub mod damon_ranges;
pub mod idle_page;
pub mod perf_sampler;
pub mod select;
pub mod soft_dirty;
pub mod write_faults;
pub mod written_bits;

use crate::huge_view::HugeView;
use crate::machine::LiveStats;
use crate::migrate::CopyGuard;
use crate::process::{PageIndex, ProcessError, ProcessMemory, PAGE_BYTES};
use terrace_model::Sample;

/// What a tracker sees of the machine's last full scan of the program: read-only, so a tracker
/// cannot disturb the placement or another tracker's input.
pub struct ScanView<'a> {
    pub pid: i32,
    /// The program's managed memory: its page index (4 KiB pages, stable for its life), the
    /// index's address runs and the ranges mapped now.
    pub memory: &'a ProcessMemory,
    /// The pagemap entry of every indexed 4 KiB page.
    pub entries: &'a [u64],
    /// The indexes of the present pages.
    pub present: &'a [u32],
    /// The 2 MiB view, when the policy works on 2 MiB pages: samples then name its pages.
    pub huge: Option<&'a HugeView>,
}

impl ScanView<'_> {
    pub fn index(&self) -> &PageIndex {
        self.memory.index()
    }

    /// Pages in the policy's view (4 KiB pages, or 2 MiB ranges).
    pub fn policy_pages(&self) -> usize {
        self.huge.map_or(self.memory.pages(), |h| h.pages())
    }

    /// The policy's page holding `addr`, if it has one.
    pub fn policy_page(&self, addr: u64) -> Option<u32> {
        match self.huge {
            Some(h) => h.page_of(addr),
            None => self.index().index_of(addr & !(PAGE_BYTES - 1)),
        }
    }

    /// The policy's page holding the 4 KiB page `index`.
    pub fn policy_page_of(&self, index: u32) -> Option<u32> {
        match self.huge {
            Some(h) => h.page_of(self.index().addr(index)),
            None => Some(index),
        }
    }

    /// The first address of every policy page with a present page: what a sampler may sample.
    pub fn present_units(&self) -> Vec<u64> {
        match self.huge {
            Some(h) => h.placed_bases(),
            None => self.present.iter().map(|&i| self.index().addr(i)).collect(),
        }
    }
}

/// One live tracker: a kernel interface turned into what a policy observes, referenced and dirty
/// bits per page, and/or sampled accesses. The machine calls these hooks and nothing else, so a
/// tracker (or a new one) changes without touching the machine.
///
/// There is no start hook: each tracker needs something different to start (a pid, a
/// userfaultfd of the program, a sampling period, a kdamond), so starting one is its module's
/// constructor, called by [`select::build`], the one place that knows which to start. Every hook
/// but [`LiveTracker::address_space_replaced`] does nothing unless a tracker overrides it.
pub trait LiveTracker: Send {
    /// Its name in logs and tests.
    fn name(&self) -> &'static str;

    /// After each full scan, for a policy that asks for page-table bits: adds this tracker's
    /// `PAGE_REFERENCED`/`PAGE_DIRTY` bits to `bits` (one per 4 KiB page of the scan, 0 before
    /// the first tracker). Trackers run in the set's order, so one may also overrule an earlier
    /// one's bits. An error fails the scan (a process that is gone ends the run).
    fn observe_bits(&mut self, _scan: &ScanView<'_>, _bits: &mut [u8]) -> Result<(), ProcessError> {
        Ok(())
    }

    /// At every observation, scanned or not: appends the accesses sampled since the last one,
    /// named by the policy's pages. Problems are logged: a tick without samples is no failure.
    fn observe_samples(&mut self, _scan: &ScanView<'_>, _samples: &mut Vec<Sample>) {}

    /// After the migrator moved the 4 KiB pages at `moved` (those that landed), with the bits
    /// of the last scan: a tracker whose signal the move itself disturbs corrects for it here
    /// (soft-dirty: a move sets the bit it reads).
    fn after_moves(&mut self, _scan: &ScanView<'_>, _moved: &[u64], _bits: &[u8]) {}

    /// The program's address space was replaced (it called exec: a wrapper that execs the real
    /// program does). Whatever the tracker registered against the old address space is gone
    /// with it; it re-registers against the new one, or returns why it cannot, which the machine
    /// logs (and the tracker then sees nothing of the new program). There is no default: every
    /// tracker has to say what an exec does to it.
    fn address_space_replaced(&mut self, pid: i32) -> Result<(), String>;

    /// The write-protection that holds writes off pages while they are copied, if this tracker
    /// has one (the fault sampler's userfaultfd).
    fn copy_guard(&self) -> Option<&dyn CopyGuard> {
        None
    }

    /// Copies this tracker's counters into the machine's running totals.
    fn report(&self, _stats: &mut LiveStats) {}
}

/// The trackers a policy got, in the order they contribute (soft-dirty's bits first, which the
/// referenced-bit trackers add to; the perf sampler's samples, then the fault sampler's writes,
/// then DAMON's reads), with this observation's samples.
#[derive(Default)]
pub struct TrackerSet {
    trackers: Vec<Box<dyn LiveTracker>>,
    /// Whether the policy asked for page-table bits (else no tracker marks any).
    page_bits: bool,
    samples: Vec<Sample>,
}

impl TrackerSet {
    pub fn new(page_bits: bool) -> Self {
        TrackerSet { trackers: Vec::new(), page_bits, samples: Vec::new() }
    }

    pub fn push(&mut self, tracker: Box<dyn LiveTracker>) {
        self.trackers.push(tracker);
    }

    /// The trackers' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.trackers.iter().map(|t| t.name()).collect()
    }

    pub fn page_bits(&self) -> bool {
        self.page_bits
    }

    /// After a full scan: the page-table bits of every 4 KiB page, from every tracker, into
    /// `bits` (left alone unless the policy asked for them).
    pub fn observe_bits(&mut self, scan: &ScanView<'_>, bits: &mut Vec<u8>) -> Result<(), ProcessError> {
        if !self.page_bits {
            return Ok(());
        }
        bits.clear();
        bits.resize(scan.entries.len(), 0);
        for t in &mut self.trackers {
            t.observe_bits(scan, bits)?;
        }
        Ok(())
    }

    /// This observation's samples, from every tracker ([`Self::samples`]); `stats` gets their
    /// counters.
    pub fn observe_samples(&mut self, scan: &ScanView<'_>, stats: &mut LiveStats) {
        self.samples.clear();
        for t in &mut self.trackers {
            t.observe_samples(scan, &mut self.samples);
            t.report(stats);
        }
    }

    /// The samples of the last observation.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// Tells every tracker which 4 KiB pages moved; `stats` gets their counters.
    pub fn after_moves(&mut self, scan: &ScanView<'_>, moved: &[u64], bits: &[u8], stats: &mut LiveStats) {
        for t in &mut self.trackers {
            t.after_moves(scan, moved, bits);
            t.report(stats);
        }
    }

    /// The first tracker's guard for copies, if any has one.
    pub fn copy_guard(&self) -> Option<&dyn CopyGuard> {
        self.trackers.iter().find_map(|t| t.copy_guard())
    }

    /// Has every tracker follow the program into the address space an exec gave it, and logs
    /// each one that cannot (it then sees nothing of the new program). Returns how many could
    /// not.
    pub fn address_space_replaced(&mut self, pid: i32) -> u64 {
        let mut lost = 0;
        for t in &mut self.trackers {
            if let Err(why) = t.address_space_replaced(pid) {
                tracing::warn!("{} cannot follow pid {pid} into the program it executed: {why}", t.name());
                lost += 1;
            }
        }
        lost
    }
}
