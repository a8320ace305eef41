//! `age`: the idle-age policy of Intel's memtierd (github.com/intel/memtierd), on page-table
//! bits. A page referenced in the last interval is hot and goes to the fast tier; a page idle for
//! `demote_after` intervals goes to the slow tier. When the fast tier is full, the
//! longest-idle fast pages make room for hot ones. On more than two tiers a hot page comes up to
//! the fast tier from wherever it is, and an idle one goes down to the nearest tier with room.
//!
//! It is the simple hot/cold policy the live machine is tested with, and a baseline for the
//! seeds: it knows recency only, not frequency or reads versus writes.
//!
//! Its mover is memtierd's: a mover of its own beside the program and the policy, capped at its
//! bandwidth ([`Mover::CopyEngine`]), whose queue holds what that cap lets through in one
//! interval (Terrace's choice; docs/policies.md, "age").

use crate::params::{Kind, Param, Params};
use terrace_model::{
    FreeRoom, MachineInfo, Move, MoveOptions, Mover, Observations, PageIdx, PageSize, Plan, Policy,
    Requirements, TierId, TrackerRequest, PAGE_DIRTY, PAGE_REFERENCED,
};

pub const NAME: &str = "age";
pub const SUMMARY: &str =
    "memtierd's idle-age policy on page-table bits: recently used pages up, long-idle pages down";
pub const HUGE_NAME: &str = "age-2m";
pub const HUGE_SUMMARY: &str =
    "age over 2 MiB ranges (memtierd's default 512-page regions; moves transparent huge pages whole)";

/// The parameters (docs/policies.md, "age").
pub const PARAMS: &[Param] = &[
    Param {
        name: "interval",
        default: "1s",
        kind: Kind::Duration { min_ns: 1_000_000, max_ns: 3_600_000_000_000 },
        meaning: "how often the page-table bits are read and pages moved (real time)",
        source: "memtierd: its trackers' intervals are seconds; 1 s is Terrace's pick (a shorter one costs \
                 a page-table scan more often)",
    },
    Param {
        name: "demote_after",
        default: "5",
        kind: Kind::Count { min: 1, max: u16::MAX as u64, unit: "intervals" },
        meaning: "intervals a fast page must stay unreferenced before it is demoted",
        source: "unstated (memtierd leaves it to its configuration): 5, i.e. 5 s at the default interval, \
                 so a page used every few seconds is not bounced between tiers",
    },
    Param {
        name: "rate_limit",
        default: "100",
        kind: Kind::Number { min: 0.001, max: 1e6, unit: "MB/s" },
        meaning: "the mover's bandwidth cap",
        source: "memtierd's mover default, 100 MB/s, so the policy never floods the memory bus",
    },
    Param {
        name: "page_size",
        default: "4k",
        kind: Kind::Choice(&["4k", "2m"]),
        meaning: "the pages it tracks and moves: 4 KiB, or 2 MiB ranges moved whole (transparent huge pages)",
        source: "4k: the program's own pages; memtierd tracks 512-page (2 MiB) regions by default, which \
                 is the age-2m preset",
    },
];

pub struct Age {
    /// Intervals since each page was last referenced.
    idle: Vec<u16>,
    name: String,
    tick_ns: u64,
    demote_after: u16,
    rate_limit_mb_s: f64,
    /// Work on 2 MiB pages (memtierd tracks 512-page regions by default, THP-uniform).
    huge: bool,
}

impl Default for Age {
    fn default() -> Self {
        Age::new(&crate::registry::defaults_of(NAME))
    }
}

impl Age {
    pub fn new(p: &Params) -> Self {
        Age {
            idle: Vec::new(),
            name: p.name().to_string(),
            tick_ns: p.duration_ns("interval"),
            demote_after: p.count("demote_after") as u16,
            rate_limit_mb_s: p.number("rate_limit"),
            huge: p.word("page_size") == "2m",
        }
    }

    pub fn huge() -> Self {
        Age::new(&crate::registry::defaults_of(HUGE_NAME))
    }

    fn page_size(&self) -> PageSize {
        if self.huge {
            PageSize::Huge2M
        } else {
            PageSize::Base4K
        }
    }

    /// The mover's queue: the pages its rate limit lets through in one interval of a run at
    /// `scale` (as the plan's rate budget counts them, over machine time), at least one.
    pub fn queue_pages(&self, scale: f64) -> u64 {
        let bytes = self.rate_limit_mb_s * 1e6 * self.tick_ns as f64 * 1e-9 / scale.max(f64::MIN_POSITIVE);
        ((bytes / self.page_size().bytes() as f64).ceil() as u64).max(1)
    }
}

impl Policy for Age {
    fn name(&self) -> &str {
        &self.name
    }

    fn requirements(&self, machine: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::page_bits()],
            tick_ns: Some(self.tick_ns),
            page_size: self.page_size(),
            mover: Mover::CopyEngine { queue_pages: self.queue_pages(machine.scale) },
            ..Requirements::default()
        }
    }

    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let Some(bits) = obs.page_bits else { return Plan::none() };
        // The live machine's page count can grow as the program maps memory.
        self.idle.resize(obs.placement.len(), 0);
        let mut hot_slow = Vec::new();
        let mut idle_fast: Vec<(u16, PageIdx)> = Vec::new();
        for (i, (&tier, &b)) in obs.placement.iter().zip(bits).enumerate() {
            if !tier.is_placed() {
                continue;
            }
            let idle = &mut self.idle[i];
            if b & (PAGE_REFERENCED | PAGE_DIRTY) != 0 {
                *idle = 0;
                if tier != TierId::FAST {
                    hot_slow.push(i as PageIdx);
                }
            } else {
                *idle = idle.saturating_add(1);
                if tier == TierId::FAST {
                    idle_fast.push((*idle, i as PageIdx));
                }
            }
        }
        // Longest idle first: those are demoted first, and make room first.
        idle_fast.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut plan = Plan {
            options: MoveOptions { rate_limit_mb_s: Some(self.rate_limit_mb_s), ..MoveOptions::default() },
            reason: format!(
                "age: referenced in the last interval up, idle {}+ intervals down",
                self.demote_after
            ),
            ..Plan::none()
        };
        // Demotions come first in the plan, so only the room below as it is now takes them.
        let mut room = FreeRoom::new(obs.tiers);
        let mut free = room.free(TierId::FAST);
        let mut victims = idle_fast.iter().peekable();
        // Demote what has been idle long enough.
        while let Some(&&(idle, page)) = victims.peek() {
            if idle < self.demote_after {
                break;
            }
            let Some(to) = room.take_below(TierId::FAST) else { break };
            plan.moves.push(Move { page, to });
            free = free.saturating_add(1);
            victims.next();
        }
        // Promote hot pages into free room, then against the idlest remaining fast pages.
        let mut promotions = Vec::new();
        for page in hot_slow {
            if free == 0 {
                match (victims.next(), room.take_below(TierId::FAST)) {
                    (Some(&(_, v)), Some(to)) => plan.moves.push(Move { page: v, to }),
                    _ => break,
                }
            } else {
                free -= 1;
            }
            promotions.push(Move { page, to: TierId::FAST });
        }
        plan.moves.extend(promotions);
        plan
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use terrace_model::TierStatus;

    /// One tick of a page-bits policy on two tiers: `placement`, the bits seen since the last
    /// tick, and a fast tier of `fast_capacity` pages (the slow one unbounded).
    pub(crate) fn tick(p: &mut dyn Policy, placement: &[TierId], bits: &[u8], fast_capacity: u64) -> Plan {
        let used = placement.iter().filter(|t| **t == TierId::FAST).count() as u64;
        let tiers = [
            TierStatus { used_pages: used, capacity_pages: Some(fast_capacity), ..Default::default() },
            TierStatus::default(),
        ];
        tick_on(p, placement, bits, &tiers)
    }

    /// One tick of a page-bits policy on `tiers` as given.
    pub(crate) fn tick_on(
        p: &mut dyn Policy,
        placement: &[TierId],
        bits: &[u8],
        tiers: &[TierStatus],
    ) -> Plan {
        let obs = Observations {
            now_ns: 0,
            previous_ns: 0,
            placement,
            tiers,
            page_bits: Some(bits),
            samples: &[],
            future: None,
            hint_faults: &[],
            in_flight: &[],
        };
        p.tick(&obs)
    }

    const F: TierId = TierId::FAST;
    const S: TierId = TierId::SLOW;

    #[test]
    fn a_referenced_slow_page_is_promoted_into_free_room() {
        let mut p = Age::default();
        let plan = tick(&mut p, &[F, S, S], &[0, PAGE_REFERENCED, 0], 2);
        assert_eq!(plan.moves, vec![Move { page: 1, to: F }]);
    }

    #[test]
    fn a_fast_page_is_demoted_only_after_staying_idle_long_enough() {
        let mut p = Age::default();
        for _ in 1..p.demote_after {
            assert!(tick(&mut p, &[F, S], &[0, 0], 10).is_empty());
        }
        assert_eq!(tick(&mut p, &[F, S], &[0, 0], 10).moves, vec![Move { page: 0, to: S }]);
    }

    #[test]
    fn a_full_fast_tier_trades_its_idlest_page_for_a_hot_one_demotion_first() {
        let mut p = Age::default();
        tick(&mut p, &[F, F, S], &[0, PAGE_REFERENCED, 0], 2);
        let plan = tick(&mut p, &[F, F, S], &[0, PAGE_REFERENCED, PAGE_DIRTY], 2);
        assert_eq!(plan.moves, vec![Move { page: 0, to: S }, Move { page: 2, to: F }]);
    }

    #[test]
    fn the_interval_and_demote_after_are_parameters() {
        let mut p = Age::new(&crate::registry::params_of("age:demote_after=2,interval=250ms"));
        assert_eq!(p.name(), "age:interval=250ms,demote_after=2");
        assert_eq!(p.requirements(&crate::hemem::tests::machine(1.0)).tick_ns, Some(250_000_000));
        assert!(tick(&mut p, &[F, S], &[0, 0], 10).is_empty());
        assert_eq!(tick(&mut p, &[F, S], &[0, 0], 10).moves, vec![Move { page: 0, to: S }]);
    }

    #[test]
    fn an_unplaced_page_is_never_moved() {
        let mut p = Age::default();
        assert!(tick(&mut p, &[TierId::UNPLACED], &[PAGE_DIRTY], 1).is_empty());
    }
}
