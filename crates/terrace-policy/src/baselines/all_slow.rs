//! Everything in the slow tier (numactl --membind to the slow node; Ambix ch. 3 "DCPMM-only").

use terrace_model::{InitialPlacement, MachineInfo, Observations, Plan, Policy, Requirements, TierId};

pub const NAME: &str = "all-slow";
pub const SUMMARY: &str = "everything in the slow tier (membind to the slow node); never migrates";

pub struct AllSlow;

impl Policy for AllSlow {
    fn name(&self) -> &str {
        NAME
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements { initial: InitialPlacement::Tier(TierId::SLOW), ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}
