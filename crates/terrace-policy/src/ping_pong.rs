//! `ping-pong`: a torture test for movers, not a placement policy. Every tick it sends every
//! placed page to the other tier that has room, so a short run makes thousands of migrations;
//! a program that checks its data afterwards proves the mover loses nothing. `ping-pong-wp`
//! does the same with every copy write-protected, as hemem's and hpwp's migrator does it, to
//! prove that a write waiting for a copy is never lost.

use crate::params::{Kind, Param, Params};
use terrace_model::{
    MachineInfo, Mechanism, Move, MoveOptions, Mover, Observations, Plan, Policy, Requirements, TierId,
};

pub const NAME: &str = "ping-pong";
pub const SUMMARY: &str =
    "test: every tick, every page to the other tier (proves migration keeps data intact)";
pub const WP_NAME: &str = "ping-pong-wp";
pub const WP_SUMMARY: &str =
    "test: ping-pong with each copy write-protected (proves hpwp's protected copies lose no write)";

/// The parameters; protected copies are the ping-pong-wp preset.
pub const PARAMS: &[Param] = &[
    Param {
        name: "interval",
        default: "200ms",
        kind: Kind::Duration { min_ns: 1_000, max_ns: 3_600_000_000_000 },
        meaning: "the tick period (real time): every tick every page changes tier",
        source: "Terrace's choice: five round trips of the whole footprint a second",
    },
    Param {
        name: "protected_copies",
        default: "false",
        kind: Kind::Flag,
        meaning: "write-protect each page while it is copied (needs a program Terrace starts)",
        source: "HeMem's and HPWP's migrator (HPWP thesis §5.3); true is the ping-pong-wp preset",
    },
];

pub struct PingPong {
    name: String,
    tick_ns: u64,
    /// Write-protect each page while it is copied.
    protected: bool,
}

impl Default for PingPong {
    fn default() -> Self {
        PingPong::new(&crate::registry::defaults_of(NAME))
    }
}

impl PingPong {
    pub fn new(p: &Params) -> Self {
        PingPong {
            name: p.name().to_string(),
            tick_ns: p.duration_ns("interval"),
            protected: p.flag("protected_copies"),
        }
    }
}

impl Policy for PingPong {
    fn name(&self) -> &str {
        &self.name
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            tick_ns: Some(self.tick_ns),
            mechanisms: if self.protected { vec![Mechanism::WriteProtectedCopies] } else { vec![] },
            // It moves pages between the fast and the slow tier.
            max_tiers: Some(2),
            // move_pages from the policy's thread, as the live machine's migrator calls it.
            mover: Mover::PolicyThread,
            ..Requirements::default()
        }
    }
    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let mut room: Vec<u64> = obs.tiers.iter().map(|t| t.free_pages()).collect();
        let options = MoveOptions { protected_copies: self.protected, ..MoveOptions::default() };
        let mut plan = Plan { options, reason: self.name().into(), ..Plan::none() };
        for (i, &t) in obs.placement.iter().enumerate() {
            if !t.is_placed() || obs.tiers.len() < 2 {
                continue;
            }
            let to = if t == TierId::FAST { TierId::SLOW } else { TierId::FAST };
            if let Some(r) = room.get_mut(to.index()).filter(|r| **r > 0) {
                *r -= 1;
                plan.moves.push(Move { page: i as u32, to });
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_model::TierStatus;

    #[test]
    fn every_placed_page_goes_to_the_other_tier_within_room() {
        let placement = [TierId::FAST, TierId::SLOW, TierId::UNPLACED, TierId::SLOW];
        let tiers = [
            TierStatus { used_pages: 1, capacity_pages: Some(2), ..Default::default() },
            TierStatus { used_pages: 2, capacity_pages: Some(10), ..Default::default() },
        ];
        let obs = Observations {
            now_ns: 0,
            previous_ns: 0,
            placement: &placement,
            tiers: &tiers,
            page_bits: None,
            samples: &[],
            future: None,
            hint_faults: &[],
            in_flight: &[],
        };
        let plan = PingPong::default().tick(&obs);
        assert_eq!(plan.moves, vec![Move { page: 0, to: TierId::SLOW }, Move { page: 1, to: TierId::FAST }]);
        assert!(!plan.options.protected_copies);
        let mut wp = PingPong::new(&crate::registry::defaults_of(WP_NAME));
        assert!(wp
            .requirements(&crate::hemem::tests::machine(1.0))
            .mechanisms
            .contains(&Mechanism::WriteProtectedCopies));
        let plan = wp.tick(&obs);
        assert_eq!(plan.moves.len(), 2);
        assert!(plan.options.protected_copies);
    }
}
