//! `terrace compare`: every workload under every policy, run in parallel, one row per pair.

use crate::run_spec::{run_one, MachineArgs};
use crate::table;
use anyhow::{bail, Context, Result};
use clap::Args;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use terrace_sim::{Profile, RunReport};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Workloads (names or trace files), comma-separated. Default: the built-in suite.
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Policies, comma-separated, each a name or `NAME:key=value,...`: an item `key=value` after a
    /// spec with parameters is another of its parameters (`hpwp:hot_threshold=8,hpw_writes=2,hemem`
    /// is two policies). Default: the default comparison (or, with --sweep, none). first-touch
    /// always runs, as the reference.
    #[arg(long)]
    pub policies: Vec<String>,
    /// POLICY.KEY=V1,V2,...: also run POLICY:KEY=V1, POLICY:KEY=V2, ... on every workload
    /// (`hpwp.hot_threshold=2,4,8`). Repeatable.
    #[arg(long, value_name = "POLICY.KEY=VALUES")]
    pub sweep: Vec<String>,
    #[command(flatten)]
    pub machine: MachineArgs,
    /// Also write every report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the table as CSV (raw numbers, SI units).
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

/// One row of the comparison, as JSON and CSV carry it.
#[derive(Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    report: &'a RunReport,
    speedup_over_first_touch: Option<f64>,
    speedup_over_all_fast: Option<f64>,
    fast_read_hit_rate: f64,
    fast_write_hit_rate: f64,
    slow_bytes_written: u64,
    fast_share_of_footprint: f64,
}

#[derive(Serialize)]
struct CsvRow<'a> {
    workload: &'a str,
    policy: &'a str,
    profile: &'a str,
    footprint_bytes: u64,
    fast_capacity_bytes: u64,
    fast_share_of_footprint: f64,
    runtime_s: f64,
    speedup_over_first_touch: Option<f64>,
    speedup_over_all_fast: Option<f64>,
    fast_read_hit_rate: f64,
    fast_write_hit_rate: f64,
    slow_bytes_written: u64,
    bytes_migrated: u64,
    pages_migrated: u64,
    pages_not_done: u64,
    pages_switched: u64,
    shadow_peak_bytes: u64,
    tlb_shootdowns: u64,
    migration_s: f64,
    move_wait_s: f64,
    tracking_s: f64,
    energy_j: f64,
}

pub fn compare(args: CompareArgs) -> Result<()> {
    let workloads: Vec<String> = if args.workloads.is_empty() {
        terrace_workloads::DEFAULT_SUITE.iter().map(|s| s.to_string()).collect()
    } else {
        args.workloads.clone()
    };
    let profile = args.machine.profile()?;
    let policies = policies(&args, &profile)?;
    let pairs: Vec<(String, String)> =
        workloads.iter().flat_map(|w| policies.iter().map(move |p| (w.clone(), p.clone()))).collect();
    let results = run_pairs(&args.machine, &profile, &pairs)?;
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(r) => reports.push(r),
            Err(e) => failures.push(crate::error_line(&e)),
        }
    }
    let reference =
        |w: &str, p: &str| reports.iter().find(|r| r.workload == w && r.policy == p).map(|r| r.runtime_ns);
    let rows: Vec<Row> = reports
        .iter()
        .map(|r| Row {
            report: r,
            speedup_over_first_touch: reference(&r.workload, "first-touch").map(|t| t / r.runtime_ns),
            speedup_over_all_fast: reference(&r.workload, "all-fast").map(|t| t / r.runtime_ns),
            fast_read_hit_rate: r.fast_read_hit_rate(),
            fast_write_hit_rate: r.fast_write_hit_rate(),
            slow_bytes_written: r.slow_bytes_written(),
            fast_share_of_footprint: r.fast_share_of_footprint(),
        })
        .collect();
    println!("profile {}; fast tier {}", profile.name, describe_capacity(&args.machine));
    table::print_table(
        &rows.iter().map(|r| table::row(r.report, r.speedup_over_first_touch)).collect::<Vec<_>>(),
    );
    if let Some(path) = &args.json {
        crate::write_json(path, &rows)?;
    }
    if let Some(path) = &args.csv {
        let cannot = || format!("cannot write {}", path.display());
        let mut w = csv::Writer::from_path(path).with_context(cannot)?;
        for r in &rows {
            w.serialize(CsvRow {
                workload: &r.report.workload,
                policy: &r.report.policy,
                profile: &r.report.profile,
                footprint_bytes: r.report.footprint_bytes,
                fast_capacity_bytes: r.report.fast_capacity_bytes,
                fast_share_of_footprint: r.fast_share_of_footprint,
                runtime_s: r.report.runtime_ns / 1e9,
                speedup_over_first_touch: r.speedup_over_first_touch,
                speedup_over_all_fast: r.speedup_over_all_fast,
                fast_read_hit_rate: r.fast_read_hit_rate,
                fast_write_hit_rate: r.fast_write_hit_rate,
                slow_bytes_written: r.slow_bytes_written,
                bytes_migrated: r.report.bytes_migrated,
                pages_migrated: r.report.pages_migrated,
                pages_not_done: r.report.pages_not_done,
                pages_switched: r.report.pages_switched,
                shadow_peak_bytes: r.report.shadow_peak_bytes,
                tlb_shootdowns: r.report.tlb_shootdowns,
                migration_s: r.report.migration_ns / 1e9,
                move_wait_s: r.report.move_wait_ns / 1e9,
                tracking_s: r.report.tracking_ns / 1e9,
                energy_j: r.report.energy_j,
            })
            .with_context(cannot)?;
        }
        w.flush().with_context(cannot)?;
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("terrace: {f}");
        }
        bail!("{} of {} runs failed (above)", failures.len(), pairs.len());
    }
    args.machine.note_oversized_fast_tier();
    Ok(())
}

/// Runs every (workload, policy) pair in parallel (rayon, one pair per task, the pairs of most
/// accesses first so that a long run does not start last), under one progress bar over all their
/// accesses. The results are in the order of `pairs`. Fails before running anything if a workload
/// cannot be built.
pub fn run_pairs(
    machine: &MachineArgs,
    profile: &Profile,
    pairs: &[(String, String)],
) -> Result<Vec<Result<RunReport>>> {
    let mut accesses: HashMap<&str, u64> = HashMap::new();
    for (w, _) in pairs {
        if !accesses.contains_key(w.as_str()) {
            accesses.insert(w, machine.source(w)?.info().accesses);
        }
    }
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(accesses[pairs[i].0.as_str()]));
    let total = pairs.iter().fold(0u64, |t, (w, _)| t.saturating_add(accesses[w.as_str()]));
    let done: Vec<(usize, Result<RunReport>)> = table::with_progress(total, |progress| {
        order
            .par_iter()
            .with_max_len(1)
            .map(|&i| {
                let (w, p) = &pairs[i];
                if p == terrace_ceiling::NAME {
                    return (i, run_optimal(machine, profile, w, Some(progress.clone())));
                }
                (i, run_one(machine, profile, w, p, Some(progress.clone())))
            })
            .collect()
    });
    let mut results: Vec<Option<Result<RunReport>>> = (0..pairs.len()).map(|_| None).collect();
    for (i, r) in done {
        results[i] = Some(r);
    }
    Ok(results.into_iter().map(|r| r.expect("every pair ran")).collect())
}

/// The offline reference `optimal` on one workload (terrace-ceiling): the best of its family's
/// runs, and a line saying which candidate that is.
fn run_optimal(
    machine: &MachineArgs,
    profile: &Profile,
    workload: &str,
    progress: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
) -> Result<RunReport> {
    machine.source(workload)?;
    let source = || machine.source(workload).expect("it was built a moment ago");
    let ceiling = terrace_ceiling::optimal(&source, profile, &machine.options(progress))
        .with_context(|| format!("{workload} under {}", terrace_ceiling::NAME))?;
    eprintln!(
        "terrace: note: {} on {workload} is the run of {}; no placement runs in under {:.3} ms ({:.2}x less)",
        terrace_ceiling::NAME,
        ceiling.chosen,
        ceiling.lower_bound_ns / 1e6,
        ceiling.report.runtime_ns / ceiling.lower_bound_ns
    );
    Ok(ceiling.report)
}

/// The policy specs to run: those named (or the default comparison, unless only a sweep is
/// asked for), then each sweep's, first-touch first if it is not among them, each checked, and
/// each policy once (two specs that build the same policy, as `ambix-noswitch` and
/// `ambix:switch=false` do, run once).
///
/// On a profile of more tiers than a policy of the default comparison manages (the seeds' are
/// written for two), the default leaves it out and says so; a policy named is run, and refused
/// with its reason.
fn policies(args: &CompareArgs, profile: &terrace_sim::Profile) -> Result<Vec<String>> {
    let mut specs: Vec<String> = args.policies.iter().flat_map(|p| terrace_policy::split_list(p)).collect();
    if specs.is_empty() && !args.policies.is_empty() {
        bail!("--policies names no policy; give NAME,NAME,... (`terrace list policies`)");
    }
    if specs.is_empty() && args.sweep.is_empty() {
        let tiers = profile.tiers.len();
        let (runs, fewer): (Vec<&str>, Vec<&str>) =
            terrace_policy::registry::DEFAULT_COMPARISON.iter().partition(|name| manages(name, profile));
        if !fewer.is_empty() {
            eprintln!(
                "terrace: note: {} manage two tiers and {} has {tiers}, so the default comparison leaves \
                 them out (name one with --policies to see why it is refused)",
                fewer.join(", "),
                profile.name
            );
        }
        specs = runs.iter().map(|s| s.to_string()).collect();
    }
    for s in &args.sweep {
        specs.extend(terrace_policy::sweep(s)?);
    }
    let mut names = Vec::new();
    let mut kept = Vec::new();
    // Check every spec before starting anything long.
    for spec in specs {
        // The offline reference is no registry policy: it runs a family of them (terrace-ceiling).
        let name =
            if spec == terrace_ceiling::NAME { spec.clone() } else { terrace_policy::canonical(&spec)? };
        if !names.contains(&name) {
            names.push(name);
            kept.push(spec);
        }
    }
    if !names.iter().any(|n| n == "first-touch") {
        kept.insert(0, "first-touch".into());
    }
    Ok(kept)
}

/// Whether the policy `spec` manages as many tiers as `profile` has (its `max_tiers`).
fn manages(spec: &str, profile: &terrace_sim::Profile) -> bool {
    terrace_policy::registry::max_tiers(spec).ok().flatten().is_none_or(|m| m >= profile.tiers.len())
}

fn describe_capacity(m: &MachineArgs) -> String {
    match m.fast_capacity {
        None => "as each workload's seed experiment, scaled like the workload (column 'fast tier': size and share of the footprint)".into(),
        Some(terrace_sim::Capacity::Percent(p)) => format!("{p}% of each footprint"),
        Some(terrace_sim::Capacity::Bytes(b)) => terrace_sim::human_bytes(b),
        Some(terrace_sim::Capacity::Suggested) => "suggested".into(),
    }
}
