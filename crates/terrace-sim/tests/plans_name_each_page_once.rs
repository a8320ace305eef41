//! Every registered policy names each page at most once in a plan (its moves and both pages of
//! each exchange). A page named twice is one the machines take once and refuse the second time
//! (`Busy`, or an exchange of two pages in one tier), so the policy loses the second move without
//! meaning to: ambix's Threshold once listed SWITCH's demotions again and lost those pairs
//! (docs/policies.md, "ambix"). Checked on a few workloads, fast-tier sizes and seeds, with the
//! fast tier small and large.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use terrace_model::{Applied, MachineInfo, ObjectEvent, Observations, Plan, Policy, Requirements};
use terrace_sim::{simulate, Capacity, Profile, SimOptions};

/// Passes everything to the policy and notes every page a plan names twice.
struct NamesOnce {
    inner: Box<dyn Policy>,
    twice: Arc<Mutex<Vec<String>>>,
}

impl Policy for NamesOnce {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn requirements(&self, machine: &MachineInfo) -> Requirements {
        self.inner.requirements(machine)
    }
    fn start(&mut self, machine: &MachineInfo) {
        self.inner.start(machine)
    }
    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let plan = self.inner.tick(obs);
        let mut seen = HashSet::new();
        let pages = plan.moves.iter().map(|m| m.page).chain(plan.exchanges.iter().flat_map(|e| [e.a, e.b]));
        for page in pages {
            if !seen.insert(page) {
                self.twice
                    .lock()
                    .unwrap()
                    .push(format!("page {page} at {} ns ({})", obs.now_ns, plan.reason));
            }
        }
        plan
    }
    fn applied(&mut self, applied: &Applied) {
        self.inner.applied(applied)
    }
    fn next_tick_ns(&self) -> Option<u64> {
        self.inner.next_tick_ns()
    }
    fn object_event(&mut self, event: &ObjectEvent) {
        self.inner.object_event(event)
    }
}

#[test]
fn no_policy_names_a_page_twice_in_one_plan() {
    let profile = Profile::load("optane-2019").unwrap();
    let mut found = Vec::new();
    for spec in terrace_policy::list() {
        for (workload, seed) in [("pmbench-s25-r20", 1), ("gups", 2), ("stream-triad", 3)] {
            for percent in [10.0, 60.0] {
                let twice = Arc::new(Mutex::new(Vec::new()));
                let mut policy =
                    NamesOnce { inner: terrace_policy::build(spec.name).unwrap(), twice: twice.clone() };
                let source = terrace_workloads::build(workload, seed, 1.0 / 16.0).unwrap();
                let opts = SimOptions { fast_capacity: Capacity::Percent(percent), ..Default::default() };
                simulate(source, &mut policy, &profile, &opts).unwrap();
                let twice = twice.lock().unwrap();
                if let Some(first) = twice.first() {
                    found.push(format!("{} on {workload} at {percent}%: {first}", spec.name));
                }
            }
        }
    }
    assert!(found.is_empty(), "plans naming a page twice:\n{}", found.join("\n"));
}
