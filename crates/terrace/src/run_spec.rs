//! What one simulated run is made of (workload, policy, profile, capacities) and `terrace sim`.

use crate::table;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use terrace_sim::{Capacity, Profile, RunReport, SimOptions, DEFAULT_PROFILE};
use terrace_workloads::trace::{TraceError, TraceForm, TraceReader};
use terrace_workloads::AccessSource;

/// Options shared by `sim` and `compare`.
#[derive(Args, Clone, Debug)]
pub struct MachineArgs {
    /// Machine profile: a built-in name (`terrace list profiles`) or a .toml file.
    #[arg(long, default_value = DEFAULT_PROFILE)]
    pub profile: String,
    /// Fast-tier capacity: a share of the footprint ("40%") or a size ("48MiB", "1GiB", "65536").
    /// Default: the seed experiment's DRAM, scaled like the workload.
    #[arg(long, value_parser = parse_capacity, allow_hyphen_values = true)]
    pub fast_capacity: Option<Capacity>,
    /// Slow-tier capacity as a size. Default: the profile's slow:fast ratio times the fast tier, and
    /// at least the footprint.
    #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
    pub slow_capacity: Option<u64>,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 1, value_parser = parse_seed, allow_hyphen_values = true)]
    pub seed: u64,
    /// Multiplies workload sizes and lengths (1 = the built-in size; 0.0625 for a quick look).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub size_scale: f64,
}

impl MachineArgs {
    pub fn profile(&self) -> Result<Profile> {
        Ok(Profile::load(&self.profile)?)
    }

    /// What an oversized fast tier means, said once after the results: it is allowed (a fast
    /// tier larger than the footprint is a real machine, and the bound all-fast stands for), but
    /// then no page ever needs the slow tier, which a user asking for 150% may not expect.
    pub fn note_oversized_fast_tier(&self) {
        if let Some(Capacity::Percent(p)) = self.fast_capacity {
            if p > 100.0 {
                eprintln!(
                    "terrace: note: --fast-capacity {p}% is more than the footprint: every page fits in the \
                     fast tier, so no policy ever needs the slow tier"
                );
            }
        }
    }
    pub fn options(&self, progress: Option<Arc<AtomicU64>>) -> SimOptions {
        SimOptions {
            fast_capacity: self.fast_capacity.unwrap_or(Capacity::Suggested),
            slow_capacity: self.slow_capacity,
            progress,
            start_tier: None,
        }
    }
    /// A workload by name, or a trace file by path.
    pub fn source(&self, workload: &str) -> Result<Box<dyn AccessSource>> {
        let Some(reader) = trace_reader(workload) else {
            return Ok(terrace_workloads::build(workload, self.seed, self.size_scale)?);
        };
        // The reader names the file in every error, a missing one included.
        let reader = reader?;
        if reader.form() != TraceForm::Exact {
            // Counts per page and epoch replay as random 64 B accesses (trace/expand.rs).
            return Ok(Box::new(terrace_workloads::trace::ExpandedTrace::new(reader)));
        }
        Ok(Box::new(reader))
    }
}

/// The trace a workload argument names, opened (its header read), or `None` for a built-in
/// workload's name.
fn trace_reader(
    workload: &str,
) -> Option<Result<TraceReader<std::io::BufReader<std::fs::File>>, TraceError>> {
    let path = std::path::Path::new(workload);
    (looks_like_path(workload) || path.exists()).then(|| TraceReader::open(path))
}

/// Says once per workload, on standard error, that `policy`'s run of an aggregated trace is
/// not to be trusted when it is memory-mode's: a cache of lines depends on which lines follow
/// which, and the trace keeps per-page counts only (docs/formats.md, "Replaying an aggregated
/// trace": its speedups replayed 3.8 to 4.4 times their exact runs' on average).
pub fn note_memory_mode_on_counts(workload: &str, policy: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if !policy.starts_with("memory-mode") {
        return;
    }
    let aggregated = trace_reader(workload).is_some_and(|r| r.is_ok_and(|r| r.form() != TraceForm::Exact));
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if aggregated && !said.iter().any(|w| w == workload) {
        said.push(workload.to_string());
        eprintln!(
            "terrace: note: {workload} keeps per-page counts, not the order of lines, which a \
             memory-mode cache depends on: memory-mode's figures on it are not to be trusted \
             (docs/formats.md, \"Replaying an aggregated trace\")"
        );
    }
}

/// Whether a workload argument names a file rather than a built-in workload: it has a directory
/// separator or a trace's extension, so a missing file is reported as missing, not as an unknown
/// workload.
fn looks_like_path(workload: &str) -> bool {
    workload.contains('/') || workload.ends_with(".trc") || workload.ends_with(".trace")
}

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Workload name (`terrace list workloads`; the NPB kernels and BFS take `:iterations=N`) or trace file.
    #[arg(long, short)]
    pub workload: String,
    /// Policy: a name (`terrace list policies`), or a name with parameters,
    /// `NAME:key=value,key=value` (`hpwp:hot_threshold=8`; `terrace list policies --params`).
    #[arg(long, short, default_value = "first-touch")]
    pub policy: String,
    #[command(flatten)]
    pub machine: MachineArgs,
    /// Also write the full report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also draw the placement over time (page ranges against time, coloured by tier, darker
    /// the more accessed), the fast tier's hit rate and the bytes migrated: FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Also write where the pages were when the run ended: a line per run of pages in one tier
    /// (first address, pages of 4 KiB, tier). For a recording (`terrace record`) the addresses
    /// are the program's; for anything else, offsets into the workload's footprint.
    #[arg(long, value_name = "FILE")]
    pub final_placement: Option<PathBuf>,
    /// Where pages are first touched, whatever the policy's own initial placement: `fast`,
    /// `slow` (the last tier) or a tier's name in the profile; a full tier passes pages on to the
    /// next. For a program that ran bound to one node (`numactl --membind`), as its recording
    /// was made.
    #[arg(long, value_name = "TIER")]
    pub start_tier: Option<String>,
}

/// `--start-tier`'s tier in `profile`: `fast`, `slow` (the last) or a tier's name.
fn start_tier(profile: &Profile, name: &str) -> Result<terrace_model::TierId> {
    let last = profile.tiers.len() - 1;
    let index = match name {
        "fast" => 0,
        "slow" => last,
        _ => match profile.tiers.iter().position(|t| t.name == name) {
            Some(i) => i,
            None => {
                let names: Vec<&str> = profile.tiers.iter().map(|t| t.name.as_str()).collect();
                bail!(
                    "--start-tier '{name}': profile {} has no such tier; give fast, slow or one of {}",
                    profile.name,
                    names.join(", ")
                )
            }
        },
    };
    Ok(terrace_model::TierId(index as u8))
}

/// Parses "40%", "48MiB", "1.5GiB", "4096".
pub fn parse_capacity(s: &str) -> Result<Capacity, String> {
    if let Some(p) = s.strip_suffix('%') {
        let v: f64 = p.trim().parse().map_err(|_| format!("'{s}' is not a percentage; write e.g. 40%"))?;
        if v < 0.0 {
            return Err(format!("'{s}': a capacity cannot be negative"));
        }
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("'{s}': the fast tier needs a capacity above 0%"));
        }
        return Ok(Capacity::Percent(v));
    }
    let b = parse_size(s)?;
    if b == 0 {
        return Err(format!("'{s}': the fast tier needs a capacity above zero"));
    }
    Ok(Capacity::Bytes(b))
}

/// Parses a generator seed.
pub fn parse_seed(s: &str) -> Result<u64, String> {
    s.trim().parse().map_err(|_| format!("'{s}' is not a seed; give a whole number from 0 to {}", u64::MAX))
}

/// Parses a byte size with an optional binary unit (KiB, MiB, GiB, TiB; K, M, G, T alike).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("'{s}': a capacity cannot be negative"));
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("'{s}' is not a size; write e.g. 48MiB or 1GiB"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("'{s}': unknown unit '{other}'; use KiB, MiB, GiB or TiB")),
    };
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("'{s}' is too large"));
    }
    Ok(bytes as u64)
}

/// The live machine's config's `[policy.NAME]` tables (`tables`), checked against the registry:
/// what `terrace run` and the daemon build policies with. A bad table is refused in one line
/// naming the config, as the config's own keys are.
#[cfg_attr(not(all(feature = "live", target_os = "linux")), allow(dead_code))]
pub fn config_policies<T: std::fmt::Display>(
    config: Option<&std::path::Path>,
    tables: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, T>>,
) -> Result<terrace_policy::Overrides> {
    let mut policies = terrace_policy::Overrides::default();
    for (name, table) in tables {
        policies.insert(name, table.iter().map(|(k, v)| (k, v.to_string()))).map_err(|e| {
            let path = config.map_or("(none)".into(), |p| p.display().to_string());
            anyhow::anyhow!("config '{path}' is invalid: [policy.{name}]: {e}")
        })?;
    }
    Ok(policies)
}

/// Runs one workload under one policy.
pub fn run_one(
    machine: &MachineArgs,
    profile: &Profile,
    workload: &str,
    policy: &str,
    progress: Option<Arc<AtomicU64>>,
) -> Result<RunReport> {
    let mut p = terrace_policy::build(policy)?;
    let source = machine.source(workload)?;
    let report = terrace_sim::simulate(source, p.as_mut(), profile, &machine.options(progress))
        .with_context(|| format!("{workload} under {policy}"))?;
    // After the run: a trace refused as damaged gets its one line and nothing else.
    note_memory_mode_on_counts(workload, p.name());
    Ok(report)
}

/// [`run_one`], keeping placement over time or at the end too (`terrace sim --plot`,
/// `--final-placement`).
fn run_one_keeping(
    machine: &MachineArgs,
    profile: &Profile,
    workload: &str,
    policy: &str,
    progress: Option<Arc<AtomicU64>>,
    keep: terrace_sim::Keep,
    start_tier: Option<terrace_model::TierId>,
) -> Result<(RunReport, terrace_sim::Kept)> {
    let mut p = terrace_policy::build(policy)?;
    let source = machine.source(workload)?;
    let opts = SimOptions { start_tier, ..machine.options(progress) };
    let run = terrace_sim::simulate_keeping(source, p.as_mut(), profile, &opts, keep);
    let run = run.with_context(|| format!("{workload} under {policy}"))?;
    note_memory_mode_on_counts(workload, p.name());
    Ok(run)
}

pub fn sim(args: SimArgs) -> Result<()> {
    let profile = args.machine.profile()?;
    let optimal = args.policy == terrace_ceiling::NAME;
    // Validate names and the picture's format before starting a long run.
    if !optimal {
        terrace_policy::build(&args.policy)?;
    }
    crate::plots::check(args.plot.as_deref())?;
    let start = args.start_tier.as_deref().map(|t| start_tier(&profile, t)).transpose()?;
    if optimal && start.is_some() {
        bail!(
            "--start-tier sets where a policy's pages start, and {} chooses that itself: leave it out",
            terrace_ceiling::NAME
        );
    }
    if optimal && args.plot.is_some() {
        bail!(
            "--plot draws one policy's run, and {} is the best of several: plot the candidate it names \
             (`terrace sim --policy NAME --plot FILE`)",
            terrace_ceiling::NAME
        );
    }
    let accesses = args.machine.source(&args.workload)?.info().accesses;
    let (report, kept) = table::with_progress(accesses, |progress| {
        if optimal {
            let report =
                crate::compare::run_optimal(&args.machine, &profile, &args.workload, Some(progress))?;
            return Ok((report, None));
        }
        let keep =
            terrace_sim::Keep { timeline: args.plot.is_some(), placement: args.final_placement.is_some() };
        run_one_keeping(&args.machine, &profile, &args.workload, &args.policy, Some(progress), keep, start)
            .map(|(r, kept)| (r, Some(kept)))
    })?;
    if report.accesses == 0 {
        bail!("{} made no accesses; nothing to report", args.workload);
    }
    table::print_report(&report);
    if let Some(path) = &args.json {
        crate::write_json(path, &report)?;
    }
    let kept = kept.unwrap_or_default();
    if let (Some(path), Some(timeline)) = (&args.plot, &kept.timeline) {
        crate::plots::sim(path, &profile, &report, timeline)?;
    }
    if let (Some(path), Some(placement)) = (&args.final_placement, &kept.placement) {
        let info = args.machine.source(&args.workload)?.info().clone();
        write_final_placement(path, &info, &profile, &report, placement)?;
    }
    args.machine.note_oversized_fast_tier();
    Ok(())
}

/// `terrace sim --final-placement`: runs of 4 KiB pages in one tier, in the program's addresses
/// when the trace is a recording that kept them, else as offsets into the footprint.
fn write_final_placement(
    path: &std::path::Path,
    info: &terrace_workloads::WorkloadInfo,
    profile: &Profile,
    report: &RunReport,
    placement: &terrace_sim::FinalPlacement,
) -> Result<()> {
    use std::fmt::Write;
    let per = (placement.page_bytes / 4096).max(1);
    let mut text = format!(
        "# where the pages of {} were when the run under {} on {} ended\n# first address, pages of 4 KiB, tier\n",
        report.workload, report.policy, report.profile
    );
    // A recording's pages at the program's addresses; anything else, offsets into its footprint.
    let recording = info.recording.as_ref().filter(|r| !r.addresses.is_empty());
    let address =
        |page4k: u64| -> u64 { recording.and_then(|r| r.address_of(page4k)).unwrap_or(page4k * 4096) };
    let mut run: Option<(u64, u64, usize)> = None; // first 4 KiB page, pages, tier
    let flush = |run: Option<(u64, u64, usize)>, text: &mut String| {
        if let Some((first, n, t)) = run {
            let name = profile.tiers.get(t).map_or("?", |t| t.name.as_str());
            let _ = writeln!(text, "{:#x} {n} {name}", address(first));
        }
    };
    let pages = info.footprint_bytes.div_ceil(4096);
    for (p, tier) in placement.tiers.iter().enumerate() {
        if *tier == terrace_model::TierId::UNPLACED {
            flush(run.take(), &mut text);
            continue;
        }
        let t = tier.index();
        // Page by 4 KiB page: a policy's 2 MiB page may span runs of the program's addresses.
        for page in (p as u64 * per..(p as u64 + 1) * per).take_while(|&q| q < pages) {
            match &mut run {
                // A run continues only where the program's addresses do too.
                Some((f, n, rt)) if *rt == t && address(page) == address(*f) + *n * 4096 => *n += 1,
                _ => {
                    flush(run.take(), &mut text);
                    run = Some((page, 1, t));
                }
            }
        }
    }
    flush(run, &mut text);
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_capacities_parse_with_units() {
        assert_eq!(parse_size("48MiB"), Ok(48 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 parsecs").is_err());
        assert_eq!(parse_capacity("40%"), Ok(Capacity::Percent(40.0)));
        assert!(parse_capacity("0%").is_err());
        assert!(parse_capacity("0").is_err());
    }

    /// A config's `[policy.NAME]` tables set the parameters of the policies `terrace run` and
    /// the daemon build; a bad table is refused naming the config.
    #[cfg(all(feature = "live", target_os = "linux"))]
    #[test]
    fn config_policy_tables_parametrise_the_policies_built() {
        use terrace_linux::config::Config;
        let path = std::path::Path::new("t.toml");
        let c =
            Config::parse("t.toml", "[policy.hpwp]\nhot_threshold = 8\n[policy.age]\ninterval = \"2s\"\n")
                .unwrap();
        let policies = config_policies(Some(path), &c.policy).unwrap();
        assert_eq!(policies.build("hpwp").unwrap().name(), "hpwp:hot_threshold=8");
        assert_eq!(policies.build("hpwp:hpw_writes=2").unwrap().name(), "hpwp:hot_threshold=8,hpw_writes=2");
        assert_eq!(policies.build("hpwp:hot_threshold=3").unwrap().name(), "hpwp", "the spec wins");
        assert_eq!(policies.build("age-2m").unwrap().name(), "age-2m:interval=2s", "presets take it too");
        assert_eq!(policies.build("hemem").unwrap().name(), "hemem");
        for (table, want) in [
            ("[policy.hpwq]\nhot_threshold = 8\n", "unknown policy 'hpwq'"),
            ("[policy.hpwp]\nhot = 8\n", "hpwp has no parameter 'hot'; its parameters are hot_threshold,"),
            ("[policy.hpwp]\nhot_threshold = \"many\"\n", "hot_threshold=many is not a whole number"),
            ("[policy.hpwp]\nhot_threshold = 0\n", "hot_threshold=0 is out of range; give 1 to 1000"),
            ("[policy.ambix]\ndelay = \"3s\"\n", "delay=3s must be shorter than period=2s"),
            ("[policy.first-touch]\nx = 1\n", "first-touch takes no parameters"),
        ] {
            let c = Config::parse("t.toml", table).unwrap();
            let e = crate::error_line(&config_policies(Some(path), &c.policy).err().unwrap());
            assert!(e.starts_with("config 't.toml' is invalid: [policy."), "{e}");
            assert!(e.contains(want), "{table}: {e}");
        }
    }
}
