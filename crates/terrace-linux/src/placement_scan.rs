//! The placement scan: where a managed program's pages are. A full scan reads the program's
//! mappings (new pages get indexes), its pagemap (which pages are present, and what the trackers
//! read from the entries) and the node of every present page, and turns nodes into tiers and
//! tier occupancy; a policy on 2 MiB pages gets the [`HugeView`] of the same scan. Between full
//! scans the placement is kept up to date with the machine's own moves.
//!
//! The trackers' per-page bits live here too, one byte per 4 KiB page of the scan, because the
//! 2 MiB view is derived from them; the trackers fill them ([`crate::trackers::TrackerSet`]).

use crate::huge_view::{self, HugeView};
use crate::migrate::PageMove;
use crate::process::{PageIndex, ProcessError, ProcessMemory, PM_PRESENT};
use crate::topology::LiveTier;
use crate::trackers::ScanView;
use terrace_model::{Applied, MoveFailure, TierId, TierStatus};

pub struct PlacementScan {
    mem: ProcessMemory,
    /// The host's tiers, fastest first, with their nodes.
    tiers: Vec<LiveTier>,
    /// The pagemap entry of every indexed 4 KiB page at the last scan.
    entries: Vec<u64>,
    /// The indexes of the pages present at the last scan.
    present: Vec<u32>,
    /// Scratch: the kernel's answer for the pages asked about.
    status: Vec<i32>,
    placement: Vec<TierId>,
    tier_status: Vec<TierStatus>,
    /// `PAGE_REFERENCED | PAGE_DIRTY` per 4 KiB page, as the trackers left them (empty unless the
    /// policy asks for page-table bits).
    bits: Vec<u8>,
    /// Set when the policy works on 2 MiB pages: its page index then names 2 MiB-aligned ranges.
    huge: Option<HugeView>,
}

impl PlacementScan {
    pub fn new(mem: ProcessMemory, tiers: Vec<LiveTier>) -> Self {
        let n = tiers.len();
        PlacementScan {
            mem,
            tiers,
            entries: Vec::new(),
            present: Vec::new(),
            status: Vec::new(),
            placement: Vec::new(),
            tier_status: vec![TierStatus::default(); n],
            bits: Vec::new(),
            huge: None,
        }
    }

    /// From now on the policy sees 2 MiB pages.
    pub fn use_huge_pages(&mut self) {
        self.huge = Some(HugeView::default());
    }
    pub fn huge(&self) -> bool {
        self.huge.is_some()
    }
    pub fn memory(&self) -> &ProcessMemory {
        &self.mem
    }
    pub fn tiers(&self) -> usize {
        self.tiers.len()
    }

    /// Whether the program exec'd since the last scan ([`ProcessMemory::follow_exec`]): if so,
    /// pagemap now reads the new address space, and this returns the program it runs now.
    pub fn follow_exec(&mut self) -> Result<Option<String>, ProcessError> {
        self.mem.follow_exec()
    }

    /// Present 4 KiB pages at the last scan.
    pub fn present_pages(&self) -> usize {
        self.present.len()
    }

    /// Reads the mappings, the pagemap and the node of every present page (of the first present
    /// page of each 2 MiB range, for a 2 MiB policy, which sees each range at that page's node).
    pub fn read_placement(&mut self) -> Result<(), ProcessError> {
        self.mem.refresh()?;
        self.mem.read_pagemap(&mut self.entries)?;
        let pages = self.mem.pages();
        self.present.clear();
        self.present.extend((0..pages as u32).filter(|&i| self.entries[i as usize] & PM_PRESENT != 0));
        self.placement.clear();
        self.placement.resize(pages, TierId::UNPLACED);
        let firsts = self.huge.as_ref().map(|_| huge_view::firsts(self.mem.index(), &self.present));
        let asked: &[u32] = firsts.as_deref().unwrap_or(&self.present);
        self.mem.nodes_of(asked, &mut self.status)?;
        // Each present page takes the tier of the last page asked about (itself, or its range's
        // first present page).
        let (mut at, mut tier) = (0, TierId::UNPLACED);
        for &i in &self.present {
            if asked.get(at) == Some(&i) {
                let node = self.status[at];
                tier = if node >= 0 { self.tier_of_node(node) } else { TierId::UNPLACED };
                at += 1;
            }
            self.placement[i as usize] = tier;
        }
        Ok(())
    }

    /// What the trackers see of this scan, and the per-page bits they fill.
    pub fn view_and_bits(&mut self) -> (ScanView<'_>, &mut Vec<u8>) {
        let view = ScanView {
            pid: self.mem.pid(),
            memory: &self.mem,
            entries: &self.entries,
            present: &self.present,
            huge: self.huge.as_ref(),
        };
        (view, &mut self.bits)
    }

    pub fn view(&self) -> ScanView<'_> {
        ScanView {
            pid: self.mem.pid(),
            memory: &self.mem,
            entries: &self.entries,
            present: &self.present,
            huge: self.huge.as_ref(),
        }
    }

    /// The per-page bits of the last scan (4 KiB pages).
    pub fn bits(&self) -> &[u8] {
        &self.bits
    }

    /// Ends a full scan once the trackers have marked their bits: counts each tier's pages and
    /// derives the 2 MiB view.
    pub fn finish(&mut self) {
        // The trackers' bits, with the pages the program made read-only marked (mtier's test).
        if !self.bits.is_empty() {
            for (first, pages) in self.mem.read_only_runs() {
                let from = (first as usize).min(self.bits.len());
                let to = (from + pages as usize).min(self.bits.len());
                for b in &mut self.bits[from..to] {
                    *b |= terrace_model::PAGE_READ_ONLY;
                }
            }
        }
        for (t, st) in self.tier_status.iter_mut().enumerate() {
            st.used_pages = self.placement.iter().filter(|p| p.index() == t).count() as u64;
            st.capacity_pages = self.tiers[t].tier.capacity_pages;
            // No uncore counters are read: the traffic is unknown, not zero.
            st.read_bytes = None;
            st.write_bytes = None;
        }
        if let Some(h) = self.huge.as_mut() {
            h.rebuild(self.mem.index(), &self.placement, &self.bits, &self.tier_status);
        }
    }

    /// Present 4 KiB pages per tier at the last full scan.
    pub fn pages_per_tier(&self) -> Vec<u64> {
        self.tier_status.iter().map(|s| s.used_pages).collect()
    }

    /// What the policy sees: placement, tiers and bits of its pages (4 KiB, or 2 MiB ranges).
    pub fn policy_view(&self) -> (&[TierId], &[TierStatus], &[u8]) {
        match &self.huge {
            Some(h) => (h.placement(), h.status(), h.bits()),
            None => (&self.placement, &self.tier_status, &self.bits),
        }
    }

    /// Pages in the policy's view (4 KiB pages, or 2 MiB ranges).
    pub fn policy_pages(&self) -> usize {
        self.huge.as_ref().map_or(self.mem.pages(), |h| h.pages())
    }

    /// The first address of the policy's page `page`.
    pub fn page_address(&self, page: u32) -> Option<u64> {
        match &self.huge {
            Some(h) => h.base(page),
            None => ((page as usize) < self.mem.pages()).then(|| self.mem.index().addr(page)),
        }
    }

    /// The policy's page holding `addr`, if the last full scan saw it (a page indexed since has
    /// no placement yet, so it is not one of the policy's pages until the next scan).
    pub fn policy_page_of(&self, addr: u64) -> Option<u32> {
        match &self.huge {
            Some(h) => h.page_of(addr),
            None => self.mem.index().index_of(addr).filter(|&i| (i as usize) < self.placement.len()),
        }
    }

    /// The 4 KiB addresses that make up the policy's page `page`: the page itself, or the pages
    /// of a 2 MiB range that were present at the last scan (a range the program touched only in
    /// part moves what it holds; asking move_pages for its absent pages only fails them).
    pub fn addresses_of(&self, page: u32) -> Vec<u64> {
        match &self.huge {
            None => vec![self.mem.index().addr(page)],
            Some(h) => {
                let present = |addr: &u64| {
                    self.mem
                        .index()
                        .index_of(*addr)
                        .and_then(|i| self.entries.get(i as usize))
                        .is_some_and(|e| e & PM_PRESENT != 0)
                };
                h.addresses(page).into_iter().filter(present).collect()
            }
        }
    }

    pub fn index(&self) -> &PageIndex {
        self.mem.index()
    }

    pub fn tier_of_node(&self, node: i32) -> TierId {
        self.tiers
            .iter()
            .position(|t| t.nodes.contains(&(node as u32)))
            .map_or(TierId::UNPLACED, |i| TierId(i as u8))
    }

    /// The node pages moved to tier `tier` go to (its first).
    pub fn node_of_tier(&self, tier: TierId) -> Option<i32> {
        self.tiers.get(tier.index()).and_then(|t| t.nodes.first()).map(|&n| n as i32)
    }

    /// The migrator's moves for policy pages `wanted` at their target tiers: each a 4 KiB page,
    /// or the 512 of a 2 MiB range, tagged with its policy page, to the tier's first node; and
    /// the (policy page, node) pairs asked. A page or tier that does not exist fails `Invalid`.
    pub fn page_moves(
        &self,
        wanted: &[(u32, TierId)],
        applied: &mut Applied,
    ) -> (Vec<(u32, i32)>, Vec<PageMove>) {
        let mut moves = Vec::with_capacity(wanted.len());
        let mut asked = Vec::with_capacity(wanted.len());
        for &(page, to) in wanted {
            match self.node_of_tier(to) {
                // The placement's length, not the index's: a page indexed since must be scanned first.
                Some(node) if (page as usize) < self.policy_view().0.len() => {
                    asked.push((page, node));
                    moves.extend(self.addresses_of(page).into_iter().map(|addr| PageMove {
                        addr,
                        node,
                        tag: page,
                    }));
                }
                _ => applied.fail(MoveFailure::Invalid),
            }
        }
        (asked, moves)
    }

    /// Records that the policy's page `page` moved to `tier`: until the next full scan, this is
    /// where the page is, and what its tiers hold.
    pub fn record_move(&mut self, page: u32, tier: TierId) {
        let (placement, status) = match self.huge.as_mut() {
            Some(h) => h.placement_mut(),
            None => (&mut self.placement, &mut self.tier_status),
        };
        let old = std::mem::replace(&mut placement[page as usize], tier);
        if let Some(s) = status.get_mut(old.index()).filter(|_| old.is_placed()) {
            s.used_pages = s.used_pages.saturating_sub(1);
        }
        if let Some(s) = status.get_mut(tier.index()).filter(|_| tier.is_placed()) {
            s.used_pages += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrate;
    use crate::process::PAGE_BYTES;
    use terrace_model::MoveOptions;

    fn tier(id: u8, node: u32) -> LiveTier {
        let tier = terrace_model::MachineInfo::placeholder(id as usize + 1).tiers.pop().expect("a tier");
        LiveTier { tier, nodes: vec![node] }
    }

    /// A 2 MiB range of this process of which only 44 base pages were ever touched: the move
    /// asks for those 44, all of them move (here to the node they are on, the host having one),
    /// and nothing fails.
    #[test]
    fn a_partly_present_2m_range_moves_what_it_holds() {
        use nix::sys::mman::{madvise, mmap_anonymous, MapFlags, MmapAdvise, ProtFlags};
        const HUGE: usize = 2 << 20;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh private anonymous mapping of 4 MiB, unmapped at the end of the test.
        let p = unsafe { mmap_anonymous(None, (2 * HUGE).try_into().unwrap(), rw, MapFlags::MAP_PRIVATE) }
            .unwrap();
        let base = (p.as_ptr() as usize).next_multiple_of(HUGE);
        // SAFETY: the aligned 2 MiB lies inside the mapping; no huge page, so pages stay apart.
        unsafe {
            madvise(std::ptr::NonNull::new(base as *mut _).unwrap(), HUGE, MmapAdvise::MADV_NOHUGEPAGE)
                .unwrap();
            for k in 0..44 {
                std::ptr::write_volatile((base + k * 8 * PAGE_BYTES as usize) as *mut u8, 1);
            }
        }
        let me = std::process::id() as i32;
        let mut scan = PlacementScan::new(ProcessMemory::attach(me).unwrap(), vec![tier(0, 0), tier(1, 0)]);
        scan.use_huge_pages();
        scan.read_placement().unwrap();
        scan.finish();
        let page = scan.huge.as_ref().unwrap().page_of(base as u64).expect("the range is a policy page");
        let mut applied = Applied::default();
        let (asked, moves) = scan.page_moves(&[(page, TierId(0))], &mut applied);
        assert_eq!(asked.len(), 1);
        assert_eq!(moves.len(), 44, "only the present pages are asked for");
        let out = migrate::execute(me, &moves, &MoveOptions::default(), "test");
        assert_eq!((out.moved, out.failed.len(), out.bad_batches.len()), (44, 0, 0), "{:?}", out.failed);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(p.as_ptr(), 2 * HUGE) };
    }
}
