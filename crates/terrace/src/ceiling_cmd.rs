//! `terrace bench ceiling`: what the offline reference `optimal` costs, and (with --exhaustive)
//! the check that it is a ceiling on every built-in workload, profile and fast-tier size.

use anyhow::Result;
use rayon::prelude::*;
use std::time::Instant;
use terrace_sim::{Profile, SimOptions};

/// Each default-suite workload once under first-touch (one core) and once as `optimal` (its
/// candidates on every core after the first, `terrace_ceiling::optimal`), at the workload's
/// suggested fast tier: optimal's wall-clock time and its CPU time (all its threads), each over
/// first-touch's; with the speedup of optimal over first-touch and its run time over its lower
/// bound (the most it can be from the optimum).
pub fn cost(profile: &str, size_scale: f64) -> Result<()> {
    let profile = Profile::load(profile)?;
    let cores = rayon::current_num_threads();
    println!(
        "first-touch on one core, optimal on {cores} core{}; profile {}; size scale {size_scale}; the seeds' fast tiers",
        if cores == 1 { "" } else { "s" },
        profile.name
    );
    println!(
        "{:<16} {:>14} {:>11} {:>11} {:>10} {:>9}  {:>9}  {:>11}  chosen",
        "workload", "first-touch s", "optimal s", "its CPU s", "cost", "CPU cost", "speedup", "over bound"
    );
    let cpu = || crate::process_cpu::own_cpu_seconds().unwrap_or(f64::NAN);
    let (mut first_touch_s, mut optimal_s, mut optimal_cpu_s) = (0.0, 0.0, 0.0);
    let (mut runs, mut complete, mut bounded) = (0, 0, 0);
    for workload in terrace_workloads::DEFAULT_SUITE {
        terrace_workloads::build(workload, 1, size_scale)?;
        let source = || terrace_workloads::build(workload, 1, size_scale).expect("built above");
        let started = Instant::now();
        let mut ft = terrace_policy::build("first-touch")?;
        let baseline = terrace_sim::simulate(source(), ft.as_mut(), &profile, &SimOptions::default())?;
        let ft_s = started.elapsed().as_secs_f64();
        let (started, cpu_before) = (Instant::now(), cpu());
        let ceiling = terrace_ceiling::optimal(&source, &profile, &SimOptions::default())?;
        let (opt_s, opt_cpu) = (started.elapsed().as_secs_f64(), cpu() - cpu_before);
        println!(
            "{workload:<16} {ft_s:>14.3} {opt_s:>11.3} {opt_cpu:>11.3} {:>9.1}x {:>8.1}x  {:>8.2}x  {:>10.2}x  {}",
            opt_s / ft_s,
            opt_cpu / ft_s,
            baseline.runtime_ns / ceiling.report.runtime_ns,
            ceiling.report.runtime_ns / ceiling.lower_bound_ns,
            ceiling.chosen
        );
        runs += ceiling.candidates.len();
        complete += ceiling.candidates.iter().filter(|c| c.runtime_ns.is_some()).count();
        bounded += ceiling.candidates.iter().filter(|c| c.bounded).count();
        first_touch_s += ft_s;
        optimal_s += opt_s;
        optimal_cpu_s += opt_cpu;
    }
    println!(
        "the suite: optimal costs {:.1}x first-touch in wall-clock time on {cores} core{} and {:.1}x in CPU time (a \
         counting pass and {runs} candidates: {complete} run to the end, {} stopped once they could not win, \
         {bounded} not run since their floor showed they could not; the goal is 5x)",
        optimal_s / first_touch_s,
        if cores == 1 { "" } else { "s" },
        optimal_cpu_s / first_touch_s,
        runs - complete - bounded
    );
    Ok(())
}

/// The fast-tier sizes of the exhaustive check: 5% to 100% in 5% steps.
const EVERY_SIZE: [f64; 20] =
    [5., 10., 15., 20., 25., 30., 35., 40., 45., 50., 55., 60., 65., 70., 75., 80., 85., 90., 95., 100.];

/// `terrace_ceiling::check::failures` on every built-in workload (or those of `only`) and
/// profile (or those of `only_profiles`) at every size.
pub fn exhaustive(size_scale: f64, only: &[String], only_profiles: &[String]) -> Result<()> {
    let built_in = terrace_sim::profile::BUILT_IN;
    if let Some(p) = only_profiles.iter().find(|p| !built_in.iter().any(|(n, _)| n == p)) {
        anyhow::bail!("--profiles: '{p}' is no built-in profile; `terrace list profiles` names them");
    }
    let profiles: Vec<Profile> = built_in
        .iter()
        .filter(|(name, _)| only_profiles.is_empty() || only_profiles.iter().any(|p| p == name))
        .map(|(name, _)| Profile::load(name))
        .collect::<Result<_, _>>()?;
    let known = terrace_workloads::list();
    if let Some(w) = only.iter().find(|w| !known.iter().any(|k| k.name == w.as_str())) {
        anyhow::bail!("--workloads: '{w}' is no built-in workload; `terrace list workloads` names them");
    }
    let workloads: Vec<_> =
        known.into_iter().filter(|k| only.is_empty() || only.iter().any(|w| w == k.name)).collect();
    let cells: Vec<(&str, &Profile)> =
        workloads.iter().flat_map(|w| profiles.iter().map(move |p| (w.name, p))).collect();
    let started = Instant::now();
    // Each cell's outcome as it completes, so that a run cut short still says what it checked.
    let failures: Vec<String> = cells
        .par_iter()
        .with_max_len(1)
        .flat_map_iter(|&(w, p)| {
            let f = terrace_ceiling::check::failures(w, size_scale, p, &EVERY_SIZE);
            let outcome = if f.is_empty() { "ok".to_string() } else { f.join("\n  ") };
            println!("{w} on {}: {outcome}", p.name);
            f
        })
        .collect();
    println!(
        "{} workloads x {} profiles x {} sizes at size scale {size_scale}: {} failures ({:.0} s)",
        workloads.len(),
        profiles.len(),
        EVERY_SIZE.len(),
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        anyhow::bail!("optimal is not a ceiling in {} cases (above)", failures.len());
    }
    Ok(())
}
