//! Optane Memory Mode: the fast tier is a direct-mapped hardware cache of the slow tier, so
//! software places nothing (Ambix §3.1, §5.3.2 "MemM"). Only a machine that has the mode can run it.

use terrace_model::{MachineInfo, MemoryMode, Observations, Plan, Policy, Requirements};

pub const NAME: &str = "memory-mode";
pub const SUMMARY: &str =
    "hardware cache: the fast tier caches the slow tier in 64 B lines, direct-mapped (Ambix MemM)";

pub struct MemoryModeCache;

impl Policy for MemoryModeCache {
    fn name(&self) -> &str {
        NAME
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements { memory_mode: MemoryMode::FastTierAsCache, ..Requirements::default() }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}
