//! mtier's shootdowns on the simulated machine, counted by hand from what it did (mtier §5.2.1,
//! Table 5.1): every epoch's look at the page bits flushes once (the scan clears the bits); with
//! shadows and one flush per batch, an epoch's moves add one flush if they evict anything (a
//! promotion keeps its shadow, so a stale translation is harmless and needs none); with kernel
//! migration (mtier-heavy) every page moved flushes once.

use terrace_model::{Applied, MachineInfo, Observations, Plan, Policy, Requirements, TierId};
use terrace_sim::{Capacity, Profile, RunReport, SimOptions};

/// Wraps a policy and counts its epochs, and of its plans those the machine took evictions from.
struct Counted {
    inner: Box<dyn Policy>,
    epochs: u64,
    /// Plans whose demotions the mover took on (at least one).
    evicting_plans: u64,
    pages_taken: u64,
    last_evictions: usize,
}

impl Policy for Counted {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn requirements(&self, m: &MachineInfo) -> Requirements {
        self.inner.requirements(m)
    }
    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        self.epochs += 1;
        let plan = self.inner.tick(obs);
        self.last_evictions = plan.moves.iter().filter(|m| m.to == TierId::SLOW).count();
        plan
    }
    fn applied(&mut self, a: &Applied) {
        // Evictions come first in each plan and always have room to go to, so none fails.
        if self.last_evictions > 0 && a.pages_moved > 0 {
            self.evicting_plans += 1;
        }
        self.pages_taken += a.pages_moved;
        self.inner.applied(a);
    }
}

fn run(spec: &str) -> (RunReport, Counted) {
    let mut p = Counted {
        inner: terrace_policy::build(spec).unwrap(),
        epochs: 0,
        evicting_plans: 0,
        pages_taken: 0,
        last_evictions: 0,
    };
    let source = terrace_workloads::build("mtier-stream-t6", 1, 0.5).unwrap();
    let profile = Profile::load("remote-socket").unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(12.5), ..SimOptions::default() };
    let r = terrace_sim::simulate(source, &mut p, &profile, &opts).unwrap();
    (r, p)
}

#[test]
fn mtier_flushes_once_per_look_and_once_per_evicting_epoch() {
    let (r, p) = run("mtier");
    assert!(p.epochs > 20 && p.evicting_plans > 10, "{} epochs, {} evicting", p.epochs, p.evicting_plans);
    assert_eq!(r.tlb_shootdowns, p.epochs + p.evicting_plans, "{r:?}");
    assert!(r.pages_switched > 0, "evictions were switches back to shadows");
}

#[test]
fn heavy_flushes_once_per_look_and_once_per_page() {
    let (r, p) = run("mtier-heavy");
    assert!(p.pages_taken > 100);
    // A page is flushed as its copy starts: of the pages not done at the end, all but the one
    // under way never started.
    let flushed = r.tlb_shootdowns - p.epochs;
    assert!(
        flushed + r.pages_not_done >= p.pages_taken && flushed + r.pages_not_done <= p.pages_taken + 1,
        "{r:?}"
    );
    assert_eq!(r.pages_switched, 0);
    // The thesis's ratio (Table 5.1) comes from here: heavy flushes per page, mtier per epoch.
    let (m, _) = run("mtier");
    assert!(
        r.tlb_shootdowns > 10 * m.tlb_shootdowns,
        "heavy {} vs mtier {}",
        r.tlb_shootdowns,
        m.tlb_shootdowns
    );
}
