//! `mtier`: epoch-based rotation of read-only pages through a fast-tier pool (Teague, UTK MS
//! thesis 2018, §3.1 and §3.4), with its two mechanisms: shadow copies of promoted pages and
//! one TLB flush per epoch.
//!
//! The policy (§3.4.3-§3.4.5):
//! - A pool of the fast tier's pages (`s`, here the fast tier the machine gives) holds read-only
//!   pages only. Memory starts in the slow tier (§4.3: the program runs on one node with its
//!   memory on the other).
//! - Every `bookkeeping`-th epoch (`b`) evicts the whole pool and rebuilds the list of eligible
//!   pages (§3.4.4). The thesis's eligible pages are those the program made read-only with
//!   `mprotect(PROT_READ)`: where the machine marks such pages (`PAGE_READ_ONLY`, the live
//!   machine) only they are eligible. Where no page is marked (the simulated machine, whose
//!   traces carry no protections, or a program that protects nothing), a page is eligible when
//!   it was read (referenced in an epoch with no write) since it was last written, and no write
//!   to it was seen in the last `read_only_window` epochs (page-table bits); a page written since
//!   the list was built is passed over. The thesis's program protects data it reads (§3.2): a page
//!   never read (untouched, or only ever written, as every page of a recording that sees writes
//!   only) is not read-only data, and rotating it through the pool costs copies for nothing.
//! - Every other epoch (§3.4.5) draws up to `fill` x pool pages from the list at random
//!   **without** replacement (a partial Fisher-Yates shuffle; the thesis's App. B code draws with
//!   replacement, which we take for a slip), keeps those already in the pool, evicts the rest of
//!   the pool in one batch, then promotes the new ones. An epoch with no eligible page does
//!   nothing and makes the next one a bookkeeping epoch (§3.4.3, the "dummy" iteration).
//! - The mover (`mover`): `mtier` keeps each promoted page's slow copy as its shadow, so an
//!   eviction is a mapping switch, and flushes the TLB once per epoch (§3.1); `heavy` moves every
//!   page by kernel migration with a flush per page (§3.7, `mtier_heavy`); `mbind` is the
//!   thesis's user-space comparison, one mbind(2) call per page (§3.7.3). Each runs synchronously
//!   in the policy's thread, as the module's kernel thread does, which sleeps an epoch after its
//!   work (§3.4.3).

use crate::params::{Kind, Param, Params};
use rand_core::{Rng as _, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::HashSet;
use terrace_model::{
    InitialPlacement, MachineInfo, Move, MoveOptions, Mover, Observations, PageIdx, Plan, Policy,
    Requirements, TierId, TlbFlush, TrackerRequest, PAGE_DIRTY, PAGE_READ_ONLY, PAGE_REFERENCED,
};

pub const NAME: &str = "mtier";
pub const SUMMARY: &str = "mtier: read-only pages rotated at random through the fast tier every 50 ms, \
                           slow copies kept as shadows, one TLB flush per epoch";
pub const HEAVY_NAME: &str = "mtier-heavy";
pub const HEAVY_SUMMARY: &str =
    "mtier's rotation with kernel migration for every move and a TLB flush per page (mtier_heavy, §3.7)";
pub const MBIND_NAME: &str = "mtier-mbind";
pub const MBIND_SUMMARY: &str =
    "mtier's rotation from user space, one mbind call per page (the thesis's stream_mbind, §3.7.3)";

/// The movers, in the order of the thesis's Table 5.1.
pub const MOVERS: &[&str] = &["mtier", "heavy", "mbind"];

/// The parameters (docs/policies.md, "mtier").
pub const PARAMS: &[Param] = &[
    Param {
        name: "epoch",
        default: "50ms",
        kind: Kind::Duration { min_ns: 50_000_000, max_ns: 3_600_000_000_000 },
        meaning: "time between rotations of the pool (real time; divided by the run's scale)",
        source: "mtier §3.1: about 50 ms at least; §4.3 runs 50, 100, 500 and 1000 ms",
    },
    Param {
        name: "fill",
        default: "100%",
        kind: Kind::Percent { min: 1.0, max: 100.0 },
        meaning: "share of the pool drawn from the eligible pages each epoch (f)",
        source: "mtier §3.4.3 names f and never gives its value; 100%: every epoch refills the whole pool",
    },
    Param {
        name: "bookkeeping",
        default: "20",
        kind: Kind::Count { min: 1, max: 100_000, unit: "epochs" },
        meaning: "every this many epochs the pool is emptied and the eligible list rebuilt (b)",
        source: "mtier §3.4.3 names b and never gives its value; 20: the list is a second old at most \
                 at 50 ms epochs",
    },
    Param {
        name: "read_only_window",
        default: "2",
        kind: Kind::Count { min: 1, max: 100_000, unit: "epochs" },
        meaning: "a page written in any of this many last epochs is not eligible (the simulated \
                  machine's read-only test)",
        source: "Terrace: the thesis's pages are mprotected read-only (§3.2), a test no simulated \
                 trace has; 2 epochs: an initialising write is past within an epoch",
    },
    Param {
        name: "mover",
        default: "mtier",
        kind: Kind::Choice(MOVERS),
        meaning: "how pages move: mtier (shadows, a flush per epoch), heavy (kernel migration, a \
                  flush per page), mbind (a call per page)",
        source: "mtier §3.7 and Table 5.1's three variants",
    },
];

/// Which of the thesis's movers a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Mtier,
    Heavy,
    Mbind,
}

pub struct Mtier {
    name: String,
    epoch_ns: u64,
    fill: f64,
    bookkeeping: u32,
    window: u32,
    variant: Variant,
    /// Epochs seen; the first one is a bookkeeping epoch.
    epoch: u32,
    /// Per page: the last epoch a write to it was seen in (0: never).
    last_write: Vec<u32>,
    /// Per page: the last epoch it was referenced and not written in (0: never).
    last_read: Vec<u32>,
    /// Per page: mapped read-only at the last look (`PAGE_READ_ONLY`).
    read_only: Vec<bool>,
    /// Some page was marked read-only at the last look: only such pages are eligible.
    protections: bool,
    /// The eligible list, as built at the last bookkeeping epoch.
    eligible: Vec<PageIdx>,
    /// The next epoch is a bookkeeping one (no eligible page was found).
    force_bookkeeping: bool,
    rng: Xoshiro256PlusPlus,
}

impl Default for Mtier {
    fn default() -> Self {
        Mtier::new(&crate::registry::defaults_of(NAME))
    }
}

impl Mtier {
    pub fn new(p: &Params) -> Self {
        Mtier {
            name: p.name().to_string(),
            epoch_ns: p.duration_ns("epoch"),
            fill: p.fraction("fill"),
            bookkeeping: p.count("bookkeeping") as u32,
            window: p.count("read_only_window") as u32,
            variant: match p.word("mover") {
                "heavy" => Variant::Heavy,
                "mbind" => Variant::Mbind,
                _ => Variant::Mtier,
            },
            epoch: 0,
            last_write: Vec::new(),
            last_read: Vec::new(),
            read_only: Vec::new(),
            protections: false,
            eligible: Vec::new(),
            force_bookkeeping: false,
            // Fixed, so a run is reproducible; the thesis uses the kernel's non-blocking PRNG.
            rng: Xoshiro256PlusPlus::seed_from_u64(0x006d_7469_6572),
        }
    }

    /// Written within the read-only window (counting this epoch).
    fn written_lately(&self, page: PageIdx) -> bool {
        let w = self.last_write.get(page as usize).copied().unwrap_or(0);
        w > 0 && w + self.window > self.epoch
    }

    /// Whether `page` may enter the pool: mapped read-only where the machine marks protections,
    /// else read since its last write and not written within the window.
    fn read_only_now(&self, page: PageIdx) -> bool {
        if self.protections {
            self.read_only.get(page as usize).copied().unwrap_or(false)
        } else {
            let at = |v: &Vec<u32>| v.get(page as usize).copied().unwrap_or(0);
            at(&self.last_read) > at(&self.last_write) && !self.written_lately(page)
        }
    }

    /// How an epoch's moves are carried out: all of them one batch (the evictions first, so one
    /// flush serves them all, §3.1), or one call per page for mbind.
    fn options(&self, pages: usize) -> MoveOptions {
        let whole = u32::try_from(pages.max(1)).unwrap_or(u32::MAX);
        match self.variant {
            Variant::Mtier => MoveOptions {
                batch_pages: whole,
                tlb_flush: TlbFlush::PerBatch,
                shadow: true,
                ..MoveOptions::default()
            },
            Variant::Heavy => MoveOptions { batch_pages: whole, ..MoveOptions::default() },
            Variant::Mbind => MoveOptions { batch_pages: 1, ..MoveOptions::default() },
        }
    }

    /// Draws `n` distinct entries of `list` at random: a partial Fisher-Yates shuffle of its
    /// first `n` places (mtier App. B, without its replacement).
    fn draw(rng: &mut Xoshiro256PlusPlus, list: &mut [PageIdx], n: usize) -> Vec<PageIdx> {
        let len = list.len();
        for i in 0..n.min(len) {
            let span = (len - i) as u64;
            let j = i + ((u128::from(rng.next_u64()) * u128::from(span)) >> 64) as usize;
            list.swap(i, j);
        }
        list[..n.min(len)].to_vec()
    }
}

impl Policy for Mtier {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, _machine: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::page_bits()],
            tick_ns: Some(self.epoch_ns),
            // §4.3: memory starts on the remote node; the pool is filled by the rotation only.
            initial: InitialPlacement::Tier(TierId::SLOW),
            mover: Mover::PolicyThread,
            max_tiers: Some(2),
            ..Requirements::default()
        }
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        self.epoch += 1;
        if let Some(bits) = obs.page_bits {
            if self.last_write.len() < bits.len() {
                self.last_write.resize(bits.len(), 0);
                self.last_read.resize(bits.len(), 0);
            }
            for ((w, r), &b) in self.last_write.iter_mut().zip(self.last_read.iter_mut()).zip(bits) {
                if b & PAGE_DIRTY != 0 {
                    *w = self.epoch;
                } else if b & PAGE_REFERENCED != 0 {
                    *r = self.epoch;
                }
            }
            self.read_only.clear();
            self.read_only.extend(bits.iter().map(|&b| b & PAGE_READ_ONLY != 0));
            self.protections = self.read_only.iter().any(|&r| r);
        }
        let pool: Vec<PageIdx> = obs
            .placement
            .iter()
            .enumerate()
            .filter(|(_, &t)| t == TierId::FAST)
            .map(|(i, _)| i as PageIdx)
            .collect();
        let bookkeeping = self.force_bookkeeping || (self.epoch - 1).is_multiple_of(self.bookkeeping);
        if bookkeeping {
            // §3.4.4: the whole pool back to the slow tier, and a new eligible list.
            self.force_bookkeeping = false;
            self.eligible = (0..obs.placement.len() as PageIdx)
                .filter(|&p| obs.placement[p as usize].is_placed() && self.read_only_now(p))
                .collect();
            let moves: Vec<Move> = pool.iter().map(|&page| Move { page, to: TierId::SLOW }).collect();
            return Plan {
                options: self.options(moves.len()),
                moves,
                reason: "mtier: bookkeeping, the pool emptied and the eligible list rebuilt".into(),
                ..Plan::none()
            };
        }
        // Pages written (or made writable) since the list was built are no longer read-only.
        let mut candidates: Vec<PageIdx> =
            self.eligible.iter().copied().filter(|&p| self.read_only_now(p)).collect();
        if candidates.is_empty() {
            self.force_bookkeeping = true;
            return Plan::none();
        }
        let pool_pages = obs.tiers.first().and_then(|t| t.capacity_pages).unwrap_or(candidates.len() as u64);
        let n = ((self.fill * pool_pages as f64).floor() as usize).min(candidates.len());
        let chosen: HashSet<PageIdx> = Self::draw(&mut self.rng, &mut candidates, n).into_iter().collect();
        let in_pool: HashSet<PageIdx> = pool.iter().copied().collect();
        // All evictions first (one batch, one flush), then the promotions (§3.1, §3.4.5).
        let mut moves: Vec<Move> = pool
            .iter()
            .filter(|p| !chosen.contains(p))
            .map(|&page| Move { page, to: TierId::SLOW })
            .collect();
        let mut promote: Vec<PageIdx> = chosen.iter().copied().filter(|p| !in_pool.contains(p)).collect();
        promote.sort_unstable();
        moves.extend(promote.into_iter().map(|page| Move { page, to: TierId::FAST }));
        Plan {
            options: self.options(moves.len()),
            moves,
            reason: "mtier: the pool rotated to a new random draw of read-only pages".into(),
            ..Plan::none()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::age::tests::tick;

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;
    const D: u8 = PAGE_DIRTY;
    const R: u8 = PAGE_REFERENCED;

    fn with(spec: &str) -> Mtier {
        Mtier::new(&crate::registry::params_of(spec))
    }

    #[test]
    fn the_first_epoch_builds_the_list_and_standard_epochs_fill_the_pool() {
        let mut p = with("mtier:read_only_window=1");
        let placement = [S; 8];
        let plan = tick(&mut p, &placement, &[R; 8], 2);
        assert!(plan.moves.is_empty(), "bookkeeping with an empty pool evicts nothing");
        assert_eq!(p.eligible.len(), 8);
        let plan = tick(&mut p, &placement, &[0; 8], 2);
        assert_eq!(plan.moves.len(), 2, "fill 100% of a pool of 2: {plan:?}");
        assert!(plan.moves.iter().all(|m| m.to == F));
        assert!(plan.options.shadow && plan.options.tlb_flush == TlbFlush::PerBatch);
        assert!(plan.options.batch_pages as usize >= plan.moves.len(), "one batch, one flush");
    }

    #[test]
    fn an_epoch_evicts_what_it_did_not_draw_first_and_keeps_what_it_drew_again() {
        let mut p = with("mtier:read_only_window=1");
        tick(&mut p, &[S; 6], &[R; 6], 3);
        // Pages 0..3 in the pool; the next draw keeps the drawn ones there.
        let placement = [F, F, F, S, S, S];
        let plan = tick(&mut p, &placement, &[0; 6], 3);
        let evicted: Vec<PageIdx> = plan.moves.iter().filter(|m| m.to == S).map(|m| m.page).collect();
        let promoted: Vec<PageIdx> = plan.moves.iter().filter(|m| m.to == F).map(|m| m.page).collect();
        assert_eq!(evicted.len(), promoted.len(), "the pool stays full: {plan:?}");
        let first_promotion = plan.moves.iter().position(|m| m.to == F).unwrap_or(plan.moves.len());
        assert!(plan.moves[..first_promotion].iter().all(|m| m.to == S), "evictions come first");
        assert!(evicted.iter().all(|&e| e < 3) && promoted.iter().all(|&q| q >= 3));
    }

    #[test]
    fn written_pages_are_never_eligible() {
        let mut p = with("mtier:read_only_window=2");
        let plan = tick(&mut p, &[S; 4], &[D, D, R, R], 4);
        assert!(plan.moves.is_empty());
        assert_eq!(p.eligible, [2, 3]);
        // Page 3 is written after the list was built: it is passed over.
        let plan = tick(&mut p, &[S; 4], &[0, 0, 0, D], 4);
        assert_eq!(plan.moves, [Move { page: 2, to: F }]);
    }

    /// A page never read is not read-only data: one untouched, and one only ever written (a
    /// recording that sees writes only shows every page so), stay out of the list however long
    /// ago their last write was; a page read after its write comes in.
    #[test]
    fn pages_never_read_since_their_last_write_are_not_eligible() {
        let mut p = with("mtier:read_only_window=1,bookkeeping=4");
        tick(&mut p, &[S; 3], &[0, D, D], 1);
        assert!(p.eligible.is_empty());
        tick(&mut p, &[S; 3], &[0, 0, R], 1);
        tick(&mut p, &[S; 3], &[0, 0, 0], 1);
        assert_eq!(p.eligible, [2], "the untouched page 0 and the written page 1 stay out");
    }

    #[test]
    fn where_the_machine_marks_read_only_pages_only_they_are_eligible() {
        const RO: u8 = PAGE_READ_ONLY;
        let mut p = with("mtier:read_only_window=1");
        // Pages 0 and 1 are clean but writable; 2 and 3 were made read-only.
        tick(&mut p, &[S; 4], &[0, 0, RO, RO | terrace_model::PAGE_REFERENCED], 4);
        assert_eq!(p.eligible, [2, 3]);
        let plan = tick(&mut p, &[S; 4], &[0, 0, RO, RO], 4);
        let mut up: Vec<PageIdx> = plan.moves.iter().map(|m| m.page).collect();
        up.sort_unstable();
        assert_eq!(up, [2, 3]);
    }

    #[test]
    fn every_bookkeeping_epoch_empties_the_pool() {
        let mut p = with("mtier:bookkeeping=3,read_only_window=1");
        tick(&mut p, &[S; 4], &[R; 4], 2);
        tick(&mut p, &[F, F, S, S], &[0; 4], 2);
        tick(&mut p, &[F, F, S, S], &[0; 4], 2);
        let plan = tick(&mut p, &[F, F, S, S], &[0; 4], 2);
        assert_eq!(plan.moves, [Move { page: 0, to: S }, Move { page: 1, to: S }], "epoch 4 = 1 + b");
    }

    #[test]
    fn no_eligible_page_makes_the_next_epoch_a_bookkeeping_one() {
        let mut p = with("mtier:read_only_window=1");
        tick(&mut p, &[S; 2], &[D, D], 1);
        assert!(p.eligible.is_empty());
        assert!(tick(&mut p, &[S; 2], &[0, 0], 1).is_empty());
        assert!(p.force_bookkeeping);
        tick(&mut p, &[S; 2], &[R, R], 1);
        assert_eq!(p.eligible, [0, 1], "rebuilt at once, not b epochs later");
    }

    #[test]
    fn the_draw_is_without_replacement() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for n in [1, 50, 99, 100] {
            let mut list: Vec<PageIdx> = (0..100).collect();
            let drawn = Mtier::draw(&mut rng, &mut list, n);
            let distinct: HashSet<_> = drawn.iter().collect();
            assert_eq!((drawn.len(), distinct.len()), (n, n));
        }
        // Every page is drawn about as often (a uniform draw), over many epochs of 10 of 100.
        let mut seen = [0u32; 100];
        for _ in 0..2000 {
            let mut list: Vec<PageIdx> = (0..100).collect();
            for p in Mtier::draw(&mut rng, &mut list, 10) {
                seen[p as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| (120..=280).contains(&c)), "{seen:?}");
    }

    #[test]
    fn the_variants_move_as_the_thesis_says() {
        let plan_of = |spec: &str| {
            let mut p = with(spec);
            tick(&mut p, &[S; 8], &[R; 8], 4);
            tick(&mut p, &[S; 8], &[0; 8], 4)
        };
        let heavy = plan_of("mtier-heavy:read_only_window=1");
        assert!(!heavy.options.shadow && heavy.options.tlb_flush == TlbFlush::PerPage);
        let mbind = plan_of("mtier-mbind:read_only_window=1");
        assert_eq!((mbind.options.batch_pages, mbind.options.shadow), (1, false));
    }
}
