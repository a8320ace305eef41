//! Pages: the unit a machine places and moves.

use serde::{Deserialize, Serialize};

/// Dense index of a page in the managed address space (0..pages). The simulated machine's
/// address space starts at 0, so the index is `addr >> page_shift`; the live machine keeps a
/// table from index to virtual address.
pub type PageIdx = u32;

/// The two page sizes x86-64 Linux migrates natively.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageSize {
    /// 4 KiB base page.
    #[default]
    Base4K,
    /// 2 MiB transparent huge page.
    Huge2M,
}

impl PageSize {
    pub const fn shift(self) -> u32 {
        match self {
            PageSize::Base4K => 12,
            PageSize::Huge2M => 21,
        }
    }
    pub const fn bytes(self) -> u64 {
        1 << self.shift()
    }
    /// Number of pages needed to hold `bytes`.
    pub const fn pages_for(self, bytes: u64) -> u64 {
        bytes.div_ceil(self.bytes())
    }
}

/// The base pages a 2 MiB page holds, and splits into.
pub const BASE_PAGES_PER_HUGE: u64 = PageSize::Huge2M.bytes() / PageSize::Base4K.bytes();

impl std::fmt::Display for PageSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PageSize::Base4K => "4KiB",
            PageSize::Huge2M => "2MiB",
        })
    }
}
