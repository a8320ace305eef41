//! NUMA hint faults, as Linux's automatic NUMA balancing makes them (docs/model.md §6).
//!
//! `task_numa_work` (kernel/sched/fair.c) scans the task's address space a window at a time: every
//! scan period it makes the next `numa_balancing_scan_size_mb` (256 MB) of mappings PROT_NONE, and
//! the first access to each such page afterwards traps into the kernel (a hint fault), which
//! restores the mapping and learns the page, the access kind and, in memory-tiering mode, the
//! time since the scan (`numa_hint_fault_latency`). The scan period is
//! `max(1000 ms / (MAX_SCAN_WINDOW / scan size), period_min / windows in the address space)`
//! (`task_scan_min`): the whole address space once per `numa_balancing_scan_period_min_ms`, but
//! never more than 2560 MB of mappings per second. The first scan comes
//! `numa_balancing_scan_delay_ms` after the task starts.
//!
//! Scaled like everything else (docs/model.md §9): windows and periods are divided by the run's
//! scale, so a scaled run scans the same share of its footprint per share of its run time. Every
//! mapped page in the window is armed, whatever its tier (see docs/model.md §10: in memory-tiering
//! mode alone Linux skips fast-tier pages). The scan period does not adapt (Linux lengthens it,
//! up to `numa_balancing_scan_period_max_ms`, when faults are mostly local); this is its fastest
//! setting.

use terrace_model::{AccessKind, HintFault, PageIdx, TierId};

/// `numa_balancing_scan_size_mb` default: mappings made PROT_NONE per scan, MiB.
pub const SCAN_SIZE_MB: f64 = 256.0;
/// `MAX_SCAN_WINDOW` in kernel/sched/fair.c: never scan more than this many MB per second.
pub const MAX_SCAN_MB_PER_S: f64 = 2560.0;
/// `numa_balancing_scan_delay_ms` default: the first scan comes this long after the task starts.
pub const SCAN_DELAY_MS: f64 = 1000.0;
/// A page not armed by a scan (or already faulted since).
const NOT_ARMED: u64 = u64::MAX;

/// The hint-fault tracker: which pages are armed, since when, and the faults taken.
#[derive(Clone, Debug)]
pub struct HintFaults {
    /// Machine time of the scan that armed each page, ns; `NOT_ARMED` otherwise.
    scanned_at: Vec<u64>,
    /// Faults since the last observation.
    pub faults: Vec<HintFault>,
    /// Machine time of the slice being replayed, ns: a fault's time, to one slice's resolution.
    pub now_ns: u64,
    /// Faults since the cost was last charged.
    pub unpaid_faults: u64,
    /// Faults since the start.
    pub taken: u64,
    /// Next page the scanner looks at.
    cursor: usize,
    /// Pages per scan window (256 MB divided by the scale).
    window_pages: usize,
    /// `numa_balancing_scan_period_min_ms`, as the policy asked, ms of real time.
    period_min_ms: f64,
    scale: f64,
    /// Machine time of the next scan, ns.
    pub next_scan_ns: f64,
}

impl HintFaults {
    /// A tracker over `pages` pages of `page_bytes`, with the policy's minimum scan period (ms of
    /// real time; 0 means Linux's default of 1000 ms) in a run scaled down by `scale`.
    pub fn new(pages: u64, page_bytes: u64, period_min_ms: u32, scale: f64) -> Self {
        let scale = scale.max(f64::MIN_POSITIVE);
        let window_bytes = SCAN_SIZE_MB * (1u64 << 20) as f64 / scale;
        let window_pages = (window_bytes / page_bytes as f64).ceil().max(1.0) as usize;
        let period_min_ms = if period_min_ms == 0 { 1000.0 } else { period_min_ms as f64 };
        HintFaults {
            scanned_at: vec![NOT_ARMED; pages as usize],
            faults: Vec::new(),
            now_ns: 0,
            unpaid_faults: 0,
            taken: 0,
            cursor: 0,
            window_pages,
            period_min_ms,
            scale,
            next_scan_ns: SCAN_DELAY_MS * 1e6 / scale,
        }
    }

    pub fn window_pages(&self) -> usize {
        self.window_pages
    }

    /// Time between two scans when `mapped` pages are mapped, ns of machine time (`task_scan_min`).
    pub fn period_ns(&self, mapped: u64) -> f64 {
        let windows = (mapped as f64 / self.window_pages as f64).ceil().max(1.0);
        let floor_ms = 1000.0 / (MAX_SCAN_MB_PER_S / SCAN_SIZE_MB).floor().max(1.0);
        floor_ms.max(self.period_min_ms / windows) * 1e6 / self.scale
    }

    /// What the hardware does on an access: an armed page faults once.
    #[inline(always)]
    pub fn touch(&mut self, page: usize, write: bool) {
        let at = self.scanned_at[page];
        if at != NOT_ARMED {
            self.fault(page, write, at);
        }
    }

    #[inline(never)]
    fn fault(&mut self, page: usize, write: bool, at: u64) {
        self.scanned_at[page] = NOT_ARMED;
        self.unpaid_faults += 1;
        self.taken += 1;
        self.faults.push(HintFault {
            page: page as PageIdx,
            kind: if write { AccessKind::Write } else { AccessKind::Read },
            latency_ns: self.now_ns.saturating_sub(at),
        });
    }

    /// One scan at machine time `now_ns`: arms the mapped pages of the next window and moves
    /// the cursor on, wrapping at the end of the address space. Returns the pages armed (the
    /// page-table entries it changed).
    pub fn scan(&mut self, now_ns: u64, placement: &[TierId]) -> u64 {
        let pages = self.scanned_at.len();
        if pages == 0 {
            return 0;
        }
        let mut armed = 0;
        for _ in 0..self.window_pages.min(pages) {
            if placement[self.cursor].is_placed() {
                self.scanned_at[self.cursor] = now_ns;
                armed += 1;
            }
            self.cursor = (self.cursor + 1) % pages;
        }
        armed
    }

    /// A migrated page is mapped afresh: it no longer faults.
    pub fn disarm(&mut self, page: usize) {
        if let Some(at) = self.scanned_at.get_mut(page) {
            *at = NOT_ARMED;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: TierId = TierId::SLOW;

    #[test]
    fn the_first_access_after_a_scan_faults_once_with_the_time_since_the_scan() {
        let mut h = HintFaults::new(4, 4096, 1000, 1.0);
        assert_eq!(h.scan(100, &[P, P, TierId::UNPLACED, P]), 3);
        h.now_ns = 350;
        h.touch(1, true);
        h.touch(1, false);
        h.touch(2, false);
        h.now_ns = 400;
        h.touch(0, false);
        assert_eq!(
            h.faults,
            vec![
                HintFault { page: 1, kind: AccessKind::Write, latency_ns: 250 },
                HintFault { page: 0, kind: AccessKind::Read, latency_ns: 300 },
            ]
        );
        h.disarm(3);
        h.touch(3, false);
        assert_eq!(h.taken, 2);
    }

    #[test]
    fn scans_walk_the_address_space_a_scaled_window_at_a_time() {
        // Scale 1024: 256 MB becomes 256 KiB, 64 pages of 4 KiB.
        let mut h = HintFaults::new(100, 4096, 1000, 1024.0);
        assert_eq!(h.window_pages(), 64);
        let placement = vec![P; 100];
        assert_eq!(h.scan(1, &placement), 64);
        assert_eq!(h.scan(2, &placement), 64);
        h.now_ns = 10;
        for p in 0..100 {
            h.touch(p, false);
        }
        // Pages 0..28 were scanned twice (the cursor wrapped): the second scan's time counts.
        assert_eq!(h.faults.len(), 100);
        assert_eq!(h.faults[0].latency_ns, 8);
        assert_eq!(h.faults[50].latency_ns, 9);
    }

    #[test]
    fn the_period_is_linuxs_task_scan_min() {
        let h = HintFaults::new(1 << 20, 4096, 1000, 1.0);
        // One window of 256 MB mapped: period_min / 1 = 1000 ms.
        assert_eq!(h.period_ns(65_536), 1e9);
        // 4 GB mapped: 16 windows, 1000 / 16 = 62.5 ms, floored at 100 ms (2560 MB/s).
        assert_eq!(h.period_ns(1 << 20), 1e8);
        // Scaled runs scan proportionally faster.
        let s = HintFaults::new(1 << 10, 4096, 1000, 1024.0);
        assert_eq!(s.period_ns(64), 1e9 / 1024.0);
    }
}
