//! Linux's default: a page stays on the node where it was first touched, the fast tier while it
//! has room (Ambix §5 "ADM-default"). Never migrates.

use terrace_model::{MachineInfo, Observations, Plan, Policy, Requirements};

pub const NAME: &str = "first-touch";
pub const SUMMARY: &str =
    "Linux default: fast tier until full, then slow; never migrates (Ambix ADM-default)";

pub struct FirstTouch;

impl Policy for FirstTouch {
    fn name(&self) -> &str {
        NAME
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements::default()
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}
