//! Object tiering's several programs by priority (§5.5, Fig. 8) on the simulated machine:
//! `objects-pair`, a low-priority program from the start and a high-priority one that starts
//! later and fits the fast tier. With priorities the high-priority program holds the fast tier
//! while it runs, and runs within half again its time bound to DRAM (what it loses is its pages
//! first touched in the slow tier while the demotions hold the fast tier's room, which wait for
//! the next enforcement: docs/policies.md, "Reproducing Fig. 8"); without (MD Default) both
//! programs' objects compete, and it runs several times longer.

use terrace_sim::{Profile, SimOptions};

fn programs(policy: &str) -> Vec<terrace_sim::corun::ProgramRun> {
    let source = terrace_workloads::build("objects-pair", 1, 1.0 / 32.0).unwrap();
    let mut p = terrace_policy::build(policy).unwrap();
    let profile = Profile::load("optane-2019").unwrap();
    let r = terrace_sim::simulate(source, p.as_mut(), &profile, &SimOptions::default()).unwrap();
    assert_eq!(r.programs.len(), 2);
    assert!(r.programs[1].priority > r.programs[0].priority);
    r.programs
}

#[test]
fn priorities_keep_the_fast_tier_for_the_high_priority_program() {
    let bound = programs("bind-priority")[1].runtime_ns();
    let with = programs("objects")[1].runtime_ns();
    let without = programs("objects:priorities=false")[1].runtime_ns();
    assert!(with < 1.5 * bound, "with priorities {with} ns, bound to DRAM {bound} ns");
    assert!(without > 2.0 * with, "without priorities {without} ns, with {with} ns");
}
