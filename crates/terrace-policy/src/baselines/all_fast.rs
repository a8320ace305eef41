//! Everything in an unbounded fast tier: no placement can run faster, so it is the lower bound on
//! run time that speedups are read against.

use terrace_model::{MachineInfo, MemoryMode, Observations, Plan, Policy, Requirements};

pub const NAME: &str = "all-fast";
pub const SUMMARY: &str = "bound: an unbounded fast tier holds everything (the best any policy can do)";

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
