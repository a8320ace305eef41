//! `terrace compare`: every workload under every policy, run in parallel, one row per pair; on a
//! grid of machines (profiles, fast-tier sizes, seeds), one table per machine, all or one shard
//! of it (grid.rs).

use crate::grid::{self, Grid, GridAxes, MergeArgs, Shard};
use crate::run_spec::{parse_capacity, parse_seed, parse_size, run_one, MachineArgs};
use crate::table;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use terrace_sim::{Profile, RunReport, DEFAULT_PROFILE};

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(subcommand)]
    pub command: Option<CompareCommand>,
    /// Workloads (names or trace files), comma-separated; a name may carry parameters, split as
    /// --policies splits them (`npb-bt-large:iterations=32`, `objects:instructions=41,run=64,bfs-small`
    /// is two workloads). Default: the built-in suite.
    #[arg(long)]
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
    /// Machine profiles, comma-separated: each a built-in name (`terrace list profiles`) or a
    /// .toml file. Several make a grid: every workload and policy on each.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_PROFILE)]
    pub profile: Vec<String>,
    /// Fast-tier capacities, comma-separated: each a share of the footprint ("40%") or a size
    /// ("48MiB", "1GiB", "65536"). Several make a grid. Default: the seed experiment's DRAM,
    /// scaled like the workload.
    #[arg(long, value_delimiter = ',', value_parser = capacity_arg, allow_hyphen_values = true)]
    pub fast_capacity: Vec<String>,
    /// Slow-tier capacity as a size. Default: the profile's slow:fast ratio times the fast tier, and
    /// at least the footprint.
    #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
    pub slow_capacity: Option<u64>,
    /// Seeds of the workload generators, comma-separated. Several make a grid.
    #[arg(long, value_delimiter = ',', default_value = "1", value_parser = parse_seed, allow_hyphen_values = true)]
    pub seed: Vec<u64>,
    /// Multiplies workload sizes and lengths (1 = the built-in size; 0.0625 for a quick look).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub size_scale: f64,
    /// Read the grid's axes from a TOML file, a key per flag above (docs/grids.md), instead of
    /// from those flags.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["workloads", "policies", "sweep", "profile", "fast_capacity", "slow_capacity", "seed", "size_scale"]
    )]
    pub grid: Option<PathBuf>,
    /// Run only shard I of N (counting from 0): the grid's cells (a workload on one profile,
    /// fast-tier size and seed, under every policy) are dealt round the shards in order. Needs
    /// --json, which then writes the shard's file for `terrace compare merge`.
    #[arg(long, value_name = "I/N", value_parser = grid::parse_shard)]
    pub shard: Option<Shard>,
    #[command(flatten)]
    pub outputs: Outputs,
}

/// Where a comparison goes besides the terminal, for `compare` and `compare merge` alike (a
/// merge writes what the one-machine run does).
#[derive(Args, Debug, Default)]
pub struct Outputs {
    /// Also write every report as JSON (with --shard: the shard's file).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the table as CSV (raw numbers, SI units).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Also draw each policy's speedup over first-touch, a group of bars per workload, the
    /// ceiling marked across each group: FILE.svg or FILE.png (one machine's comparison).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// The file name that means standard output for --json and --csv: the table then goes to
/// standard error, so that standard output holds only the machine-readable copy.
const STDOUT: &str = "-";

fn is_stdout(path: Option<&Path>) -> bool {
    path == Some(Path::new(STDOUT))
}

impl Outputs {
    /// Refuses, before any run, outputs that cannot all be written: a plot of an unknown kind,
    /// or JSON and CSV both on standard output.
    pub fn check(&self) -> Result<()> {
        crate::plots::check(self.plot.as_deref())?;
        if is_stdout(self.json.as_deref()) && is_stdout(self.csv.as_deref()) {
            bail!("--json - and --csv - would both go to standard output: give one of them a file name");
        }
        Ok(())
    }
}

#[derive(Subcommand, Debug)]
pub enum CompareCommand {
    /// Join the files of a grid's shards (`compare --shard I/N --json FILE`) into the table, JSON
    /// and CSV one machine running the whole grid prints and writes.
    Merge(MergeArgs),
}

/// Checks a fast-tier capacity and keeps it as given, as a grid records it.
fn capacity_arg(s: &str) -> Result<String, String> {
    parse_capacity(s).map(|_| s.to_string())
}

/// One row of the comparison, as JSON and CSV carry it.
#[derive(Serialize)]
pub struct Row<'a> {
    #[serde(flatten)]
    pub(crate) report: &'a RunReport,
    pub(crate) speedup_over_first_touch: Option<f64>,
    speedup_over_all_fast: Option<f64>,
    /// How much longer than the offline ceiling's run (`optimal`) this run took, as a share of
    /// it: what the policy leaves on the table. `None` when the ceiling did not run.
    pub(crate) headroom_to_ceiling: Option<f64>,
    fast_read_hit_rate: f64,
    fast_write_hit_rate: f64,
    slow_bytes_written: u64,
    fast_share_of_footprint: f64,
    /// The workload generators' seed (the report does not carry it, and a grid may have several).
    seed: u64,
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
    headroom_to_ceiling: Option<f64>,
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
    seed: u64,
}

/// What one cell of a grid came to: the reports of its runs that succeeded, in the order of its
/// profile's policies, and the error lines of those that failed.
pub struct CellResult {
    pub cell: usize,
    pub reports: Vec<RunReport>,
    pub failures: Vec<String>,
}

pub fn compare(args: CompareArgs) -> Result<()> {
    if let Some(CompareCommand::Merge(merge)) = args.command {
        return grid::merge(merge);
    }
    if args.shard.is_some() && (args.outputs.json.is_none() || is_stdout(args.outputs.json.as_deref())) {
        bail!("--shard needs --json FILE, the shard's file that `terrace compare merge` joins");
    }
    let axes = match &args.grid {
        Some(path) => GridAxes::read(path)?,
        None => axes_of_flags(&args),
    };
    args.outputs.check()?;
    let (grid, profiles) = grid::make_grid(axes)?;
    if args.outputs.plot.is_some() {
        if args.shard.is_some() {
            bail!("--plot draws the whole grid's comparison: plot the merged shards (`terrace compare merge SHARD.json... --plot FILE`)");
        }
        grid::check_plottable(&grid)?;
    }
    let cells: Vec<usize> =
        (0..grid.cell_count()).filter(|&k| args.shard.is_none_or(|s| s.owns(k))).collect();
    if let Some(shard) = args.shard {
        let runs: usize = cells.iter().map(|&k| grid.runs_in(grid.cell(k))).sum();
        eprintln!(
            "terrace: shard {shard}: {} of the grid's {} cells, {runs} runs",
            cells.len(),
            grid.cell_count()
        );
    }
    let results = run_cells(&grid, &profiles, &cells)?;
    let json = match (args.shard, &args.outputs.json) {
        (Some(shard), Some(path)) => {
            grid::write_shard(path, &grid, shard, &results)?;
            None
        }
        (_, json) => json.as_deref(),
    };
    let o = &args.outputs;
    present(&grid, &results, json, o.csv.as_deref(), o.plot.as_deref())?;
    for f in 0..grid.fast_capacity.len() {
        grid.machine(grid::Cell { profile: 0, fast: f, seed: 0, workload: 0 }).note_oversized_fast_tier();
    }
    Ok(())
}

/// The grid the flags give (without --grid); a flag left out is left out of the axes too, so
/// that flags and a grid file take the same defaults.
fn axes_of_flags(args: &CompareArgs) -> GridAxes {
    GridAxes {
        workloads: (!args.workloads.is_empty())
            .then(|| args.workloads.iter().flat_map(|w| terrace_policy::split_list(w)).collect()),
        policies: Some(args.policies.clone()),
        sweep: Some(args.sweep.clone()),
        profile: Some(args.profile.clone()),
        fast_capacity: (!args.fast_capacity.is_empty()).then(|| args.fast_capacity.clone()),
        slow_capacity: args.slow_capacity.map(|bytes| bytes.to_string()),
        seed: Some(args.seed.clone()),
        size_scale: Some(args.size_scale),
    }
}

/// Runs the grid's cells `cells` (in grid order), every run of them in parallel at once.
pub(crate) fn run_cells(grid: &Grid, profiles: &[Profile], cells: &[usize]) -> Result<Vec<CellResult>> {
    // One machine per table (profile, fast-tier size, seed); a group's first cell is workload 0.
    let machines: Vec<MachineArgs> =
        (0..grid.group_count()).map(|g| grid.machine(grid.cell(g * grid.workloads.len()))).collect();
    let mut runs = Vec::new();
    for &k in cells {
        let cell = grid.cell(k);
        for policy in &grid.profiles[cell.profile].policies {
            runs.push(Run {
                machine: &machines[grid.group(cell)],
                profile: &profiles[cell.profile],
                workload: &grid.workloads[cell.workload],
                policy,
            });
        }
    }
    let mut done = run_all(&runs)?.into_iter();
    Ok(cells
        .iter()
        .map(|&k| {
            let mut result = CellResult { cell: k, reports: Vec::new(), failures: Vec::new() };
            for r in done.by_ref().take(grid.runs_in(grid.cell(k))) {
                match r {
                    Ok(r) => result.reports.push(r),
                    Err(e) => result.failures.push(crate::error_line(&e)),
                }
            }
            result
        })
        .collect())
}

/// A cell's rows: its reports with their speedups over the cell's own first-touch and all-fast.
pub fn rows<'a>(grid: &Grid, result: &'a CellResult) -> Vec<Row<'a>> {
    let seed = grid.seed[grid.cell(result.cell).seed];
    let reference = |p: &str| result.reports.iter().find(|r| r.policy == p).map(|r| r.runtime_ns);
    result
        .reports
        .iter()
        .map(|r| Row {
            report: r,
            speedup_over_first_touch: reference("first-touch").map(|t| t / r.runtime_ns),
            speedup_over_all_fast: reference("all-fast").map(|t| t / r.runtime_ns),
            // Negative only where a policy beat the ceiling, which its test says never happens on
            // the built-in workloads; shown as it is, not hidden, if a trace makes it happen.
            headroom_to_ceiling: reference(terrace_ceiling::NAME).map(|t| r.runtime_ns / t - 1.0),
            fast_read_hit_rate: r.fast_read_hit_rate(),
            fast_write_hit_rate: r.fast_write_hit_rate(),
            slow_bytes_written: r.slow_bytes_written(),
            fast_share_of_footprint: r.fast_share_of_footprint(),
            seed,
        })
        .collect()
}

/// Prints the results of a grid's cells (in grid order) as tables, one per machine, writes them
/// as JSON and CSV, and fails if any run did. `compare` and `compare merge` both end here, so a
/// merge prints and writes what one machine running the whole grid does, to the byte.
pub fn present(
    grid: &Grid,
    results: &[CellResult],
    json: Option<&Path>,
    csv: Option<&Path>,
    plot: Option<&Path>,
) -> Result<()> {
    let rows: Vec<Row> = results.iter().flat_map(|c| rows(grid, c)).collect();
    let mut text = String::new();
    let mut printed = 0;
    for (i, group) in
        results.chunk_by(|a, b| grid.group(grid.cell(a.cell)) == grid.group(grid.cell(b.cell))).enumerate()
    {
        if i > 0 {
            text.push('\n');
        }
        text += &grid.group_header(grid.cell(group[0].cell));
        text.push('\n');
        let n: usize = group.iter().map(|c| c.reports.len()).sum();
        text += &table::rows_text(
            &rows[printed..printed + n]
                .iter()
                .map(|r| table::row(r.report, r.speedup_over_first_touch, r.headroom_to_ceiling))
                .collect::<Vec<_>>(),
        );
        printed += n;
    }
    if !results.is_empty() {
        text += table::LEGEND;
        text.push('\n');
    }
    // With a machine-readable copy on standard output, the table goes to standard error.
    if is_stdout(json) || is_stdout(csv) {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let Some(path) = json {
        if is_stdout(Some(path)) {
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            crate::write_json(&path.to_path_buf(), &rows)?;
        }
    }
    if let Some(path) = csv {
        write_csv(path, &rows)?;
    }
    // Here, so that a merge draws what one machine would.
    if let Some(path) = plot {
        let reports: Vec<RunReport> = results.iter().flat_map(|c| c.reports.iter().cloned()).collect();
        crate::plots::compare(path, &grid.group_header(grid.cell(results[0].cell)), &reports)?;
    }
    let failures: Vec<&String> = results.iter().flat_map(|c| &c.failures).collect();
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("terrace: {f}");
        }
        let runs: usize = results.iter().map(|c| grid.runs_in(grid.cell(c.cell))).sum();
        bail!("{} of {runs} runs failed (above)", failures.len());
    }
    Ok(())
}

fn write_csv(path: &Path, rows: &[Row]) -> Result<()> {
    let cannot = || format!("cannot write {}", path.display());
    let out: Box<dyn std::io::Write> = if is_stdout(Some(path)) {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::fs::File::create(path).with_context(cannot)?)
    };
    let mut w = csv::Writer::from_writer(out);
    for r in rows {
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
            headroom_to_ceiling: r.headroom_to_ceiling,
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
            seed: r.seed,
        })
        .with_context(cannot)?;
    }
    w.flush().with_context(cannot)
}

/// One simulated run: a workload under a policy on a machine.
pub struct Run<'a> {
    pub machine: &'a MachineArgs,
    pub profile: &'a Profile,
    pub workload: &'a str,
    pub policy: &'a str,
}

/// Runs every run in parallel (rayon, one run per task, those of most accesses first so that a
/// long run does not start last), under one progress bar over all their accesses. The results
/// are in the order of `runs`. Fails before running anything if a workload cannot be built.
pub fn run_all(runs: &[Run]) -> Result<Vec<Result<RunReport>>> {
    // A workload's accesses depend on its seed and scale, not on the profile or the fast tier.
    fn key<'a>(r: &Run<'a>) -> (&'a str, u64, u64) {
        (r.workload, r.machine.seed, r.machine.size_scale.to_bits())
    }
    let mut accesses: HashMap<(&str, u64, u64), u64> = HashMap::new();
    // The name each workload argument runs under: a trace's is the one it was recorded with.
    let mut recorded: HashMap<&str, String> = HashMap::new();
    for r in runs {
        if let std::collections::hash_map::Entry::Vacant(e) = accesses.entry(key(r)) {
            let source = r.machine.source(r.workload)?;
            recorded.entry(r.workload).or_insert_with(|| source.info().name.clone());
            e.insert(source.info().accesses);
        }
    }
    // Two arguments under one name (an exact and an aggregated trace of one program, or a trace
    // and the built-in workload it was made from) would make rows and plots that cannot be told
    // apart: those runs are labelled by the argument as given.
    let shared = |w: &str| recorded.iter().any(|(other, name)| *other != w && *name == recorded[w]);
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(accesses[&key(&runs[i])]));
    let total = runs.iter().fold(0u64, |t, r| t.saturating_add(accesses[&key(r)]));
    let done: Vec<(usize, Result<RunReport>)> = table::with_progress(total, |progress| {
        order
            .par_iter()
            .with_max_len(1)
            .map(|&i| {
                let r = &runs[i];
                if r.policy == terrace_ceiling::NAME {
                    return (i, run_optimal(r.machine, r.profile, r.workload, Some(progress.clone())));
                }
                (i, run_one(r.machine, r.profile, r.workload, r.policy, Some(progress.clone())))
            })
            .collect()
    });
    let mut results: Vec<Option<Result<RunReport>>> = (0..runs.len()).map(|_| None).collect();
    for (i, mut r) in done {
        if let Ok(report) = &mut r {
            if shared(runs[i].workload) {
                report.workload = runs[i].workload.to_string();
            }
        }
        results[i] = Some(r);
    }
    Ok(results.into_iter().map(|r| r.expect("every run ran")).collect())
}

/// The offline reference `optimal` on one workload (terrace-ceiling): the best of its family's
/// runs, and a line saying which candidate that is (`sim` and `compare`).
pub(crate) fn run_optimal(
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
    crate::run_spec::note_memory_mode_on_counts(workload, &ceiling.chosen);
    Ok(ceiling.report)
}

/// The policy specs to run on `profile`: those `named` (or the default comparison, unless only
/// a sweep is asked for), then each sweep's, first-touch first if it is not among them, each
/// checked, and each policy once (two specs that build the same policy, as `ambix-noswitch` and
/// `ambix:switch=false` do, run once).
///
/// On a profile of more tiers than a policy of the default comparison manages (the seeds' are
/// written for two), the default leaves it out and says so; a policy named is run, and refused
/// with its reason.
pub fn policies(named: &[String], sweep: &[String], profile: &Profile) -> Result<Vec<String>> {
    let mut specs: Vec<String> = named.iter().flat_map(|p| terrace_policy::split_list(p)).collect();
    if specs.is_empty() && !named.is_empty() {
        bail!("--policies names no policy; give NAME,NAME,... (`terrace list policies`)");
    }
    if specs.is_empty() && sweep.is_empty() {
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
        // The offline ceiling, so that every row shows what its policy leaves on the table
        // (column "to ceiling").
        specs.push(terrace_ceiling::NAME.to_string());
    }
    for s in sweep {
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
fn manages(spec: &str, profile: &Profile) -> bool {
    terrace_policy::registry::max_tiers(spec).ok().flatten().is_none_or(|m| m >= profile.tiers.len())
}

pub fn describe_capacity(capacity: Option<terrace_sim::Capacity>) -> String {
    match capacity {
        None => "as each workload's seed experiment, scaled like the workload (column 'fast tier': size and share of the footprint)".into(),
        Some(terrace_sim::Capacity::Percent(p)) => format!("{p}% of each footprint"),
        Some(terrace_sim::Capacity::Bytes(b)) => terrace_sim::human_bytes(b),
        Some(terrace_sim::Capacity::Suggested) => "suggested".into(),
    }
}
