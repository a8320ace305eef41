//! The check that `optimal` is a ceiling, shared by the test (a grid that runs in about a
//! minute) and `terrace bench ceiling --exhaustive` (every workload, profile and size).

use crate::{optimal_sweep, SourceFactory, Static, RATIOS};
use rayon::prelude::*;
use terrace_model::{InitialPlacement, MachineInfo, MemoryMode, Policy, TierId};
use terrace_sim::{Capacity, Profile, SimError, SimOptions};

/// The static placements the project can express, as policies: first-touch, all-slow and
/// interleave at each of [`RATIOS`], built here apart from the family (the static split by total
/// future accesses is the family's own).
pub fn statics(tiers: usize) -> Vec<Box<dyn Policy>> {
    let mut v: Vec<Box<dyn Policy>> = vec![
        terrace_policy::build("first-touch").expect("registered"),
        Box::new(Static::new("all-slow", InitialPlacement::Tier(TierId((tiers - 1) as u8)))),
    ];
    for k in RATIOS {
        let mut weights = vec![1; tiers];
        weights[0] = k;
        v.push(Box::new(Static::new(format!("interleave {k}:1"), InitialPlacement::Interleave { weights })));
    }
    v
}

/// Whether a policy places pages on the machine of the given fast tier at all: all-fast's
/// unbounded fast tier ignores it by definition (it is the bound, not a placement there).
fn bounded(p: &dyn Policy, tiers: usize) -> bool {
    p.requirements(&MachineInfo::placeholder(tiers)).memory_mode != MemoryMode::UnboundedFast
}

/// What is wrong with `optimal` on one workload and profile over `percents` (increasing): each
/// size where its run time rises, each static placement or registry policy that is faster, and
/// each run (all-fast's included) below its lower bound. Empty when it is a ceiling there.
pub fn failures(workload: &str, scale: f64, profile: &Profile, percents: &[f64]) -> Vec<String> {
    let source = || terrace_workloads::build(workload, 1, scale).expect("a built-in workload builds");
    failures_of(workload, &source, profile, percents)
}

/// [`failures`] on the stream `source` makes (a trace file's, a recording's), named `workload` in
/// the messages.
pub fn failures_of(
    workload: &str,
    source: SourceFactory<'_>,
    profile: &Profile,
    percents: &[f64],
) -> Vec<String> {
    let capacities: Vec<Capacity> = percents.iter().map(|&p| Capacity::Percent(p)).collect();
    let sweep = match optimal_sweep(source, profile, &capacities, &SimOptions::default()) {
        Ok(s) => s,
        Err(e) => return vec![format!("{workload} on {}: optimal failed: {e}", profile.name)],
    };
    let mut failures = Vec::new();
    for i in 1..sweep.len() {
        if sweep[i].report.runtime_ns > sweep[i - 1].report.runtime_ns {
            failures.push(format!(
                "{workload} on {}: optimal rises from {}% to {}%",
                profile.name,
                percents[i - 1],
                percents[i]
            ));
        }
    }
    let tiers = profile.tiers.len();
    let mut runs: Vec<(usize, Box<dyn Policy>)> = Vec::new();
    for i in 0..percents.len() {
        runs.extend(statics(tiers).into_iter().map(|p| (i, p)));
        // all-fast too: no run, on any machine, may beat the lower bound.
        runs.extend(
            terrace_policy::registry::list()
                .iter()
                .map(|spec| (i, terrace_policy::build(spec.name).expect("registered"))),
        );
    }
    let beaten: Vec<String> = runs
        .into_par_iter()
        .with_max_len(1)
        .filter_map(|(i, mut p)| {
            let opts = SimOptions { fast_capacity: capacities[i], ..SimOptions::default() };
            let run = match terrace_sim::simulate(source(), p.as_mut(), profile, &opts) {
                Ok(r) => r,
                // A two-tier policy on three tiers is refused: it is no competitor there.
                Err(SimError::Unsupported(_)) => return None,
                Err(e) => return Some(format!("{workload} under {} on {}: {e}", p.name(), profile.name)),
            };
            let ceiling = &sweep[i];
            let competes = bounded(p.as_ref(), tiers);
            if run.runtime_ns < ceiling.lower_bound_ns {
                return Some(format!(
                    "{workload} on {} at {}%: {} takes {:.4} ms, below the lower bound {:.4} ms",
                    profile.name,
                    percents[i],
                    p.name(),
                    run.runtime_ns / 1e6,
                    ceiling.lower_bound_ns / 1e6
                ));
            }
            (competes && run.runtime_ns < ceiling.report.runtime_ns).then(|| {
                format!(
                    "{workload} on {} at {}%: {} takes {:.4} ms, optimal ({}) {:.4} ms",
                    profile.name,
                    percents[i],
                    p.name(),
                    run.runtime_ns / 1e6,
                    ceiling.chosen,
                    ceiling.report.runtime_ns / 1e6
                )
            })
        })
        .collect();
    failures.extend(beaten);
    failures
}
