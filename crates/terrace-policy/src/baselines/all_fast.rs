//! Everything in an unbounded fast tier: the lower bound on run time that speedups are read
//! against, for every program whose speed is set by latency. A bandwidth-bound program can run a
//! little faster with part of its pages in the slow tier, whose bandwidth then adds to the fast
//! tier's (what MPOL_WEIGHTED_INTERLEAVE is for; docs/policies.md, "Baselines").

use terrace_model::{MachineInfo, MemoryMode, Observations, Plan, Policy, Requirements};

pub const NAME: &str = "all-fast";
pub const SUMMARY: &str =
    "bound: an unbounded fast tier holds everything (the fastest run unless bandwidth-bound)";

pub struct AllFast;

impl Policy for AllFast {
    fn name(&self) -> &str {
        NAME
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements { memory_mode: MemoryMode::UnboundedFast, ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}
