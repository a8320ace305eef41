//! `terrace bench`: the simulator's own speed, and page-migration throughput (live or modelled),
//! as figures (not pass/fail).

use anyhow::Result;
use clap::Subcommand;
use std::time::Instant;
#[cfg(all(feature = "live", target_os = "linux"))]
use terrace_linux::bench_migrate::{self, Op as LiveOp};
use terrace_model::{MachineInfo, Observations, PageSize, Plan, Policy, Requirements, TrackerRequest};
use terrace_sim::bench_grid::{self, GridOp};
use terrace_sim::{Profile, SimOptions};
use terrace_workloads::trace::{self, TraceReader};
use terrace_workloads::{Access, AccessSource};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Simulated accesses per second per core, against the speed of generating and decoding the same stream.
    Sim {
        /// Workload to measure with.
        #[arg(long, default_value = "gups")]
        workload: String,
        #[arg(long, default_value_t = 0.25)]
        size_scale: f64,
    },
    /// Page-migration throughput (move_pages) per page size, thread count, batch size and
    /// exchange, beside the memcpy bandwidth measured in the same run; or the model's figures.
    Migrate(MigrateArgs),
    /// What computing the offline reference `optimal` costs beside a first-touch run of the same
    /// workload, in wall-clock time (first-touch on one core, optimal's candidates on every core)
    /// and in CPU time, on the default suite; with --exhaustive, checks it against every
    /// static placement and registry policy on every built-in workload, profile and fast tier of
    /// 5% to 100% in 5% steps (long: hours on 2 cores).
    Ceiling(CeilingArgs),
    /// What tracking costs real programs (GNU sort, sqlite3, python3): each run plain and under
    /// `terrace run --dry-run` with each policy whose tracker this host can give (live machine).
    Tracking(crate::bench_tracking::TrackingArgs),
    /// What page walks cost a workload's accesses on this host: replays the stream on real
    /// memory with 4 KiB pages and with 2 MiB transparent huge pages and times both (the
    /// simulated machine charges no TLB misses; docs/model.md §10).
    PageSize(PageSizeArgs),
}

#[derive(clap::Args, Debug)]
pub struct PageSizeArgs {
    /// Workloads (built-in names or trace files), comma-separated; by default Nimble Fig. 12's.
    #[arg(long, value_delimiter = ',', default_values = crate::reproduce::NIMBLE_WORKLOADS)]
    workloads: Vec<String>,
    /// Multiplies workload sizes and lengths, as in `terrace sim`.
    #[arg(long, default_value_t = 1.0)]
    size_scale: f64,
    /// Seed of the workload generators.
    #[arg(long, default_value_t = 1, value_parser = crate::run_spec::parse_seed)]
    seed: u64,
    /// Replay at most this many of each workload's accesses, in 8 windows spread evenly over its
    /// run (8 bytes each while replayed).
    #[arg(long, default_value_t = 20_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    accesses: u64,
    /// Timed replays per page size; each figure is the best of them (after one untimed one).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
}

#[derive(clap::Args, Debug)]
pub struct CeilingArgs {
    /// Workloads at this multiple of their size (default 0.25; with --exhaustive, 1/64).
    #[arg(long)]
    size_scale: Option<f64>,
    /// Machine profile (the cost figure's; --exhaustive runs every built-in one).
    #[arg(long, default_value = terrace_sim::DEFAULT_PROFILE)]
    profile: String,
    /// Check the reference on every built-in workload, profile and fast tier of 5% to 100%,
    /// printing each workload and profile as it ends.
    #[arg(long)]
    exhaustive: bool,
    /// With --exhaustive: only these built-in workloads, comma-separated (to resume a check cut
    /// short, or to check a workload added since).
    #[arg(long, value_delimiter = ',', requires = "exhaustive")]
    workloads: Vec<String>,
    /// With --exhaustive: only these built-in profiles, comma-separated (to check a profile
    /// added since).
    #[arg(long, value_delimiter = ',', requires = "exhaustive")]
    profiles: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// Compute the grid with the simulated machine's cost model instead of measuring this host.
    #[arg(long)]
    simulated: bool,
    /// Machine profile for --simulated: a built-in name or a .toml file.
    #[arg(long, requires = "simulated")]
    profile: Option<String>,
    /// Size of the region moved in every cell, MiB (a multiple of 4).
    #[arg(long, default_value_t = 64)]
    mib: u64,
    /// Measure 1 to this many threads (concurrent move_pages callers).
    #[arg(long, default_value_t = 4)]
    threads: u32,
    /// Pages per move_pages call, comma-separated (1 to 512 by default, as Nimble's issue asks).
    #[arg(long, value_delimiter = ',', default_value = "1,8,64,512")]
    batches: Vec<u32>,
    /// Live: runs per cell (and per memcpy figure); each figure is the best of them.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Also draw GB/s against batch size, a panel per page size and thread count, a line per
    /// mechanism, memcpy's bandwidth dashed: FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<std::path::PathBuf>,
}

/// Asks for HeMem's sampling tracker (period 19,997, docs/hardware.md §12) and never
/// moves: measures what sampling costs the simulator itself.
struct SamplingProbe;

impl Policy for SamplingProbe {
    fn name(&self) -> &str {
        "sampling-probe"
    }
    fn requirements(&self, _: &MachineInfo) -> Requirements {
        Requirements {
            trackers: vec![TrackerRequest::sampling(19_997)],
            tick_ns: Some(10_000_000),
            ..Default::default()
        }
    }
    fn tick(&mut self, _: &Observations<'_>) -> Plan {
        Plan::none()
    }
}

/// Best of `runs` timings of `f`, in seconds, with its last result.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<(f64, T)> {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = f()?;
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    Ok((best, out.expect("at least one run")))
}

fn rate(accesses: u64, secs: f64) -> String {
    format!("{:>8.1} M accesses/s", accesses as f64 / secs / 1e6)
}

/// Every access of `source`; how many there were.
fn drain(source: &mut dyn AccessSource) -> u64 {
    skip(source, &mut Vec::with_capacity(1 << 16), u64::MAX)
}

/// Passes over up to `n` accesses of `source`; how many it passed.
fn skip(source: &mut dyn AccessSource, scratch: &mut Vec<Access>, n: u64) -> u64 {
    let mut passed = 0;
    while passed < n {
        scratch.clear();
        let got = source.fill(scratch, (n - passed).min(1 << 16) as usize);
        if got == 0 {
            break;
        }
        passed += got as u64;
    }
    passed
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Sim { workload, size_scale } => bench_sim(&workload, size_scale),
        BenchCommand::Migrate(args) if args.simulated => migrate_simulated(&args),
        BenchCommand::Migrate(args) => migrate_live(&args),
        BenchCommand::Tracking(args) => crate::bench_tracking::run(&args),
        BenchCommand::PageSize(args) => page_size(&args),
        BenchCommand::Ceiling(args) if args.exhaustive => crate::ceiling_cmd::exhaustive(
            args.size_scale.unwrap_or(1.0 / 64.0),
            &args.workloads,
            &args.profiles,
        ),
        BenchCommand::Ceiling(args) => {
            crate::ceiling_cmd::cost(&args.profile, args.size_scale.unwrap_or(0.25))
        }
    }
}

fn bench_sim(workload: &str, size_scale: f64) -> Result<()> {
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE)?;
    let build = || terrace_workloads::build(workload, 1, size_scale);
    println!("one core; workload {workload} at size scale {size_scale}");

    let (generate, n) = best_of(2, || Ok(drain(build()?.as_mut())))?;
    println!("generate only                 {}", rate(n, generate));

    let bytes: std::sync::Arc<[u8]> = trace::record(build()?.as_mut(), Vec::new())?.into();
    let (decode, decoded) =
        best_of(2, || Ok(drain(&mut TraceReader::from_reader(std::io::Cursor::new(&bytes))?)))?;
    println!(
        "decode trace only             {}   ({:.2} bytes per access)",
        rate(decoded, decode),
        bytes.len() as f64 / n as f64
    );

    let info = build()?.info().clone();
    let mut all = Vec::with_capacity(n as usize);
    build()?.fill(&mut all, n as usize);
    let all = std::sync::Arc::new(all);
    let in_memory = || terrace_workloads::MemorySource::new(info.clone(), all.clone());
    let mut sim_rates = Vec::new();
    for label in ["first-touch", "sampling tracker"] {
        let (secs, r) = best_of(2, || {
            let mut p: Box<dyn Policy> = if label == "first-touch" {
                terrace_policy::build("first-touch")?
            } else {
                Box::new(SamplingProbe)
            };
            Ok(terrace_sim::simulate(Box::new(in_memory()), p.as_mut(), &profile, &SimOptions::default())?)
        })?;
        println!("simulate, {label:<19} {}   (stream already in memory)", rate(r.accesses, secs));
        sim_rates.push((label, r.accesses as f64 / secs));
    }
    let (replay, r) = best_of(2, || {
        let mut ft = terrace_policy::build("first-touch")?;
        let reader = TraceReader::from_reader(std::io::Cursor::new(bytes.clone()))?;
        Ok(terrace_sim::simulate(Box::new(reader), ft.as_mut(), &profile, &SimOptions::default())?)
    })?;
    println!("replay trace, first-touch     {}   (decode included)", rate(r.accesses, replay));
    let decode_rate = decoded as f64 / decode;
    let replay_rate = r.accesses as f64 / replay;
    println!("ratio decode / trace replay   {:>8.2}x  (goal: at most 3x)", decode_rate / replay_rate);
    for (label, s) in sim_rates {
        println!("ratio decode / sim {label:<11}{:>8.2}x", decode_rate / s);
    }
    Ok(())
}

/// `terrace bench page-size` without the live machine.
#[cfg(not(all(feature = "live", target_os = "linux")))]
fn page_size(_: &PageSizeArgs) -> Result<()> {
    Err(crate::needs_live("bench page-size"))
}

/// Windows of a run `terrace bench page-size` replays.
#[cfg(all(feature = "live", target_os = "linux"))]
const WINDOWS: u64 = 8;

/// Appends up to `n` accesses of `source` to `out`; how many came.
#[cfg(all(feature = "live", target_os = "linux"))]
fn take(source: &mut dyn AccessSource, out: &mut Vec<Access>, n: u64) -> u64 {
    let mut got = 0;
    while got < n {
        let k = source.fill(out, (n - got).min(1 << 20) as usize);
        if k == 0 {
            break;
        }
        got += k as u64;
    }
    got
}

/// `terrace bench page-size`: each workload's accesses in windows spread over its run, each thread's in turn (a core's
/// TLB sees its own thread's), replayed on this host with 4 KiB and with 2 MiB pages.
#[cfg(all(feature = "live", target_os = "linux"))]
fn page_size(args: &PageSizeArgs) -> Result<()> {
    use terrace_linux::page_size_replay::{self, Chain};
    let machine = crate::run_spec::MachineArgs {
        profile: terrace_sim::DEFAULT_PROFILE.to_string(),
        fast_capacity: None,
        slow_capacity: None,
        seed: args.seed,
        size_scale: args.size_scale,
    };
    // Every workload is opened before any is replayed, so a bad name costs no waiting.
    let sources = args.workloads.iter().map(|w| machine.source(w)).collect::<Result<Vec<_>>>()?;
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    println!(
        "terrace bench page-size: up to {} accesses per workload, in {WINDOWS} windows spread over its run, \
         each thread's in turn, on one core; \
         transparent_hugepage/enabled: {}",
        args.accesses,
        thp.trim()
    );
    println!("{:<32} {:>10} {:>9}   {:^25}   {:^25}", "", "", "", "independent", "dependent");
    println!(
        "{:<32} {:>10} {:>9}   {:>8} {:>8} {:>7}   {:>8} {:>8} {:>7}   {:>7}",
        "workload", "footprint", "accesses", "ns 4K", "ns 2M", "4K/2M", "ns 4K", "ns 2M", "4K/2M", "in THPs"
    );
    let mut short = Vec::new();
    for (name, mut source) in args.workloads.iter().zip(sources) {
        let footprint = source.info().footprint_bytes;
        let total = source.info().accesses;
        // The accesses while generated (16 bytes each) and the stream (8 each) beside the region.
        page_size_replay::check_fits(footprint, args.accesses.min(total).saturating_mul(24))?;
        // WINDOWS windows spread evenly over the run, each thread's accesses in their order,
        // thread after thread: a run's first accesses alone are its initialising sweeps.
        let window = (args.accesses / WINDOWS).max(1);
        let mut accesses = Vec::new();
        let mut scratch = Vec::new();
        let mut at = 0u64;
        for k in 0..WINDOWS {
            let gap = total.saturating_sub(window * WINDOWS) / WINDOWS;
            let start = gap / 2 + k * (gap + window);
            skip(source.as_mut(), &mut scratch, start.saturating_sub(at));
            let first = accesses.len();
            let got = take(source.as_mut(), &mut accesses, window);
            accesses[first..].sort_by_key(|a| a.thread);
            at = start + got;
            if got < window {
                break;
            }
        }
        let stream: Vec<u64> =
            accesses.iter().map(|a| page_size_replay::encode(a.addr, a.kind.is_write())).collect();
        drop(accesses);
        let ns = |r: &page_size_replay::Replay| r.secs * 1e9 / stream.len().max(1) as f64;
        let mut cells = Vec::new();
        let mut huge_share = 1.0f64;
        for chain in [Chain::Independent, Chain::Dependent] {
            let small = page_size_replay::replay(&stream, footprint, false, chain, args.repeat)?;
            let huge = page_size_replay::replay(&stream, footprint, true, chain, args.repeat)?;
            huge_share = huge_share.min(huge.huge_bytes as f64 / huge.region_bytes as f64);
            cells.push(format!("{:>8.2} {:>8.2} {:>6.2}x", ns(&small), ns(&huge), small.secs / huge.secs));
        }
        if huge_share < 0.9 {
            short.push(format!(
                "{name}: only {:.0}% of its 2 MiB runs were in huge pages",
                huge_share * 100.0
            ));
        }
        println!(
            "{:<32} {:>10} {:>9}   {}   {:>6.0}%",
            name,
            format!("{:.1} MiB", footprint as f64 / f64::from(1 << 20)),
            stream.len(),
            cells.join("   "),
            huge_share * 100.0
        );
    }
    println!(
        "ns = wall-clock time per access (a load or a store of 8 bytes at the access's address, no \
         compute between them); independent: addresses known ahead, so misses and page walks overlap \
         (array loops); dependent: each address waits for the previous read (pointer chasing), the \
         worst case for walks; 4K/2M = the replay's time with 4 KiB pages over its time with 2 MiB \
         pages; in THPs = the 2 MiB mappings' least share in transparent huge pages (smaps)."
    );
    for s in &short {
        println!(
            "note: {s}: its 2 MiB column is partly 4 KiB pages (is transparent_hugepage/enabled \"never\"?)"
        );
    }
    Ok(())
}

/// The grid's operations, in column order: the model's, and the live benchmark's.
const OPS: [GridOp; 3] = [GridOp::Demote, GridOp::Promote, GridOp::Exchange];
#[cfg(all(feature = "live", target_os = "linux"))]
const LIVE_OPS: [LiveOp; 4] = [LiveOp::Demote, LiveOp::Promote, LiveOp::Exchange, LiveOp::TwoOneWay];

fn check_migrate_args(args: &MigrateArgs) -> Result<()> {
    crate::plots::check(args.plot.as_deref())?;
    if args.mib == 0 || !args.mib.is_multiple_of(4) {
        anyhow::bail!(
            "--mib must be a positive multiple of 4 (two halves of whole 2 MiB pages), not {}",
            args.mib
        );
    }
    if args.threads == 0 {
        anyhow::bail!("--threads must be at least 1");
    }
    if args.batches.is_empty() || args.batches.contains(&0) {
        anyhow::bail!("--batches needs one or more positive page counts");
    }
    Ok(())
}

/// One figure and its ratio, in a fixed-width column. A ratio under 0.01 keeps its first
/// significant digit (`0.004x`, not `0.00x`): in the guest, memcpy between the nodes can run
/// hundreds of times faster than 4 KiB pages move in batches of 8, and a positive ratio must not
/// read as none (guest case 30 checks every cell).
fn figure(gb_s: f64, ratio: f64) -> String {
    let decimals = if ratio > 0.0 && ratio < 0.01 { (-ratio.log10()).ceil() as usize } else { 2 };
    format!("{gb_s:>8.3} GB/s {ratio:>5.decimals$}x")
}

fn migrate_header(from: &str, to: &str) {
    println!(
        "{:<5} {:>7} {:>6}   {:<20} {:<20} {:<20}",
        "page",
        "threads",
        "batch",
        format!("demote {from}->{to}"),
        format!("promote {to}->{from}"),
        "exchange"
    );
}

/// The live grid's header: the model's columns, the same swap as two one-way moves, and the
/// ratio of the paired exchange to it.
#[cfg(all(feature = "live", target_os = "linux"))]
fn live_header(from: &str, to: &str) {
    println!(
        "{:<5} {:>7} {:>6}   {:<20} {:<20} {:<20} {:<20} {:>9}",
        "page",
        "threads",
        "batch",
        format!("demote {from}->{to}"),
        format!("promote {to}->{from}"),
        "exchange (paired)",
        "two one-way",
        "exch/1way"
    );
}

/// `terrace bench migrate --simulated`: the cost model's figures for the grid.
fn migrate_simulated(args: &MigrateArgs) -> Result<()> {
    check_migrate_args(args)?;
    let profile = Profile::load(args.profile.as_deref().unwrap_or(terrace_sim::DEFAULT_PROFILE))?;
    let bytes = args.mib << 20;
    let cells = bench_grid::standard_cells(args.threads, &args.batches);
    let figures = bench_grid::migration_grid(&profile, bytes, &cells);
    let (fast, slow) = (&profile.tiers[0].name, &profile.tiers[1].name);
    println!(
        "terrace bench migrate --simulated: profile {}, {} MiB per cell, tier 0 ({fast}) <-> tier 1 ({slow})",
        profile.name, args.mib
    );
    println!("The model's figures (docs/model.md §4); ratios are to plain copying between the tiers with as many threads.");
    let mut copy = Vec::new();
    for t in 1..=args.threads {
        let (down, up) = (
            bench_grid::copy_bandwidth_gb_s(&profile, 0, 1, t),
            bench_grid::copy_bandwidth_gb_s(&profile, 1, 0, t),
        );
        let kernel = |size| {
            figures
                .iter()
                .find(|f| f.cell.threads == t && f.cell.page_size == size && f.cell.op == GridOp::Demote)
                .map(|f| f.kernel_copy_gb_s)
                .unwrap_or(f64::NAN)
        };
        let (k4, k2) = (kernel(PageSize::Base4K), kernel(PageSize::Huge2M));
        println!(
            "copy     {t} thread{}: 0->1 {down:.3} GB/s, 1->0 {up:.3} GB/s (tier bandwidth); kernel page copy 0->1: 4KiB {k4:.3}, 2MiB {k2:.3} GB/s",
            if t == 1 { " " } else { "s" }
        );
        copy.push(serde_json::json!({
            "threads": t, "fast_to_slow_gb_s": down, "slow_to_fast_gb_s": up,
            "kernel_copy_4kib_gb_s": k4, "kernel_copy_2mib_gb_s": k2,
        }));
    }
    println!();
    migrate_header("0", "1");
    let mut rows = Vec::new();
    for row in figures.chunks(3) {
        let c = row[0].cell;
        let cols: Vec<String> = OPS
            .iter()
            .map(|op| {
                let f = row.iter().find(|f| f.cell.op == *op).expect("every op in a row");
                figure(f.gb_s, f.ratio())
            })
            .collect();
        println!(
            "{:<5} {:>7} {:>6}   {}",
            c.page_size.to_string(),
            c.threads,
            c.batch_pages,
            cols.join("   ")
        );
        for f in row {
            rows.push(serde_json::json!({
                "page": f.cell.page_size.to_string(), "threads": f.cell.threads,
                "batch_pages": f.cell.batch_pages, "effective_batch_pages": f.effective_batch_pages,
                "op": f.cell.op, "bytes": f.bytes, "seconds": f.seconds, "gb_s": f.gb_s,
                "copy_gb_s": f.copy_gb_s, "ratio_to_copy": f.ratio(), "kernel_copy_gb_s": f.kernel_copy_gb_s,
            }));
        }
    }
    println!("\nthreads = copy threads and batches in flight (Nimble §3.1.2-3); exchange = Nimble's exchange_pages.");
    if let Some(path) = &args.json {
        crate::write_json(
            path,
            &serde_json::json!({
                "simulated": true, "profile": profile.name, "bytes": bytes, "copy": copy, "cells": rows,
            }),
        )?;
    }
    if let Some(path) = &args.plot {
        crate::plots::simulated_migration(path, &profile, &figures)?;
    }
    Ok(())
}

/// `terrace bench migrate` without the live machine.
#[cfg(not(all(feature = "live", target_os = "linux")))]
fn migrate_live(_: &MigrateArgs) -> Result<()> {
    Err(crate::needs_live("bench migrate"))
}

/// `terrace bench migrate`: measures move_pages on this host.
#[cfg(all(feature = "live", target_os = "linux"))]
fn migrate_live(args: &MigrateArgs) -> Result<()> {
    check_migrate_args(args)?;
    let opts = bench_migrate::Options {
        mib: args.mib,
        max_threads: args.threads,
        batches: args.batches.clone(),
        nodes: None,
        repeat: args.repeat,
    };
    let (src, dst) = bench_migrate::check(&opts)?;
    println!(
        "terrace bench migrate: {} MiB per cell between node {src} and node {dst}, move_pages(2) on this process",
        args.mib
    );
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    println!("transparent_hugepage/enabled: {}", thp.trim());
    let mut rows: Vec<bench_migrate::CellResult> = Vec::new();
    println!();
    live_header(&src.to_string(), &dst.to_string());
    let mut notes: Vec<String> = Vec::new();
    let report = bench_migrate::run(&opts, &mut |r| {
        rows.push(r.clone());
        if rows.len() < LIVE_OPS.len() {
            return;
        }
        // A whole row: print it as soon as it is measured (the grid takes a while).
        let row = std::mem::take(&mut rows);
        let c = row[0].cell;
        let cols: Vec<String> = LIVE_OPS
            .iter()
            .map(|op| {
                let r = row.iter().find(|r| r.cell.op == *op).expect("every op in a row");
                match &r.outcome {
                    bench_migrate::Outcome::Measured { gb_s, ratio_to_memcpy, .. } => {
                        figure(*gb_s, *ratio_to_memcpy)
                    }
                    bench_migrate::Outcome::NoThp { reason } => {
                        if !notes.contains(reason) {
                            notes.push(reason.clone());
                        }
                        format!("{:<20}", "no THP")
                    }
                    bench_migrate::Outcome::Failed { reason } => {
                        notes.push(format!(
                            "{}, {} threads, batch {}, {:?}: {reason}",
                            c.page, c.threads, c.batch_pages, op
                        ));
                        format!("{:<20}", "failed")
                    }
                }
            })
            .collect();
        let gb_s = |op| row.iter().find(|r| r.cell.op == op).and_then(|r| r.gb_s());
        let paired = match (gb_s(LiveOp::Exchange), gb_s(LiveOp::TwoOneWay)) {
            (Some(e), Some(o)) => format!("{:>8.2}x", e / o),
            _ => format!("{:>9}", "-"),
        };
        println!(
            "{:<5} {:>7} {:>6}   {}   {paired}",
            c.page.to_string(),
            c.threads,
            c.batch_pages,
            cols.join("   ")
        );
    })?;
    println!();
    for t in 1..=args.threads {
        println!(
            "memcpy   {t} thread{}: {src}->{dst} {:.3} GB/s, {dst}->{src} {:.3} GB/s",
            if t == 1 { " " } else { "s" },
            report.memcpy_gb_s(t, src, dst).unwrap_or(f64::NAN),
            report.memcpy_gb_s(t, dst, src).unwrap_or(f64::NAN)
        );
    }
    println!(
        "Each figure is the best of {} runs; ratios are to memcpy with as many threads in the same direction (both, for the swaps).",
        report.repeat
    );
    println!(
        "threads = move_pages callers at once. exchange (paired) = pairs of batches, each demotion batch followed by its \
         partners' promotion batch, as the live machine exchanges; two one-way = every demotion, then every promotion; \
         exch/1way = the first's GB/s over the second's."
    );
    for n in &notes {
        println!("note: {n}");
    }
    if let Some(summary) = &report.summary {
        println!("{}", summary.line());
    }
    if let Some(path) = &args.json {
        crate::write_json(path, &report)?;
    }
    if let Some(path) = &args.plot {
        crate::plots::live_migration(path, &report)?;
    }
    let failed =
        report.cells.iter().filter(|c| matches!(c.outcome, bench_migrate::Outcome::Failed { .. })).count();
    if failed > 0 {
        anyhow::bail!("{failed} cells failed (see the notes above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small ratio shows its first significant digit; others keep two decimals.
    #[test]
    fn a_small_ratio_is_not_printed_as_none() {
        assert_eq!(figure(0.170, 0.0042), "   0.170 GB/s 0.004x");
        assert_eq!(figure(0.170, 0.00042), "   0.170 GB/s 0.0004x");
        assert_eq!(figure(1.5, 0.25), "   1.500 GB/s  0.25x");
        assert_eq!(figure(1.5, 0.0), "   1.500 GB/s  0.00x");
    }

    fn args(simulated: bool, json: Option<std::path::PathBuf>) -> MigrateArgs {
        MigrateArgs {
            simulated,
            profile: None,
            mib: 8,
            threads: 2,
            batches: vec![64, 512],
            repeat: 1,
            json,
            plot: None,
        }
    }

    /// The live benchmark needs two memory nodes: on a host with one (the development and CI
    /// machines) it refuses, saying where to go instead; on a host with two (the guest) it finds
    /// the pair to move between. Either way the test checks something.
    #[cfg(all(feature = "live", target_os = "linux"))]
    #[test]
    fn live_migrate_bench_refuses_a_single_node_host_and_takes_a_two_node_one() {
        let nodes = bench_migrate::memory_nodes().unwrap();
        if nodes.len() >= 2 {
            let opts =
                bench_migrate::Options { mib: 8, max_threads: 1, batches: vec![64], nodes: None, repeat: 1 };
            assert_eq!(bench_migrate::check(&opts).unwrap(), (nodes[0], nodes[1]));
            return;
        }
        let e = format!("{:#}", migrate_live(&args(false, None)).unwrap_err());
        assert!(
            e.contains("needs two NUMA nodes") && e.contains("tests/vm") && e.contains("--simulated"),
            "{e}"
        );
    }

    #[test]
    fn simulated_migrate_bench_writes_every_cell() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grid.json");
        migrate_simulated(&args(true, Some(path.clone()))).unwrap();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2 * 2 * 2 * 3);
        assert!(cells.iter().all(|c| c["gb_s"].as_f64().unwrap() > 0.0));
        assert_eq!(v["copy"].as_array().unwrap().len(), 2);
    }

    /// The default batches (1 to 512) serve the simulated grid too, as the command line gives them.
    #[test]
    fn the_default_batches_are_1_to_512_and_the_simulated_grid_takes_them() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: MigrateArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grid.json");
        let cli = <Cli as clap::Parser>::try_parse_from([
            "migrate",
            "--simulated",
            "--mib",
            "8",
            "--threads",
            "1",
            "--json",
            path.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(cli.args.batches, [1, 8, 64, 512]);
        #[cfg(all(feature = "live", target_os = "linux"))]
        assert_eq!(cli.args.batches, bench_migrate::DEFAULT_BATCHES);
        migrate_simulated(&cli.args).unwrap();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2 * 4 * 3);
        assert!(cells.iter().all(|c| c["gb_s"].as_f64().unwrap() > 0.0));
        let batches: std::collections::BTreeSet<u64> =
            cells.iter().map(|c| c["batch_pages"].as_u64().unwrap()).collect();
        assert_eq!(batches.into_iter().collect::<Vec<_>>(), [1, 8, 64, 512]);
    }

    #[test]
    fn odd_sizes_are_refused() {
        let mut a = args(true, None);
        a.mib = 6;
        assert!(migrate_simulated(&a).unwrap_err().to_string().contains("multiple of 4"));
    }
}
