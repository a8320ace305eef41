//! Page-table referenced and dirty bits, as a page-table scan reads and clears them (Ambix §4.3).

use terrace_model::{PAGE_DIRTY, PAGE_REFERENCED};

/// Referenced/dirty bits per page since the last scan.
#[derive(Clone, Debug)]
pub struct PageBits {
    pub bits: Vec<u8>,
}

impl PageBits {
    pub fn new(pages: u64) -> Self {
        PageBits { bits: vec![0; pages as usize] }
    }

    /// What the hardware does on an access.
    #[inline(always)]
    pub fn touch(&mut self, page: usize, write: bool) {
        self.bits[page] |= PAGE_REFERENCED | if write { PAGE_DIRTY } else { 0 };
    }

    /// Cost of one scan that reads and clears every mapped page's bits, ns of tracker CPU time.
    pub fn scan_ns(mapped_pages: u64, page_scan_ns: f64) -> f64 {
        mapped_pages as f64 * page_scan_ns
    }

    pub fn clear(&mut self) {
        self.bits.fill(0);
    }
}
