//! What a policy may observe: the output of the trackers it asked for.
//!
//! Every tracker has a modelled twin (simulated machine) and a real source (live machine); see
//! docs/live.md ("What the live machine observes") and docs/model.md §6. A policy receives only what it asked for in its [`Requirements`].
//!
//! [`Requirements`]: crate::Requirements

use crate::{AccessKind, Move, PageIdx, TierId};
use serde::{Deserialize, Serialize};

/// Page-table bit: the page was referenced (read or written) since the last observation.
pub const PAGE_REFERENCED: u8 = 1 << 0;
/// Page-table bit: the page was written since the last observation.
pub const PAGE_DIRTY: u8 = 1 << 1;
/// The page's mapping is read-only (the program made it so with `mprotect(PROT_READ)`): set by
/// a machine that knows page protections (the live machine), never by the simulated machine,
/// whose traces carry none. mtier's eligible pages (mtier §3.2).
pub const PAGE_READ_ONLY: u8 = 1 << 2;

/// The kinds of tracker a policy can ask a machine for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrackerKind {
    /// Referenced and dirty bits per page since the last observation (Ambix, Nimble, mtier).
    PageBits,
    /// One sampled access every `period` accesses, with its page and kind (HeMem, HPWP, object tiering).
    Sampling,
    /// Per-page access counts of the coming `period` intervals: only a simulator can know them
    /// (the oracle).
    Future,
    /// NUMA hint faults: every `period` ms a scan makes pages fault on their next access, and each
    /// fault reports its page, whether it was a write, and the time since the scan (Linux NUMA
    /// balancing; TPP and the tiering patch Ambix compares with).
    HintFaults,
    /// Allocations and frees of the program's objects, with their sites, in program order
    /// (object tiering §3.2): delivered by [`crate::drive`] through
    /// [`crate::Policy::object_event`] before each tick ([`crate::Machine::take_object_events`]).
    ObjectEvents,
}

impl TrackerKind {
    pub fn name(self) -> &'static str {
        match self {
            TrackerKind::PageBits => "page-table bits",
            TrackerKind::Sampling => "access sampling",
            TrackerKind::Future => "future accesses",
            TrackerKind::HintFaults => "NUMA hint faults",
            TrackerKind::ObjectEvents => "object events",
        }
    }
}

/// One tracker a policy needs, with its setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackerRequest {
    pub kind: TrackerKind,
    /// For sampling: one sample per this many accesses. For future: how many intervals ahead
    /// to look. Ignored by other trackers.
    pub period: u32,
}

impl TrackerRequest {
    pub const fn page_bits() -> Self {
        TrackerRequest { kind: TrackerKind::PageBits, period: 0 }
    }
    pub const fn sampling(period: u32) -> Self {
        TrackerRequest { kind: TrackerKind::Sampling, period }
    }
    pub const fn future(intervals: u32) -> Self {
        TrackerRequest { kind: TrackerKind::Future, period: intervals }
    }
    pub const fn object_events() -> Self {
        TrackerRequest { kind: TrackerKind::ObjectEvents, period: 0 }
    }
}

/// One sampled access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub page: PageIdx,
    pub kind: AccessKind,
}

/// One NUMA hint fault: the first access to a page after the scan that unmapped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintFault {
    pub page: PageIdx,
    pub kind: AccessKind,
    /// Time from the scan to the fault, ns.
    pub latency_ns: u64,
}

/// Read and write counts of one page over an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCounts {
    pub reads: u32,
    pub writes: u32,
}

/// Occupancy and traffic of one tier since the last observation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TierStatus {
    pub used_pages: u64,
    /// `None` when the tier is unbounded.
    pub capacity_pages: Option<u64>,
    /// Bytes the tier's media read and wrote since the last observation; `None` where the
    /// machine cannot measure them (no uncore counters on the live machine): unknown, not zero.
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
}

impl TierStatus {
    /// Pages that can still be placed here.
    pub fn free_pages(&self) -> u64 {
        self.capacity_pages.map_or(u64::MAX, |c| c.saturating_sub(self.used_pages))
    }

    /// Pages held beyond capacity: on the live machine a program's own first touches can run
    /// past `fast_limit_mib` (the kernel knows no such limit), and a policy brings the tier
    /// back within it. Always 0 on the simulated machine.
    pub fn excess_pages(&self) -> u64 {
        self.capacity_pages.map_or(0, |c| self.used_pages.saturating_sub(c))
    }
}

/// Everything a policy sees at one tick.
pub struct Observations<'a> {
    /// Machine time now, and at the previous tick, in nanoseconds.
    pub now_ns: u64,
    pub previous_ns: u64,
    /// Where each page is now (`TierId::UNPLACED` for pages never touched).
    pub placement: &'a [TierId],
    /// Per tier, fastest first.
    pub tiers: &'a [TierStatus],
    /// `PAGE_REFERENCED | PAGE_DIRTY` bits per page since the last tick, if asked for.
    pub page_bits: Option<&'a [u8]>,
    /// Sampled accesses since the last tick, if asked for.
    pub samples: &'a [Sample],
    /// Per-page counts of the coming intervals, if asked for (simulator only).
    pub future: Option<&'a [PageCounts]>,
    /// Hint faults since the last tick, if asked for.
    pub hint_faults: &'a [HintFault],
    /// Pages the machine's movers have taken on but not yet copied, each with the tier it is
    /// going to: `placement` still shows them in their old tier, where the program finds them
    /// until their copies complete, and a move of one fails `Busy`. Each tier's `used_pages`
    /// counts both ends of a page in flight, as the kernel holds both pages during a copy.
    /// Always empty on the live machine, whose moves are done when `apply` returns.
    pub in_flight: &'a [Move],
}

impl Observations<'_> {
    pub fn interval_ns(&self) -> u64 {
        self.now_ns - self.previous_ns
    }

    /// Where each page will be once the copies in flight complete: `placement` with each page
    /// of [`Self::in_flight`] at its destination. Borrows `placement` when nothing is in flight.
    pub fn placement_after_moves(&self) -> std::borrow::Cow<'_, [TierId]> {
        if self.in_flight.is_empty() {
            return std::borrow::Cow::Borrowed(self.placement);
        }
        let mut after = self.placement.to_vec();
        for m in self.in_flight {
            if let Some(t) = after.get_mut(m.page as usize) {
                *t = m.to;
            }
        }
        std::borrow::Cow::Owned(after)
    }
}

/// Free pages per tier as a plan spends them: where the next page moved down can go. A policy
/// that demotes on a machine of more than two tiers sends a page to the nearest lower tier with
/// room, as Linux's demotion does (`next_demotion_node`, falling back to lower tiers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreeRoom {
    free: Vec<u64>,
}

impl FreeRoom {
    pub fn new(tiers: &[TierStatus]) -> Self {
        FreeRoom { free: tiers.iter().map(TierStatus::free_pages).collect() }
    }

    /// Free pages left in tier `t` (0 for a tier the machine does not have).
    pub fn free(&self, t: TierId) -> u64 {
        self.free.get(t.index()).copied().unwrap_or(0)
    }

    /// Takes a page of room in tier `t`, if it has any.
    pub fn take(&mut self, t: TierId) -> bool {
        match self.free.get_mut(t.index()) {
            Some(f) if *f > 0 => {
                *f -= 1;
                true
            }
            _ => false,
        }
    }

    /// Gives a page of room back to tier `t` (a page leaves it).
    pub fn give(&mut self, t: TierId) {
        if let Some(f) = self.free.get_mut(t.index()) {
            *f = f.saturating_add(1);
        }
    }

    /// The nearest tier below `from` with room, which the page then takes; `None` when every
    /// lower tier is full. A page that was not placed counts as coming from the fast tier.
    pub fn take_below(&mut self, from: TierId) -> Option<TierId> {
        let start = if from.is_placed() { from.index() + 1 } else { 1 };
        let t = (start..self.free.len()).find(|&t| self.free[t] > 0)?;
        self.free[t] -= 1;
        Some(TierId(t as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(used: u64, capacity: Option<u64>) -> TierStatus {
        TierStatus { used_pages: used, capacity_pages: capacity, ..Default::default() }
    }

    #[test]
    fn demotions_go_to_the_nearest_lower_tier_with_room() {
        let tiers = [status(4, Some(4)), status(1, Some(2)), status(0, None)];
        let mut room = FreeRoom::new(&tiers);
        assert_eq!(room.take_below(TierId(0)), Some(TierId(1)));
        assert_eq!(room.take_below(TierId(0)), Some(TierId(2)), "tier 1 is full now");
        assert_eq!(room.take_below(TierId(1)), Some(TierId(2)));
        assert_eq!(room.take_below(TierId(2)), None, "nothing is below the last tier");
        assert!(!room.take(TierId(0)));
        room.give(TierId(0));
        assert!(room.take(TierId(0)));
        assert_eq!(room.free(TierId(7)), 0);
    }

    #[test]
    fn two_full_tiers_leave_no_room_below() {
        let mut room = FreeRoom::new(&[status(1, Some(1)), status(1, Some(1))]);
        assert_eq!(room.take_below(TierId::FAST), None);
    }
}
