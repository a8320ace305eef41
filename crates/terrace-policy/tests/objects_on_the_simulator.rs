//! The object-tiering policy (`objects`) on the simulated machine, over the `objects` workload:
//! it sees every allocation and free, its plans move whole objects, demotions first, and its site advice places new objects at allocation only when proactive
//! placement is on (object tiering §3.4.4, §3.5).

use terrace_model::{
    Applied, MachineInfo, ObjectEvent, ObjectEventKind, Observations, Plan, Policy, Requirements,
};
use terrace_sim::{Capacity, Profile, RunReport, SimOptions};

/// Wraps a policy and keeps what passed through it.
struct Watched {
    inner: Box<dyn Policy>,
    allocs: u64,
    frees: u64,
    object_moves: u64,
    advice: u64,
    /// Sites advised a tier, and advice withdrawn.
    advised: std::collections::BTreeSet<u64>,
    withdrawn: u64,
}

impl Policy for Watched {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn requirements(&self, m: &MachineInfo) -> Requirements {
        self.inner.requirements(m)
    }
    fn start(&mut self, m: &MachineInfo) {
        self.inner.start(m);
    }
    fn object_event(&mut self, e: &ObjectEvent) {
        match e.kind {
            ObjectEventKind::Alloc => self.allocs += 1,
            ObjectEventKind::Free => self.frees += 1,
            ObjectEventKind::ProgramStart { .. } | ObjectEventKind::ProgramEnd => {}
        }
        self.inner.object_event(e);
    }
    fn tick(&mut self, obs: &Observations<'_>) -> Plan {
        let plan = self.inner.tick(obs);
        self.object_moves += plan.objects.len() as u64;
        self.advice += plan.site_advice.len() as u64;
        for a in &plan.site_advice {
            match a.tier {
                Some(_) => {
                    self.advised.insert(a.site);
                }
                None => self.withdrawn += 1,
            }
        }
        // Demotions come before promotions (§3.4.4).
        let first_up = plan.objects.iter().position(|o| o.to == terrace_model::TierId::FAST);
        if let Some(i) = first_up {
            assert!(
                plan.objects[i..].iter().all(|o| o.to == terrace_model::TierId::FAST),
                "a demotion after a promotion"
            );
        }
        plan
    }
    fn applied(&mut self, a: &Applied) {
        self.inner.applied(a);
    }
}

fn run(spec: &str) -> (RunReport, Watched) {
    run_on("objects", spec)
}

fn run_on(workload: &str, spec: &str) -> (RunReport, Watched) {
    let mut p = Watched {
        inner: terrace_policy::build(spec).unwrap(),
        allocs: 0,
        frees: 0,
        object_moves: 0,
        advice: 0,
        advised: Default::default(),
        withdrawn: 0,
    };
    // At a sixteenth of its size: its full 2,048 rounds at every size keep the passes over memory.
    let source = terrace_workloads::build(workload, 1, 1.0 / 16.0).unwrap();
    let profile = Profile::load("optane-2019").unwrap();
    let opts = SimOptions { fast_capacity: Capacity::Percent(25.0), ..SimOptions::default() };
    let r = terrace_sim::simulate(source, &mut p, &profile, &opts).unwrap();
    (r, p)
}

#[test]
fn the_policy_sees_every_object_moves_whole_objects_and_advises_sites() {
    let (r, p) = run("objects");
    // Every event the machine replayed reached the policy.
    assert_eq!((p.allocs, p.frees), (r.objects.allocated, r.objects.freed), "{:?}", r.objects);
    assert!(p.allocs > 1000 && p.frees > 1000);
    assert!(p.object_moves > 0 && r.pages_migrated > 0, "{r:?}");
    assert!(p.advice > 0 && r.objects.bytes_placed_by_advice > 0, "{:?}", r.objects);
}

#[test]
fn without_proactive_placement_no_site_is_advised() {
    let (r, p) = run("objects-reactive");
    assert!(p.object_moves > 0);
    assert_eq!((p.advice, r.objects.bytes_placed_by_advice), (0, 0));
}

/// Site advice (§3.5, §5.4.1) names only sites of objects of a page or more (`objects`' small
/// objects, sites 16-23, have no site id), and a site whose live records are gone (all of
/// `objects-sites`' buffers of a site freed) has its advice withdrawn: it prefers fast memory
/// again, as a site does whose objects are not all slow.
#[test]
fn advice_is_for_sited_objects_and_is_withdrawn_with_its_evidence() {
    let (_, p) = run("objects");
    assert!(!p.advised.is_empty());
    assert!(p.advised.iter().all(|s| !(16..24).contains(s)), "{:?}", p.advised);
    let (r, p) = run_on("objects-sites", "objects");
    assert!(p.advised.len() > 50, "{} sites advised", p.advised.len());
    assert!(p.withdrawn > 0 && r.objects.bytes_placed_by_advice > 0, "{} withdrawn", p.withdrawn);
}
