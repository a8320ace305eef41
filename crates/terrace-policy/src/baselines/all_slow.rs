//! Everything in the slowest tier (numactl --membind to the slow node; Ambix ch. 3 "DCPMM-only").
//! On more than two tiers that is the last one: the bound below every placement.

use terrace_model::{InitialPlacement, MachineInfo, Observations, Plan, Policy, Requirements, TierId};

pub const NAME: &str = "all-slow";
pub const SUMMARY: &str = "everything in the slowest tier (membind to the slow node); never migrates";

pub struct AllSlow;

impl Policy for AllSlow {
    fn name(&self) -> &str {
        NAME
    }
    fn requirements(&self, m: &MachineInfo) -> Requirements {
        let slowest = TierId(m.tiers.len().saturating_sub(1).max(1) as u8);
        Requirements { initial: InitialPlacement::Tier(slowest), ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}
