//! `terrace advise`: which policy to run for a recorded program on a (measured) machine, and what
//! it would gain. It replays the recording under every placement policy of the registry, the
//! references and the offline ceiling on the simulated machine, as `compare` does, and reads the
//! table for the user: the fastest placement a live machine can run, its gain over first-touch
//! and over the runner-up, what it leaves to the ceiling, and the line that runs it.

use crate::compare::{self, Outputs, Row};
use crate::grid::{self, GridAxes};
use crate::run_spec::{parse_capacity, parse_size};
use anyhow::{bail, Result};
use clap::Args;
use terrace_policy::registry::Purpose;
use terrace_sim::{Profile, DEFAULT_PROFILE};

/// A gain smaller than this over first-touch is not worth a tiering daemon: a simulated replay of
/// a recording estimates run time from estimated access counts (docs/formats.md, "Recorded
/// traces"), and differences of a percent or two are within what that estimate can tell apart.
pub const WORTHWHILE_GAIN: f64 = 1.02;

/// all-fast's gain over first-touch below which a replay that advises running the program as it
/// is says that the advice rests on the recording's compute: every page in fast memory changes
/// under a tenth of the run. A choice, not a measurement.
const COMPUTE_BOUND: f64 = 1.10;

#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// The recording (`terrace record`), any trace file, or a built-in workload's name.
    pub trace: String,
    /// The machine: a profile `terrace profile measure` wrote, a built-in name (`terrace list
    /// profiles`) or any .toml profile.
    #[arg(long, default_value = DEFAULT_PROFILE)]
    pub profile: String,
    /// The fast memory the program gets: a share of its footprint ("25%") or a size ("8GiB").
    /// Default: the trace's suggested fast tier.
    #[arg(long, value_parser = capacity_arg, allow_hyphen_values = true)]
    pub fast_capacity: Option<String>,
    /// Slow-tier capacity as a size. Default: the profile's slow:fast ratio times the fast tier, and
    /// at least the footprint.
    #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
    pub slow_capacity: Option<u64>,
    #[command(flatten)]
    pub outputs: Outputs,
}

fn capacity_arg(s: &str) -> Result<String, String> {
    parse_capacity(s).map(|_| s.to_string())
}

/// What the table says to do.
#[derive(Debug, PartialEq)]
pub struct Advice {
    /// The placement to run (first-touch: run the program as it is).
    pub policy: String,
    pub speedup_over_first_touch: f64,
    /// The best placement of another policy (a preset of the recommended one does not count),
    /// and how much faster the recommended one is than it.
    pub runner_up: Option<(String, f64)>,
    /// How much longer the recommended run takes than the ceiling's.
    pub headroom_to_ceiling: Option<f64>,
    /// Every placement that gains [`WORTHWHILE_GAIN`] over first-touch, fastest first, with its
    /// speedup: where to look when this host cannot run the recommended one.
    pub gaining: Vec<(String, f64)>,
    /// all-fast's speedup over first-touch, with the share of first-touch's accesses that its
    /// slower tiers served: roughly what placement can gain on this replay (a split of a
    /// bandwidth-bound stream can beat all-fast, docs/model.md §3).
    pub all_fast: Option<(f64, f64)>,
}

pub fn advise(args: AdviseArgs) -> Result<()> {
    args.outputs.check()?;
    let profile = Profile::load(&args.profile)?;
    // Every policy a user could be told to run, and the references that frame them; the test
    // policies move pages to prove moves safe, not to gain.
    let mut policies: Vec<String> = Vec::new();
    let mut left_out = Vec::new();
    for p in terrace_policy::list().iter().filter(|p| p.purpose != Purpose::Test) {
        match terrace_policy::registry::max_tiers(p.name)? {
            Some(max) if max < profile.tiers.len() => left_out.push(p.name),
            _ => policies.push(p.name.to_string()),
        }
    }
    if !left_out.is_empty() {
        eprintln!(
            "terrace: note: {} manage two tiers and {} has {}: left out",
            left_out.join(", "),
            profile.name,
            profile.tiers.len()
        );
    }
    policies.push(terrace_ceiling::NAME.to_string());
    let axes = GridAxes {
        workloads: Some(vec![args.trace.clone()]),
        policies: Some(policies),
        sweep: None,
        profile: Some(vec![args.profile.clone()]),
        fast_capacity: args.fast_capacity.clone().map(|c| vec![c]),
        slow_capacity: args.slow_capacity.map(|b| b.to_string()),
        seed: None,
        size_scale: None,
    };
    let (grid, profiles) = grid::make_grid(axes)?;
    let mut results = compare::run_cells(&grid, &profiles, &[0])?;
    // A policy that cannot replay this trace is no advice, not a failure of the advice.
    let failures = std::mem::take(&mut results[0].failures);
    let o = &args.outputs;
    compare::present(&grid, &results, o.json.as_deref(), o.csv.as_deref(), o.plot.as_deref())?;
    for f in &failures {
        eprintln!("terrace: note: left out of the advice: {f}");
    }
    let rows = compare::rows(&grid, &results[0]);
    let Some(advice) = advice(&rows) else {
        bail!("no placement policy could replay {}; the notes above say why", args.trace);
    };
    println!();
    let info = grid.machine(grid.cell(0)).source(&args.trace)?.info().clone();
    print_advice(&advice, &rows[0], info.recording.as_ref());
    Ok(())
}

/// Reads a comparison's rows: the fastest placement (or first-touch, when none gains
/// [`WORTHWHILE_GAIN`] over it). `None` when first-touch did not run.
pub fn advice(rows: &[Row]) -> Option<Advice> {
    let placement = |r: &&Row| {
        terrace_policy::find(base_name(&r.report.policy)).is_some_and(|p| p.purpose == Purpose::Placement)
    };
    let first_touch = rows.iter().find(|r| r.report.policy == "first-touch")?;
    let mut ranked: Vec<&Row> = rows.iter().filter(placement).collect();
    ranked.sort_by(|a, b| a.report.runtime_ns.total_cmp(&b.report.runtime_ns));
    let best = ranked[0];
    let chosen = if first_touch.report.runtime_ns / best.report.runtime_ns < WORTHWHILE_GAIN {
        first_touch
    } else {
        best
    };
    let family = |r: &Row| {
        let name = base_name(&r.report.policy);
        terrace_policy::find(name).map_or(name.to_string(), |p| p.base().name.to_string())
    };
    let runner_up = ranked
        .iter()
        .find(|r| family(r) != family(chosen))
        .map(|r| (r.report.policy.clone(), r.report.runtime_ns / chosen.report.runtime_ns));
    let ceiling = rows.iter().find(|r| r.report.policy == terrace_ceiling::NAME);
    let speedup = |r: &Row| first_touch.report.runtime_ns / r.report.runtime_ns;
    let gaining = ranked
        .iter()
        .filter(|r| speedup(r) >= WORTHWHILE_GAIN)
        .map(|r| (r.report.policy.clone(), speedup(r)))
        .collect();
    let all_fast = rows.iter().find(|r| r.report.policy == "all-fast").map(|r| {
        let t = &first_touch.report.tiers;
        let all: u64 = t.iter().map(|t| t.reads + t.writes).sum();
        let slower: u64 = t.iter().skip(1).map(|t| t.reads + t.writes).sum();
        (speedup(r), slower as f64 / all.max(1) as f64)
    });
    Some(Advice {
        policy: chosen.report.policy.clone(),
        speedup_over_first_touch: first_touch.report.runtime_ns / chosen.report.runtime_ns,
        runner_up,
        headroom_to_ceiling: ceiling.map(|c| chosen.report.runtime_ns / c.report.runtime_ns - 1.0),
        gaining,
        all_fast,
    })
}

/// A spec's policy name (`hpwp:hot_threshold=8` -> `hpwp`).
fn base_name(spec: &str) -> &str {
    spec.split(':').next().unwrap_or(spec)
}

fn print_advice(a: &Advice, any_row: &Row, recording: Option<&terrace_workloads::RecordingInfo>) {
    let r = any_row.report;
    println!(
        "advice for {} on {} with {} of fast memory ({:.0}% of its {}):",
        r.workload,
        r.profile,
        terrace_sim::human_bytes(r.fast_capacity_bytes),
        100.0 * r.fast_share_of_footprint(),
        terrace_sim::human_bytes(r.footprint_bytes)
    );
    if a.policy == "first-touch" {
        println!(
            "  run it as it is (first-touch, the kernel's default): no policy is predicted to gain {:.0}% or more",
            100.0 * (WORTHWHILE_GAIN - 1.0)
        );
    } else {
        println!(
            "  recommended  {}: predicted {:.2}x over first-touch",
            a.policy, a.speedup_over_first_touch
        );
    }
    match &a.runner_up {
        Some((name, ratio)) if a.policy == "first-touch" => {
            println!("  best gain    {name}: {:.2}x over first-touch", 1.0 / ratio)
        }
        Some((name, ratio)) => println!("  runner-up    {name}: the recommended run is {ratio:.2}x as fast"),
        None => {}
    }
    match a.headroom_to_ceiling {
        Some(h) => println!(
            "  ceiling      {:+.0}% to {} (the best run the offline reference found; docs/model.md §12)",
            100.0 * h,
            terrace_ceiling::NAME
        ),
        None => println!("  ceiling      not run"),
    }
    // A recording without writes (DAMON alone) cannot show what the write-aware policies gain.
    if recording.is_some() && r.tiers.iter().all(|t| t.writes == 0) {
        println!(
            "  note         the recording tells no writes: write-aware policies (hpwp, ambix, ...) were judged on \
             reads alone; `terrace record --writes` adds them where the kernel has soft-dirty"
        );
    }
    // A recording without reads (soft-dirty or uffd-wp alone) leaves out what placement gains
    // most: in the model a write costs bandwidth only, never a read's latency (docs/model.md §3),
    // so such a replay rarely tells the tiers apart.
    if recording.is_some() && r.tiers.iter().all(|t| t.reads == 0) && r.tiers.iter().any(|t| t.writes > 0) {
        println!(
            "  note         the recording tells no reads (its tracker sees writes only): every policy was \
             judged on writes alone, which cost bandwidth, not latency, so the gains of placing read pages \
             are missing; record with a tracker that sees reads (damon, idle-page or sampler) where the \
             host has one"
        );
    }
    // Nothing gains because the replay is mostly the recording's compute, not because first-touch
    // already placed well: a tracker that counts touches (a scan's bit, DAMON's samples) counts at
    // least one touch of 64 accesses a page an interval or sample, a floor, so the advice is
    // weakest for a program that stalls on memory (docs/formats.md, "Recorded traces"). The
    // sampler counts accesses instead, and is left out.
    if let (Some(rec), Some((all_fast, slower))) = (recording, a.all_fast) {
        if a.policy == "first-touch" && all_fast < COMPUTE_BOUND && slower > 0.0 && rec.tracker != "sampler" {
            println!(
                "  note         even all-fast is predicted only {all_fast:.2}x over first-touch, whose slower \
                 tiers serve {:.0}% of the accesses: most of the replay's time is the recording's own (its \
                 compute), since {} counts at least one touch (64 accesses) a page an interval or sample \
                 and no more; a program that stalls on memory more than that gains more than predicted",
                100.0 * slower,
                rec.tracker
            );
        }
    }
    let command = recording.and_then(|r| r.command.clone()).unwrap_or_else(|| "PROGRAM ARGS".to_string());
    if a.policy == "first-touch" {
        return;
    }
    println!("  run it       terrace run --policy {} -- {command}", a.policy);
    println!("  or, for the daemon's config: [daemon] policy = \"{}\", then `terrace bind PID`", a.policy);
    match this_host_runs(&a.policy) {
        Ok(()) => println!("  this host    has what it needs to run it (`terrace doctor` lists what it has)"),
        Err(why) => {
            println!("  this host    cannot run it: {why}");
            match a.gaining.iter().skip(1).find(|(p, _)| this_host_runs(p).is_ok()) {
                Some((p, s)) => println!(
                    "  here         the fastest this host can run: {p}, predicted {s:.2}x over first-touch"
                ),
                None => println!(
                    "  here         no policy that gains runs on this host: run the program as it is"
                ),
            }
        }
    }
}

/// Whether this host's kernel gives the policy what it requires (trackers, mechanisms), as
/// `terrace run` would check before starting the program; the advice may be for another machine,
/// so this is said, not enforced.
#[cfg(all(feature = "live", target_os = "linux"))]
fn this_host_runs(spec: &str) -> Result<(), String> {
    use terrace_linux::machine::{live_requirements, Attach};
    let config = terrace_linux::config::Config::default();
    let policy = terrace_policy::build(spec).map_err(|e| e.to_string())?;
    // The dry run's tiers: a host of one node has a stand-in slow tier, enough to check trackers.
    let (tiers, _) = terrace_linux::daemon::dry_run_tiers(&config).map_err(|e| e.to_string())?;
    live_requirements(policy.as_ref(), &tiers, Attach::Start, config.trackers.sampling)
        .map(|_| ())
        .map_err(|e| crate::error_line(&anyhow::Error::new(e)))
}

#[cfg(not(all(feature = "live", target_os = "linux")))]
fn this_host_runs(_: &str) -> Result<(), String> {
    Err("this terrace was built without the live machine; `terrace doctor` on the machine that will run it says".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_its_policy() {
        assert_eq!(base_name("hpwp:hot_threshold=8"), "hpwp");
        assert_eq!(base_name("nimble-thp"), "nimble-thp");
    }
}
