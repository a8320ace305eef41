//! What a policy answers: pages to move, pages to swap, and how to move them.

use crate::{PageIdx, TierId};
use serde::{Deserialize, Serialize};

/// Move one page to a tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub page: PageIdx,
    pub to: TierId,
}

/// Swap the tiers of two pages (Nimble's symmetric exchange, §3.1.4): neither tier's
/// occupancy changes, so a full fast tier can still take a hot page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub a: PageIdx,
    pub b: PageIdx,
}

/// Move every page of an object, the address range `[addr, addr + bytes)` of the managed region,
/// to a tier: the MAT daemon's unit of placement (object tiering §3.4.4). [`Plan::check`] turns
/// it into the moves of the pages the range overlaps, so it is carried out, costed and reported
/// exactly as those page moves would be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectMove {
    pub addr: u64,
    pub bytes: u64,
    pub to: TierId,
}

/// Place the new objects of an allocation site in a tier from their allocation on (object
/// tiering §3.5, `mmap` + `mbind`): the site's objects allocated after the plan is applied have
/// their pages first touched in `tier` while it has room, and by the initial-placement rule
/// otherwise. `tier: None` withdraws the site's advice. Asks for [`crate::Mechanism::SiteAdvice`];
/// a machine without it reports the advice as not honoured and ignores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteAdvice {
    pub site: u64,
    pub tier: Option<TierId>,
}

/// When translations of moved pages are flushed from other cores' TLBs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlbFlush {
    /// One shootdown per page, as stock Linux migration does (mtier §5.2.1 "heavy").
    #[default]
    PerPage,
    /// One shootdown per batch (mtier's epoch flush; Linux 6.3's batched flushing).
    PerBatch,
}

/// How the machine should carry a plan out (the mechanisms of Nimble §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoveOptions {
    /// Pages per move_pages call.
    pub batch_pages: u32,
    /// Threads copying one batch (Nimble §3.1.2).
    pub copy_threads: u32,
    /// Batches in flight at once (Nimble §3.1.3).
    pub concurrent_batches: u32,
    /// Cap on bytes moved per second of machine time, in MB/s (10^6 bytes).
    pub rate_limit_mb_s: Option<f64>,
    pub tlb_flush: TlbFlush,
    /// Write-protect each page while it is copied, so writes wait for the copy instead of racing
    /// it (HeMem's and HPWP's migrator, HPWP thesis §5.3): [`crate::Mechanism::WriteProtectedCopies`].
    /// The live machine does it with userfaultfd where it has the fault sampler's descriptor;
    /// the simulator stalls a writer until the copy completes, where an unprotected copy that a
    /// write races is done again (docs/model.md §4, "Movers").
    #[serde(default)]
    pub protected_copies: bool,
    /// Keep the slow copy of a clean page when it is promoted (mtier's shadow, thesis §3.1), so
    /// that demoting it while still clean is a mapping switch back to the shadow: no copy, no
    /// allocation. A write to the fast copy drops the shadow. [`crate::Mechanism::Shadowing`].
    #[serde(default)]
    pub shadow: bool,
    /// Split each 2 MiB page into its 512 base pages as it moves and migrate those one by one,
    /// as stock Linux did before THP migration (Nimble §4.3, Fig. 2: a split THP moves like 512
    /// base pages): [`crate::Mechanism::SplitHugePages`]. No effect on 4 KiB pages.
    #[serde(default)]
    pub split_huge: bool,
}

impl MoveOptions {
    /// Whether a plan on pages of `page_size` splits them as they move: only 2 MiB pages split.
    pub fn splits(&self, page_size: crate::PageSize) -> bool {
        self.split_huge && page_size == crate::PageSize::Huge2M
    }
}

impl Default for MoveOptions {
    /// Stock Linux move_pages: one thread, one batch at a time, a shootdown per page.
    fn default() -> Self {
        MoveOptions {
            batch_pages: 512,
            copy_threads: 1,
            concurrent_batches: 1,
            rate_limit_mb_s: None,
            tlb_flush: TlbFlush::PerPage,
            protected_copies: false,
            shadow: false,
            split_huge: false,
        }
    }
}

/// What a plan's rate limit lets through, the same on every machine: bytes at the limit's rate
/// over the time since the previous plan; each page (or exchange pair) takes its bytes in plan
/// order (moves, then exchanges), and what does not fit is dropped as
/// [`MoveFailure::RateLimited`] for the policy to ask again. Dropping, not delaying, keeps a
/// live machine's policy loop from sleeping inside `apply` (as the kernel's promotion rate limit
/// drops, `numa_promotion_rate_limit_MBps`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateBudget {
    bytes_left: Option<f64>,
}

impl RateBudget {
    /// The budget of a plan with `options`, `elapsed_ns` after the previous plan.
    pub fn new(options: &MoveOptions, elapsed_ns: f64) -> Self {
        RateBudget {
            bytes_left: options.rate_limit_mb_s.map(|mb_s| (mb_s * 1e6 * elapsed_ns * 1e-9).max(0.0)),
        }
    }

    /// Takes `bytes` if they fit; false (and nothing taken) if they do not.
    pub fn take(&mut self, bytes: u64) -> bool {
        match self.bytes_left.as_mut() {
            None => true,
            Some(left) if *left >= bytes as f64 => {
                *left -= bytes as f64;
                true
            }
            Some(_) => false,
        }
    }
}

/// A policy's answer at one tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub moves: Vec<Move>,
    pub exchanges: Vec<Exchange>,
    /// Objects to move whole, after `moves` (their pages are moved as `moves` are).
    pub objects: Vec<ObjectMove>,
    /// Placement advice for new objects of allocation sites, applied in order.
    pub site_advice: Vec<SiteAdvice>,
    pub options: MoveOptions,
    /// Why these pages move, in a few words (logged once per batch on the live machine).
    pub reason: String,
}

impl Plan {
    pub fn none() -> Self {
        Plan::default()
    }
    pub fn is_empty(&self) -> bool {
        self.moves.is_empty()
            && self.exchanges.is_empty()
            && self.objects.is_empty()
            && self.site_advice.is_empty()
    }

    /// The page moves of `objects` (pages of `page_bytes`), in plan order, each object's pages
    /// in address order; pages at or beyond `pages` are left out, and the objects that reach
    /// past them are counted in the second value (each is one [`MoveFailure::Invalid`]).
    pub fn object_page_moves(&self, page_bytes: u64, pages: usize) -> (Vec<Move>, u64) {
        let mut out = Vec::new();
        let mut beyond = 0;
        for o in &self.objects {
            let range = crate::ObjectEvent::alloc(o.addr, o.bytes, 0).pages(page_bytes);
            if range.end > pages as u64 {
                beyond += 1;
            }
            let end = range.end.min(pages as u64);
            out.extend((range.start..end).map(|p| Move { page: p as PageIdx, to: o.to }));
        }
        (out, beyond)
    }

    /// What of this plan a machine should carry out, by the rules every machine shares, so the
    /// same plan means the same on each: in plan order, a move to a page or tier that does not
    /// exist fails [`MoveFailure::Invalid`], of a page never touched [`MoveFailure::NotPresent`];
    /// a move to the tier the page is in is nothing to do (not a move, not a failure); what
    /// exceeds the rate limit fails [`MoveFailure::RateLimited`]. An exchange of two pages in
    /// the same tier is `Invalid`. Pages already moved earlier in the plan are seen where the
    /// plan put them. Room in the target tier is the machine's to check (the kernel answers
    /// ENOMEM), after the rate limit: a move refused for room has used its budget on both.
    /// An object move is the moves of the pages its range overlaps ([`Self::object_page_moves`]),
    /// checked after `moves` and by the same rules; an object reaching past the address space
    /// fails `Invalid` once, for its pages there.
    pub fn check(
        &self,
        placement: &[TierId],
        tiers: usize,
        budget: &mut RateBudget,
        page_bytes: u64,
        applied: &mut Applied,
    ) -> CheckedPlan {
        let mut moved: std::collections::HashMap<PageIdx, TierId> = std::collections::HashMap::new();
        let mut out = CheckedPlan::default();
        let tier_of = |moved: &std::collections::HashMap<PageIdx, TierId>, p: PageIdx| {
            moved.get(&p).copied().or_else(|| placement.get(p as usize).copied())
        };
        let (object_moves, beyond) = self.object_page_moves(page_bytes, placement.len());
        for _ in 0..beyond {
            applied.fail(MoveFailure::Invalid);
        }
        for m in self.moves.iter().chain(&object_moves) {
            let Some(from) = tier_of(&moved, m.page).filter(|_| m.to.index() < tiers) else {
                applied.fail(MoveFailure::Invalid);
                continue;
            };
            if !from.is_placed() {
                applied.fail(MoveFailure::NotPresent);
                continue;
            }
            if from == m.to {
                continue;
            }
            if !budget.take(page_bytes) {
                applied.fail(MoveFailure::RateLimited);
                continue;
            }
            moved.insert(m.page, m.to);
            out.moves.push(Move { page: m.page, to: m.to });
        }
        for e in &self.exchanges {
            let (Some(ta), Some(tb)) = (tier_of(&moved, e.a), tier_of(&moved, e.b)) else {
                applied.fail(MoveFailure::Invalid);
                continue;
            };
            if !ta.is_placed() || !tb.is_placed() {
                applied.fail(MoveFailure::NotPresent);
                continue;
            }
            if ta == tb {
                applied.fail(MoveFailure::Invalid);
                continue;
            }
            if !budget.take(2 * page_bytes) {
                applied.fail(MoveFailure::RateLimited);
                continue;
            }
            moved.insert(e.a, tb);
            moved.insert(e.b, ta);
            // Oriented: the page in the faster tier goes down, the other comes up.
            let ((fast, fast_tier), (slow, slow_tier)) =
                if ta < tb { ((e.a, ta), (e.b, tb)) } else { ((e.b, tb), (e.a, ta)) };
            out.exchanges.push(CheckedExchange {
                down: Move { page: fast, to: slow_tier },
                up: Move { page: slow, to: fast_tier },
            });
        }
        out
    }
}

/// An exchange as two moves: the demotion, carried out first, and the promotion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedExchange {
    pub down: Move,
    pub up: Move,
}

/// What [`Plan::check`] leaves for the machine to carry out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckedPlan {
    pub moves: Vec<Move>,
    pub exchanges: Vec<CheckedExchange>,
}

/// Why a page did not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveFailure {
    /// The target tier is full (ENOMEM).
    NoSpace,
    /// The page is not present or was never touched (ENOENT / EFAULT).
    NotPresent,
    /// The page is locked or under writeback (EBUSY).
    Busy,
    /// The target tier does not exist, or the page index is out of range (EINVAL).
    Invalid,
    /// Not permitted (EACCES / EPERM).
    Permission,
    /// Cut by the plan's rate limit ([`RateBudget`]); the policy may ask again.
    RateLimited,
    /// Reported moved, but found on another node than asked when checked afterwards.
    Misplaced,
    /// The mover's queue is full ([`crate::Mover::KernelThread`], [`crate::Mover::CopyEngine`]);
    /// the policy may ask again next round.
    QueueFull,
}

/// What a machine reports after carrying out a plan: what its mover took on, what failed and
/// why, and what it cost.
///
/// A page the mover took on changes tier when its copy completes. On the live machine that is
/// before `apply` returns (move_pages is synchronous); on the simulated machine a copy takes
/// machine time (docs/model.md §4, "Movers"), so a page may still be in flight when `apply`
/// returns: [`Self::pages_in_flight`] counts those, and [`crate::Observations::in_flight`] lists
/// them until they land. A copy the program's end cuts off is reported as not done, never as
/// moved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    /// Pages the mover took on: copied, or being copied (see [`Self::pages_in_flight`]).
    pub pages_moved: u64,
    /// Pairs swapped by exchanges (each pair moves two pages), counted like `pages_moved`.
    pub pairs_exchanged: u64,
    pub bytes_copied: u64,
    /// Of `pages_moved`, the pages still in flight when `apply` returned: each changes tier
    /// when its copy completes. Always 0 on the live machine.
    #[serde(default)]
    pub pages_in_flight: u64,
    /// Time the mover will spend copying what it took on, in nanoseconds: the model's cost on
    /// the simulated machine (docs/model.md §4), measured on the live one. A synchronous mover's
    /// thread spends it waiting; an asynchronous one's copies take it beside the program.
    pub time_ns: u64,
    /// TLB shootdowns the moves take if all are carried out (the simulated machine pays each as
    /// its copy starts, docs/model.md §4).
    pub tlb_shootdowns: u64,
    /// Program time the moves cost, as far as the machine can tell when it takes them on
    /// (shootdowns stall every program thread; copies in the faulting threads stall those
    /// threads), if all are carried out; 0 where it cannot tell. Writes that later wait for a
    /// protected copy are not in it.
    pub program_stall_ns: u64,
    /// Pages that did not move, by reason.
    pub failed: Vec<(MoveFailure, u64)>,
    /// Mechanisms the plan asked for that the machine carried it out without
    /// ([`crate::Mechanisms::honour`]).
    #[serde(default)]
    pub not_honoured: Vec<crate::Mechanism>,
}

impl Applied {
    pub fn failed_total(&self) -> u64 {
        self.failed.iter().map(|(_, n)| n).sum()
    }
    pub(crate) fn count_failure(&mut self, why: MoveFailure) {
        match self.failed.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => self.failed.push((why, 1)),
        }
    }
    /// Records one page that did not move.
    pub fn fail(&mut self, why: MoveFailure) {
        self.count_failure(why)
    }
}
