//! The policy's view when it asks for 2 MiB pages (docs/live.md, "2 MiB pages"): one policy page
//! per 2 MiB-aligned range that holds managed 4 KiB pages, and the functions that map between the
//! two page sizes. The scan reads the kernel at 4 KiB granularity; this view is derived from it
//! after every full scan, and kept up to date with the machine's own moves in between.

use crate::process::{PageIndex, PAGE_BYTES, PAGE_SHIFT};
use std::collections::HashMap;
use terrace_model::{TierId, TierStatus, BASE_PAGES_PER_HUGE};

pub const HUGE_SHIFT: u32 = 21;
/// Bytes in one policy page of this view.
pub const HUGE_BYTES: u64 = 1 << HUGE_SHIFT;

/// One entry per 2 MiB-aligned range that holds managed 4 KiB pages (indexes only grow, like the
/// base index), with the tier of its present pages (the first one found decides) and the union
/// of their bits.
#[derive(Default)]
pub struct HugeView {
    bases: Vec<u64>,
    index_of: HashMap<u64, u32>,
    placement: Vec<TierId>,
    bits: Vec<u8>,
    status: Vec<TierStatus>,
}

/// The 2 MiB-aligned base of the range holding `addr`.
pub fn base_of(addr: u64) -> u64 {
    addr >> HUGE_SHIFT << HUGE_SHIFT
}

/// A tier's capacity in 2 MiB pages, from its capacity in 4 KiB pages.
pub fn capacity(pages_4k: Option<u64>) -> Option<u64> {
    pages_4k.map(|c| c / BASE_PAGES_PER_HUGE)
}

/// Of `present` 4 KiB pages (in index order), the first of each 2 MiB range: the only one whose
/// node a scan asks the kernel for, 512 times fewer lookups than asking for every page.
pub fn firsts(index: &PageIndex, present: &[u32]) -> Vec<u32> {
    let mut firsts = Vec::new();
    let mut last_base = u64::MAX;
    for &i in present {
        let base = base_of(index.addr(i));
        if base != last_base {
            firsts.push(i);
            last_base = base;
        }
    }
    firsts
}

impl HugeView {
    /// The policy page of the range holding `addr`, giving it one if it has none.
    fn index(&mut self, addr: u64) -> u32 {
        let base = base_of(addr);
        let next = self.bases.len() as u32;
        *self.index_of.entry(base).or_insert_with(|| {
            self.bases.push(base);
            next
        })
    }

    /// The policy page of the range holding `addr`, if it has one.
    pub fn page_of(&self, addr: u64) -> Option<u32> {
        self.index_of.get(&base_of(addr)).copied()
    }

    /// The first address of policy page `page`.
    pub fn base(&self, page: u32) -> Option<u64> {
        self.bases.get(page as usize).copied()
    }

    /// Policy pages in the view.
    pub fn pages(&self) -> usize {
        self.bases.len()
    }

    /// The 512 4 KiB addresses of policy page `page` (a transparent huge page moves whole at the
    /// first, and the others are then already there; a range of base pages moves page by page).
    pub fn addresses(&self, page: u32) -> Vec<u64> {
        let base = self.bases[page as usize];
        (0..BASE_PAGES_PER_HUGE).map(|k| base + k * PAGE_BYTES).collect()
    }

    /// The bases of the ranges with a present page.
    pub fn placed_bases(&self) -> Vec<u64> {
        self.bases.iter().zip(&self.placement).filter(|(_, t)| t.is_placed()).map(|(&b, _)| b).collect()
    }

    pub fn placement(&self) -> &[TierId] {
        &self.placement
    }
    pub fn bits(&self) -> &[u8] {
        &self.bits
    }
    pub fn status(&self) -> &[TierStatus] {
        &self.status
    }
    /// The placement and tier occupancy, for recording a move until the next scan.
    pub fn placement_mut(&mut self) -> (&mut Vec<TierId>, &mut Vec<TierStatus>) {
        (&mut self.placement, &mut self.status)
    }

    /// Derives the view from a scan's 4 KiB pages: each range's tier is its first present
    /// page's (`placement` holds it for every present page of the range), its bits the union of
    /// its pages' (`bits` may be empty: no bits), its tiers' occupancy and capacity the 4 KiB
    /// `status` in 2 MiB units.
    pub fn rebuild(&mut self, index: &PageIndex, placement: &[TierId], bits: &[u8], status: &[TierStatus]) {
        self.placement.fill(TierId::UNPLACED);
        self.bits.fill(0);
        // Run by run of the index, one range lookup per 2 MiB of a run: this runs at every full
        // scan, over every indexed page.
        for (first, vpn, pages) in index.runs() {
            let mut k = 0;
            while k < pages {
                let addr = (vpn + k) << PAGE_SHIFT;
                let in_range = (BASE_PAGES_PER_HUGE - (vpn + k) % BASE_PAGES_PER_HUGE).min(pages - k);
                let j = self.index(addr) as usize;
                if j >= self.placement.len() {
                    self.placement.resize(j + 1, TierId::UNPLACED);
                    self.bits.resize(j + 1, 0);
                }
                let (from, to) = ((first as u64 + k) as usize, (first as u64 + k + in_range) as usize);
                if !self.placement[j].is_placed() {
                    if let Some(&t) = placement[from..to].iter().find(|t| t.is_placed()) {
                        self.placement[j] = t;
                    }
                }
                if let Some(run_bits) = bits.get(from..to) {
                    self.bits[j] |= run_bits.iter().fold(0, |a, b| a | b);
                }
                k += in_range;
            }
        }
        // A tier's occupancy is its 4 KiB pages in 2 MiB units, rounded up, against its capacity
        // in the same units: counting the ranges placed there would count a range holding a
        // few pages (a library's data, a stack) as a whole huge page, and a policy would then
        // see a fast tier over its limit that is not and send real pages down to make up for it.
        self.status = status.to_vec();
        for st in &mut self.status {
            st.used_pages = st.used_pages.div_ceil(BASE_PAGES_PER_HUGE);
            st.capacity_pages = capacity(st.capacity_pages);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_take_the_tier_of_their_first_present_page_and_the_union_of_bits() {
        // Two runs of 4 KiB pages: 1024 pages from 4 MiB (two ranges), and 3 pages at 10 MiB.
        let mut index = PageIndex::default();
        index.cover(1024, 1024);
        index.cover(2560, 3);
        let n = index.len();
        let mut placement = vec![TierId::UNPLACED; n];
        let mut bits = vec![0u8; n];
        // Range 0 (4 MiB): pages 5.. present on tier 1, page 7 written; range 1 absent; range 2
        // (10 MiB): its first page on tier 0.
        for p in &mut placement[5..512] {
            *p = TierId(1);
        }
        bits[7] = 3;
        placement[1024] = TierId(0);
        let present: Vec<u32> = (0..n as u32).filter(|&i| placement[i as usize].is_placed()).collect();
        assert_eq!(firsts(&index, &present), vec![5, 1024]);
        let status: Vec<TierStatus> = [1, 507]
            .map(|used_pages| TierStatus { used_pages, capacity_pages: Some(1024), ..Default::default() })
            .to_vec();
        let mut h = HugeView::default();
        h.rebuild(&index, &placement, &bits, &status);
        assert_eq!(h.pages(), 3);
        assert_eq!(h.placement(), [TierId(1), TierId::UNPLACED, TierId(0)]);
        assert_eq!(h.bits(), [3, 0, 0]);
        assert_eq!(h.status().iter().map(|s| s.used_pages).collect::<Vec<_>>(), [1, 1]);
        assert_eq!(h.status()[0].capacity_pages, Some(2));
        assert_eq!(h.page_of((4 << 20) + 12345), Some(0));
        assert_eq!(h.page_of(10 << 20), Some(2));
        assert_eq!(h.page_of(20 << 20), None);
        assert_eq!(h.base(1), Some(6 << 20));
        assert_eq!(h.placed_bases(), vec![4 << 20, 10 << 20]);
        let a = h.addresses(2);
        assert_eq!((a.len(), a[0], a[511]), (512, 10 << 20, (12 << 20) - 4096));
        // Ranges holding a few pages each count as the pages they hold: 3 pages in each of
        // three ranges of tier 0 are 1 huge page of occupancy, not 3.
        let mut scattered = PageIndex::default();
        for r in 0..3 {
            scattered.cover(r * 512, 3);
        }
        let on_fast = vec![TierId(0); scattered.len()];
        let status = [TierStatus { used_pages: 9, capacity_pages: Some(1024), ..Default::default() }];
        let mut v = HugeView::default();
        v.rebuild(&scattered, &on_fast, &[], &status);
        assert_eq!((v.pages(), v.status()[0].used_pages, v.status()[0].free_pages()), (3, 1, 1));
        // Indexes only grow: a rebuild without bits keeps every range where it was.
        h.rebuild(&index, &placement, &[], &status);
        assert_eq!((h.pages(), h.bits()), (3, &[0u8, 0, 0][..]));
    }
}
