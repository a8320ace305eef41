//! Memory tiers: each is one kind of memory (a NUMA node on Linux), ordered fastest first.

use serde::{Deserialize, Serialize};

/// Index of a tier in a machine's tier list; tier 0 is the fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(transparent)]
pub struct TierId(pub u8);

impl TierId {
    /// The fast tier (DRAM) on every two-tier machine.
    pub const FAST: TierId = TierId(0);
    /// The slow tier (Optane, CXL, remote socket) on every two-tier machine.
    pub const SLOW: TierId = TierId(1);
    /// Marks a page that has not been touched yet, so it has no home.
    pub const UNPLACED: TierId = TierId(u8::MAX);

    pub fn index(self) -> usize {
        self.0 as usize
    }
    pub fn is_placed(self) -> bool {
        self != Self::UNPLACED
    }
}

impl std::fmt::Display for TierId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_placed() {
            write!(f, "tier{}", self.0)
        } else {
            f.write_str("unplaced")
        }
    }
}

/// What a tier is made of; decides which hardware figures describe it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TierKind {
    Dram,
    Optane,
    Cxl,
    RemoteDram,
}

/// One tier as a policy sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    pub id: TierId,
    pub name: String,
    pub kind: TierKind,
    /// Capacity in pages of the machine's page size; `None` means unbounded (the `all-fast` bound).
    pub capacity_pages: Option<u64>,
    /// Performance attributes as the firmware reports them (ACPI HMAT on Linux: access0
    /// read_latency, read_bandwidth, write_bandwidth); `None` where unknown.
    pub read_latency_ns: Option<f64>,
    pub read_bandwidth_gb_s: Option<f64>,
    pub write_bandwidth_gb_s: Option<f64>,
}
