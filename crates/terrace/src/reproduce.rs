//! `terrace reproduce`: every table of docs/policies.md that comes from simulated runs, made from
//! the runs. Each table is printed as the markdown the doc holds, between
//! `<!-- reproduce: NAME -->` and `<!-- /reproduce -->`; `--check FILE` compares every marked
//! block of FILE with what the runs give now, and `--write FILE` rewrites the blocks in place.
//!
//! The runs are `terrace compare`'s (`compare::run_all`: in parallel, one progress bar) with
//! generator seed 1 (`--seed` prints the tables at another), on each table's machine: the default
//! profile with each workload's seed-sized fast tier for the Optane seeds, the remote-socket
//! profile with half of each footprint fast for Nimble. Everything derived
//! (geometric means, ratios, hit rates, improvements of average access latency) is computed here
//! from the runs. The seeds' figures are constants below, each citing its section: they are the
//! seeds' data, not values fitted to anything.

use crate::compare::{run_all, Run};
use crate::headlines::{self, Cells};
use crate::run_spec::MachineArgs;
use crate::table::human_time;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use terrace_sim::{human_bytes, RunReport};

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Compare every marked table of FILE with what the runs give now; exit 1 naming each table
    /// that differs, with a short diff.
    #[arg(long, value_name = "FILE", conflicts_with = "write")]
    pub check: Option<PathBuf>,
    /// Rewrite every marked table of FILE in place; nothing outside the markers changes.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Only these tables (comma-separated or repeated; `--list` names them).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Name every table, what it reproduces and how many runs it takes; run nothing.
    #[arg(long, conflicts_with_all = ["check", "write"])]
    pub list: bool,
    /// Seed of the workload generators in every run. The doc's tables are seed 1's; another seed
    /// prints the same tables from other draws of the workloads' random choices, to show how much
    /// a figure rests on one draw (docs/policies.md, "Headlines against the seeds").
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = crate::run_spec::parse_seed)]
    pub seed: u64,
}

/// A table's (workload, policy) runs.
type RunList = fn() -> Vec<(String, String)>;

/// One generated table of docs/policies.md.
struct Table {
    name: &'static str,
    /// What it reproduces: the doc's section and the seed's.
    what: &'static str,
    /// The (workload, policy) runs it is made from.
    runs: RunList,
    render: fn(&Runs) -> String,
    /// The simulated machine its runs use.
    machine: Machine,
    /// Further machines its runs are repeated on (a sweep of fast-tier sizes), each read with
    /// [`Runs::on`].
    sweep: &'static [Machine],
    /// The runs on the sweep's machines, where they are not `runs`: a table whose rows come from
    /// runs on different machines.
    sweep_runs: Option<RunList>,
}

impl Table {
    /// The (workload, policy) runs the table takes on `machine`, one of its own.
    fn runs_on(&self, machine: Machine) -> Vec<(String, String)> {
        match self.sweep_runs {
            Some(runs) if machine != self.machine => runs(),
            _ => (self.runs)(),
        }
    }
    /// Its machine, then its sweep's.
    fn machines(&self) -> Vec<Machine> {
        let mut machines = vec![self.machine];
        machines.extend(self.sweep.iter().filter(|m| **m != self.machine));
        machines
    }
}

/// A reproduction's machine: a profile, a fast tier, a size and which of a seed's repeated runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Machine {
    profile: &'static str,
    /// A share of each footprint ("50%"); `None`: each workload's seed-sized fast tier.
    fast_capacity: Option<&'static str>,
    /// The workloads' size scale as a fraction (numerator, denominator): `(1, 1)` as built,
    /// `(1, 16)` for a workload whose seed-long runs are affordable only smaller, `(183, 2)` for
    /// one run at its seed's size.
    scale: (u32, u32),
    /// Which of a seed's repeated runs this is: the generators' seed is `--seed` plus it, so a
    /// repeat draws the workload's random choices (GUPS's hot set, its updates) again, as the
    /// seed's repeated runs did. 0 for every table whose seed gives no repeats.
    repeat: u64,
}

/// The machine of every reproduction of a seed that ran on Optane: the default profile, each
/// workload's seed-sized DRAM.
const SEED_DRAM: Machine =
    Machine { profile: terrace_sim::DEFAULT_PROFILE, fast_capacity: None, scale: (1, 1), repeat: 0 };
/// The four more runs of GUPS on [`SEED_DRAM`]: HPWP §6.2 reports GUPS "averaged over 5 runs",
/// and here, as there, a run's hot set lies where its draw puts it (docs/policies.md, "hemem and
/// hpwp on the simulator").
const GUPS_REPEATS: [Machine; 4] = [
    Machine { repeat: 1, ..SEED_DRAM },
    Machine { repeat: 2, ..SEED_DRAM },
    Machine { repeat: 3, ..SEED_DRAM },
    Machine { repeat: 4, ..SEED_DRAM },
];
/// Ambix §5.5.3's machine for NPB at NPB's own iteration counts (BT 250, MG 50, CG 100): each
/// workload at a quarter of its size, so that the runs cost less than 32 iterations at full size
/// did. A smaller size scales time constants and page budgets with it (docs/model.md §9);
/// docs/policies.md ("Ambix §5.5.3") measures what the quarter changes against the full size.
const NPB_MACHINE: Machine =
    Machine { profile: terrace_sim::DEFAULT_PROFILE, fast_capacity: None, scale: (1, 4), repeat: 0 };
/// Nimble's end-to-end setting (§4.3) on the remote-socket profile: a remote socket as the slow
/// tier, local memory half the footprint.
const NIMBLE_MACHINE: Machine =
    Machine { profile: "remote-socket", fast_capacity: Some("50%"), scale: (1, 1), repeat: 0 };
/// The same setting on Nimble's own machine (§4.1, Table 1: the nimble-xeon profile).
const NIMBLE_XEON: Machine =
    Machine { profile: "nimble-xeon", fast_capacity: Some("50%"), scale: (1, 1), repeat: 0 };

/// Every table, in the doc's order.
const TABLES: &[Table] = &[
    Table {
        name: "builtin",
        what: "The built-in comparison: `terrace compare`, the suite under the default comparison",
        runs: builtin_runs,
        render: builtin,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "hpwp-gups",
        what: "hemem and hpwp on the simulator: GUPS across hot-set sizes (HPWP §6.2, Fig 8)",
        runs: gups_runs,
        render: hpwp_gups,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "hpwp-gups-summary",
        what: "hemem and hpwp on the simulator: hpwp against hemem per hot set over 5 runs, beside HPWP §6.2",
        runs: gups_runs,
        render: hpwp_gups_summary,
        machine: SEED_DRAM,
        sweep: &GUPS_REPEATS,
        sweep_runs: Some(gups_repeat_runs),
    },
    Table {
        name: "kernel-tiering",
        what: "kernel-tiering on the simulator: the suite under first-touch, kernel-tiering, oracle",
        runs: kernel_tiering_runs,
        render: kernel_tiering,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "kernel-tiering-setup",
        what: "kernel-tiering at the tiering branch's rate limit against Linux's default, on Ambix §5.5's headlines",
        runs: kernel_tiering_setup_runs,
        render: kernel_tiering_setup,
        machine: SEED_DRAM,
        sweep: &[NPB_MACHINE],
        sweep_runs: Some(kernel_tiering_setup_npb_runs),
    },
    Table {
        name: "npb",
        what: "Ambix §5.5.3: NPB speedup over first-touch, geometric mean of BT, FT, MG, CG",
        runs: npb_runs,
        render: npb,
        machine: NPB_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "npb-kernels",
        what: "Ambix §5.5.3: NPB speedup over first-touch per kernel and size",
        runs: npb_runs,
        render: npb_kernels,
        machine: NPB_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "npb-hits",
        what: "Ambix §5.5.3, Table 5.2: NPB fast-tier hit rates",
        runs: npb_runs,
        render: npb_hits,
        machine: NPB_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "bfs",
        what: "Ambix §5.5.2: GAP BFS throughput against first-touch",
        runs: bfs_runs,
        render: bfs,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "bfs-placement",
        what: "Ambix §5.5.2: GAP BFS, where first touch leaves the run's arrays after the builder, and the moves",
        runs: bfs_placement_runs,
        render: bfs_placement,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "pmbench",
        what: "Ambix §5.5.1: pmbench, improvement of average access latency over first-touch, every point",
        runs: pmbench_runs,
        render: pmbench,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "pmbench-seed",
        what:
            "Ambix §5.5.1: each figure the seed states about pmbench, beside the same statistic of the model",
        runs: pmbench_runs,
        render: pmbench_seed,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "kvstore",
        what: "HPWP §6.3: the FlexKVS-like store across SET shares",
        runs: kvstore_runs,
        render: kvstore,
        machine: SEED_DRAM,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "nimble-fig12",
        what: "Nimble §4.4, Fig. 12: speedup over all-remote of the migration configurations, local = half",
        runs: nimble_runs,
        render: nimble_fig12,
        machine: NIMBLE_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "nimble-fig13",
        what:
            "Nimble §4.4, Fig. 13: the configurations as local memory goes from 1/8 to 7/8 of the footprint",
        runs: nimble_sweep_runs,
        render: nimble_fig13,
        machine: NIMBLE_MACHINE,
        sweep: &NIMBLE_SWEEP,
        sweep_runs: None,
    },
    Table {
        name: "nimble-fig12-xeon",
        what: "Nimble §4.4, Fig. 12 on the seed's own machine (nimble-xeon, Table 1)",
        runs: nimble_runs,
        render: nimble_fig12,
        machine: NIMBLE_XEON,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "nimble-fig13-xeon",
        what: "Nimble §4.4, Fig. 13 on the seed's own machine (nimble-xeon, Table 1)",
        runs: nimble_sweep_runs,
        render: nimble_fig13_xeon,
        machine: NIMBLE_XEON,
        sweep: &NIMBLE_SWEEP_XEON,
        sweep_runs: None,
    },
    Table {
        name: "mtier-shootdowns",
        what: "mtier §5.2.1, Table 5.1 and Fig. 5.4: TLB shootdowns of mtier, heavy and mbind",
        runs: mtier_shootdown_runs,
        render: mtier_shootdowns,
        machine: MTIER_MACHINE,
        sweep: &[MTIER_THESIS_SIZE],
        sweep_runs: None,
    },
    Table {
        name: "mtier-move-cost",
        what: "mtier §5.2.2, Fig. 5.5: one page's movement by kind, from the model (no runs)",
        runs: Vec::new,
        render: mtier_move_cost,
        machine: MTIER_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "mtier-epochs",
        what: "mtier §5.3, Figs. 5.6-5.7: run time over all-local from 50 ms to 1 s epochs",
        runs: mtier_epoch_runs,
        render: mtier_epochs,
        machine: MTIER_EPOCH_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "mtier-pool",
        what: "mtier §5.4, Fig. 5.8: run time over all-local from a pool of 12.5% to all of the footprint",
        runs: mtier_pool_runs,
        render: mtier_pool,
        machine: MTIER_MACHINE,
        sweep: &MTIER_POOLS,
        sweep_runs: None,
    },
    Table {
        name: "mtier-threads",
        what: "mtier §5.5, Figs. 5.9-5.10: run time over all-local at 1 to 6 threads",
        runs: mtier_runs,
        render: mtier_threads,
        machine: MTIER_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
    Table {
        name: "objects-fig4",
        what: "object tiering §5.3.2, Fig. 4: speedup over first-touch of each priority and trigger at fast tiers of 12.5, 25 and 50%",
        runs: objects_fig4_runs,
        render: objects_fig4,
        machine: OBJECTS_CAPS[1],
        sweep: &OBJECTS_CAPS,
        sweep_runs: None,
    },
    Table {
        name: "objects-fig4-apps",
        what: "object tiering §5.3.2, Fig. 4 as a mean over the seed's seven applications, each as Table 3 paces it",
        runs: objects_fig4_apps_runs,
        render: objects_fig4_apps,
        machine: OBJECTS_CAPS[1],
        sweep: &OBJECTS_CAPS,
        sweep_runs: None,
    },
    Table {
        name: "objects-fig7",
        what: "object tiering §5.4.1, Fig. 7: proactive placement against the reactive policy",
        runs: objects_fig7_runs,
        render: objects_fig7,
        machine: OBJECTS_CAPS[1],
        sweep: &OBJECTS_CAPS,
        sweep_runs: None,
    },
    Table {
        name: "objects-fig8",
        what: "object tiering §5.5, Fig. 8: two programs by priority against each bound to a tier",
        runs: objects_fig8_runs,
        render: objects_fig8,
        machine: OBJECTS_PAIR_MACHINE,
        sweep: &[],
        sweep_runs: None,
    },
];

const FIRST_TOUCH: &str = "first-touch";
/// Every page in the fast tier: the seeds' all-DRAM "default", All Local, all-local.
const ALL_FAST: &str = "all-fast";

/// Every report of a reproduction's runs, by machine, workload and policy.
type Reports = HashMap<(Machine, String, String), RunReport>;

/// The reports a table reads: those of its machine, and through [`Runs::on`] of its sweep's.
struct Runs<'a> {
    all: &'a Reports,
    machine: Machine,
}

impl<'a> Runs<'a> {
    /// The same runs on another machine of the table's sweep.
    fn on(&self, machine: Machine) -> Runs<'a> {
        Runs { all: self.all, machine }
    }
    fn get(&self, workload: &str, policy: &str) -> &'a RunReport {
        self.all
            .get(&(self.machine, workload.to_string(), policy.to_string()))
            .unwrap_or_else(|| panic!("no run of {workload} under {policy}: its table's runs must list it"))
    }
    fn time(&self, workload: &str, policy: &str) -> f64 {
        self.get(workload, policy).runtime_ns
    }
    /// Speedup over first-touch (above 1: faster).
    fn speedup(&self, workload: &str, policy: &str) -> f64 {
        self.time(workload, FIRST_TOUCH) / self.time(workload, policy)
    }
    /// Run time per access: pmbench's average access latency, up to its 32 threads.
    fn aal(&self, workload: &str, policy: &str) -> f64 {
        let r = self.get(workload, policy);
        r.runtime_ns / r.accesses.max(1) as f64
    }
}

fn grid(workloads: &[String], policies: &[&str]) -> Vec<(String, String)> {
    workloads.iter().flat_map(|w| policies.iter().map(move |p| (w.clone(), p.to_string()))).collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A markdown table.
pub(crate) fn md(header: &[&str], rows: &[Vec<String>]) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let mut s = line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    s.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for r in rows {
        debug_assert_eq!(r.len(), header.len());
        s.push_str(&line(r));
    }
    s
}

fn times(v: f64) -> String {
    format!("{v:.2}x")
}

/// A signed whole percentage: `+47%`, `-2%`, `0%`.
fn pct(v: f64) -> String {
    let r = (v * 100.0).round();
    if r == 0.0 {
        "0%".into()
    } else {
        format!("{:+}%", r as i64)
    }
}

/// A signed percentage with one decimal: `+2.7%`.
fn pct1(v: f64) -> String {
    format!("{:+.1}%", v * 100.0)
}

/// A share as a whole percentage, unsigned: `69`.
fn share(v: f64) -> String {
    format!("{:.0}", v * 100.0)
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn geomean(xs: &[f64]) -> f64 {
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

// ---- The built-in comparison ----

fn suite() -> Vec<String> {
    names(terrace_workloads::DEFAULT_SUITE)
}

fn builtin_runs() -> Vec<(String, String)> {
    grid(&suite(), terrace_policy::registry::DEFAULT_COMPARISON)
}

fn builtin(runs: &Runs) -> String {
    let policies = terrace_policy::registry::DEFAULT_COMPARISON;
    let mut header = vec!["workload"];
    header.extend(policies.iter().map(|p| if *p == FIRST_TOUCH { "first-touch (run time)" } else { p }));
    let rows: Vec<Vec<String>> = suite()
        .iter()
        .map(|w| {
            let mut row = vec![w.clone()];
            row.extend(policies.iter().map(|p| {
                if *p == FIRST_TOUCH {
                    human_time(runs.time(w, p))
                } else {
                    times(runs.speedup(w, p))
                }
            }));
            row
        })
        .collect();
    md(&header, &rows)
}

// ---- hemem and hpwp on GUPS ----

/// The GUPS hot-set sweep: (workload, hot set MiB). HPWP §6.2 (Fig 8) sweeps hot sets below and
/// above its 48 GB of DRAM without giving the sizes; 8 MiB is its main experiment's.
const GUPS_HOT_SETS: [(&str, u64); 4] =
    [("gups", 8), ("gups-hot16", 16), ("gups-hot32", 32), ("gups-hot64", 64)];
const HEMEM_HPWP: [&str; 3] = ["hemem", "hpwp", FIRST_TOUCH];

fn gups_runs() -> Vec<(String, String)> {
    grid(&GUPS_HOT_SETS.iter().map(|(w, _)| w.to_string()).collect::<Vec<_>>(), &HEMEM_HPWP)
}

/// One row per run: the columns `terrace compare` prints that the doc discusses.
fn detail_rows(runs: &Runs, workloads: &[String], policies: &[&str], stall: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for w in workloads {
        for p in policies {
            let r = runs.get(w, p);
            let mut row = vec![
                w.clone(),
                p.to_string(),
                human_time(r.runtime_ns),
                times(runs.speedup(w, p)),
                crate::table::percent(r.fast_read_hit_rate()),
                crate::table::percent(r.fast_write_hit_rate()),
                human_bytes(r.slow_bytes_written()),
                human_bytes(r.bytes_migrated),
                human_time(r.migration_ns),
            ];
            if stall {
                row.push(human_time(r.tracking_ns));
                row.push(human_time(r.move_wait_ns));
                row.push(human_time(r.stall_ns));
            }
            rows.push(row);
        }
    }
    rows
}

const DETAIL_HEADER: [&str; 9] = [
    "workload",
    "policy",
    "run time",
    "vs first-touch",
    "fast hit R",
    "fast hit W",
    "slow written",
    "migrated",
    "t migrate",
];

fn hpwp_gups(runs: &Runs) -> String {
    let workloads: Vec<String> = GUPS_HOT_SETS.iter().map(|(w, _)| w.to_string()).collect();
    md(&DETAIL_HEADER, &detail_rows(runs, &workloads, &HEMEM_HPWP, false))
}

/// HPWP thesis §6.2 (Fig 8, hot-set sweep): HPWP "performs up to 13% better" than HeMem in GUPS
/// "with twice as many page migrations".
const SEED_HPWP_GUPS_GAIN: &str = "up to +13%";
const SEED_HPWP_GUPS_MIGRATIONS: &str = "about 2x";

/// hemem and hpwp on each repeat of GUPS (the first run's first-touch is in [`gups_runs`]).
fn gups_repeat_runs() -> Vec<(String, String)> {
    grid(&GUPS_HOT_SETS.iter().map(|(w, _)| w.to_string()).collect::<Vec<_>>(), &HEMEM_HPWP[..2])
}

/// hpwp's gain over hemem per hot set, the mean over the 5 runs as HPWP §6.2 averages its 5,
/// with the range the runs span; the migrated bytes summed over the runs.
fn hpwp_gups_summary(runs: &Runs) -> String {
    let repeats: Vec<Runs> = std::iter::once(runs.machine).chain(GUPS_REPEATS).map(|m| runs.on(m)).collect();
    let mut rows: Vec<Vec<String>> = GUPS_HOT_SETS
        .iter()
        .map(|(w, hot)| {
            let fast = runs.get(w, "hemem").fast_capacity_bytes as f64 / f64::from(1 << 20);
            let gains: Vec<f64> =
                repeats.iter().map(|r| r.time(w, "hemem") / r.time(w, "hpwp") - 1.0).collect();
            let bytes = |p: &str| repeats.iter().map(|r| r.get(w, p).bytes_migrated).sum::<u64>();
            let (low, high) =
                gains.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), g| (l.min(*g), h.max(*g)));
            vec![
                w.to_string(),
                format!("{hot} MiB ({:.2}x the fast tier)", *hot as f64 / fast),
                pct1(mean(&gains)),
                format!("{} to {}", pct1(low), pct1(high)),
                times(bytes("hpwp") as f64 / bytes("hemem").max(1) as f64),
            ]
        })
        .collect();
    rows.push(vec![
        "seed (HPWP §6.2, Fig 8)".into(),
        "below and above DRAM (sizes not given)".into(),
        SEED_HPWP_GUPS_GAIN.into(),
        "not given".into(),
        SEED_HPWP_GUPS_MIGRATIONS.into(),
    ]);
    md(
        &[
            "workload",
            "hot set",
            "hpwp vs hemem, mean of 5 runs",
            "the runs' range",
            "migrated, hpwp / hemem",
        ],
        &rows,
    )
}

// ---- kernel-tiering on the simulator ----

const KERNEL_TIERING: [&str; 3] = [FIRST_TOUCH, "kernel-tiering", "oracle"];

fn kernel_tiering_runs() -> Vec<(String, String)> {
    grid(&suite(), &KERNEL_TIERING)
}

fn kernel_tiering(runs: &Runs) -> String {
    let mut header = DETAIL_HEADER.to_vec();
    header.extend(["t track", "t wait", "stall"]);
    md(&header, &detail_rows(runs, &suite(), &KERNEL_TIERING, true))
}

// ---- kernel-tiering as the Ambix seed set it up ----

/// The Ambix thesis's autonuma: the tiering-0.4 patch set up "as proposed in the documentation,
/// using the recommended settings for performance experiments" (§5.3.1). The tiering branches'
/// setup document enables promotion with `numa_balancing = 2` and
/// `numa_balancing_rate_limit_mbps = 30` (docs/policies.md, "kernel-tiering"), so the Ambix
/// tables run kernel-tiering at that limit; the suite's own tables and Fig. 8's LTP (whose seed
/// set 65536) run Linux's default.
const AUTONUMA_SETUP: &str = "kernel-tiering:rate_limit=30";

/// The pmbench points of Ambix §5.5.1's means (64-240 GB, every read share) at one σ.
fn pmbench_seed_points(sigma: &str) -> Vec<String> {
    PMBENCH_READS.iter().flat_map(|r| ["x2", "x4", "x8"].map(|size| pmbench_name(sigma, *r, size))).collect()
}

/// The setting's runs on the seed's machine: BFS and pmbench.
fn kernel_tiering_setup_runs() -> Vec<(String, String)> {
    let mut workloads = bfs_workloads();
    workloads.extend(pmbench_seed_points("s12"));
    workloads.extend(pmbench_seed_points("s25"));
    grid(&workloads, &KERNEL_TIERING_SETTINGS)
}

/// The setting's NPB runs, on NPB's machine as the NPB tables.
fn kernel_tiering_setup_npb_runs() -> Vec<(String, String)> {
    grid(&npb_workloads(), &KERNEL_TIERING_SETTINGS)
}

const KERNEL_TIERING_SETTINGS: [&str; 3] = [FIRST_TOUCH, "kernel-tiering", AUTONUMA_SETUP];

/// Ambix §5.5's kernel-tiering headlines (the "Headlines" table's rows) under Linux's default rate
/// limit and under the tiering branch's documented 30 MiB/s, which the Ambix tables run.
fn kernel_tiering_setup(runs: &Runs) -> String {
    let npb_runs = runs.on(NPB_MACHINE);
    let npb = |size: &str, p: &str| match size {
        "medium and large" => {
            mean(&[npb_geomean(&npb_runs, "medium", p), npb_geomean(&npb_runs, "large", p)])
        }
        _ => npb_geomean(&npb_runs, size, p),
    };
    let bfs = |p: &str| mean(&bfs_workloads().iter().map(|w| runs.speedup(w, p) - 1.0).collect::<Vec<_>>());
    let pmbench = |sigma: &str, p: &str| {
        mean(&pmbench_seed_points(sigma).iter().map(|w| aal_improvement(runs, w, p)).collect::<Vec<_>>())
    };
    let row = |what: &str, seed: String, f: &dyn Fn(&str) -> String| {
        vec![what.to_string(), seed, f("kernel-tiering"), f(AUTONUMA_SETUP)]
    };
    let rows = vec![
        row(
            "§5.5.3 NPB small: speedup over first-touch (geometric mean of 4)",
            times(geomean(&SEED_NPB_SMALL_AUTONUMA)),
            &|p| times(npb("small", p)),
        ),
        row(
            "§5.5.3 NPB medium and large: the same, mean of the two sizes",
            format!("{}x", SEED_NPB_MEDIUM_AND_LARGE[0]),
            &|p| times(npb("medium and large", p)),
        ),
        row(
            "§5.5.2 BFS: mean change in throughput over the three sizes",
            SEED_BFS_MEAN[2].to_string(),
            &|p| pct(bfs(p)),
        ),
        row("§5.5.1 pmbench σ 12.5%, 64-240 GB: mean improvement of AAL", "+18%".to_string(), &|p| {
            pct(pmbench("s12", p))
        }),
        row("§5.5.1 pmbench σ 25%, the same points", "+5%".to_string(), &|p| pct(pmbench("s25", p))),
    ];
    md(
        &[
            "Ambix headline (autonuma over first-touch)",
            "seed",
            "kernel-tiering (65536 MiB/s, Linux's default)",
            "kernel-tiering:rate_limit=30 (the tiering branch's setup)",
        ],
        &rows,
    )
}

// ---- Ambix §5.5.3: NPB ----

const NPB_KERNELS: [&str; 4] = ["bt", "ft", "mg", "cg"];
const NPB_SIZES: [&str; 3] = ["small", "medium", "large"];
const NPB_POLICIES: [&str; 5] = [FIRST_TOUCH, "memory-mode", AUTONUMA_SETUP, "ambix", ALL_FAST];

fn npb_name(kernel: &str, size: &str) -> String {
    format!("npb-{kernel}-{size}")
}

/// Every NPB workload, `npb-KERNEL-SIZE`.
fn npb_workloads() -> Vec<String> {
    NPB_KERNELS.iter().flat_map(|k| NPB_SIZES.iter().map(move |s| npb_name(k, s))).collect()
}

fn npb_runs() -> Vec<(String, String)> {
    grid(&npb_workloads(), &NPB_POLICIES)
}

/// Ambix thesis §5.5.3, "Medium and Large Parametrizations": speedup over ADM-default, the
/// geometric mean of BT, FT, MG and CG (NPBAVG), as (MemM, autonuma, ambix).
const SEED_NPB_MEDIUM: [f64; 3] = [1.5, 1.3, 2.7];
const SEED_NPB_LARGE: [f64; 3] = [2.8, 1.8, 4.4];
/// Ambix thesis §5.5.3: "In all medium and large workloads, ambix has an average speedup of 3.6x,
/// compared to autonuma's 1.6x" (the mean of the two sizes' figures), as (autonuma, ambix).
const SEED_NPB_MEDIUM_AND_LARGE: [f64; 2] = [1.6, 3.6];
/// Ambix thesis §5.5.3, "Small Workloads": MemM "an average 1.4% throughput penalty"; autonuma
/// "identical performance to ADM-default in the FT, MG, and CG workloads, but ... 60% lower
/// throughput in the BT workload"; ambix performs "identically" to MemM on average.
const SEED_NPB_SMALL_MEMM: f64 = 0.986;
const SEED_NPB_SMALL_AUTONUMA: [f64; 4] = [0.4, 1.0, 1.0, 1.0];

fn npb_geomean(runs: &Runs, size: &str, policy: &str) -> f64 {
    geomean(&NPB_KERNELS.iter().map(|k| runs.speedup(&npb_name(k, size), policy)).collect::<Vec<_>>())
}

fn npb(runs: &Runs) -> String {
    // The seed's figures as it gives them; autonuma's small one is derived (the geometric mean
    // of its per-kernel statements), so it is rounded like the model's.
    let seed = |s: [f64; 3]| format!("{}x / {}x / {}x", s[0], s[1], s[2]);
    let small = format!(
        "{SEED_NPB_SMALL_MEMM}x / {} / {SEED_NPB_SMALL_MEMM}x",
        times(geomean(&SEED_NPB_SMALL_AUTONUMA))
    );
    let mut rows = Vec::new();
    for (size, seed_cell) in
        [("small", small), ("medium", seed(SEED_NPB_MEDIUM)), ("large", seed(SEED_NPB_LARGE))]
    {
        let mut row = vec![size.to_string()];
        row.extend(
            ["memory-mode", AUTONUMA_SETUP, "ambix"].iter().map(|p| times(npb_geomean(runs, size, p))),
        );
        row.push(seed_cell);
        rows.push(row);
    }
    let both = |p: &str| times(mean(&[npb_geomean(runs, "medium", p), npb_geomean(runs, "large", p)]));
    rows.push(vec![
        "medium and large (mean of the two)".into(),
        both("memory-mode"),
        both(AUTONUMA_SETUP),
        both("ambix"),
        format!("- / {}x / {}x", SEED_NPB_MEDIUM_AND_LARGE[0], SEED_NPB_MEDIUM_AND_LARGE[1]),
    ]);
    md(&["size", "memory-mode", AUTONUMA_SETUP, "ambix", "seed (MemM / autonuma / ambix)"], &rows)
}

/// What Ambix thesis §5.5.3 says of single kernels, by (kernel, size). "Small Workloads": autonuma
/// -60% on BT and equal to ADM-default on FT, MG and CG; MemM "up to a 3% drop in the
/// write-intensive FT". "Medium and Large": ambix "an average 1.25x speedup" on BT where autonuma
/// "fails to improve" it; on CG autonuma "grants better performance than ambix in the medium
/// parametrization, but falls off in the large one, with a 3x vs. 10x speedup".
fn seed_npb_kernel(kernel: &str, size: &str) -> &'static str {
    match (kernel, size) {
        ("bt", "small") => "autonuma 0.40x",
        ("bt", _) => "ambix 1.25x (mean of medium and large); autonuma no gain",
        ("ft", "small") => "MemM 0.97x; autonuma 1.00x",
        ("mg" | "cg", "small") => "autonuma 1.00x",
        ("cg", "medium") => "autonuma ahead of ambix",
        ("cg", "large") => "ambix 10x; autonuma 3x",
        _ => "-",
    }
}

fn npb_kernels(runs: &Runs) -> String {
    let mut rows = Vec::new();
    for k in NPB_KERNELS {
        for s in NPB_SIZES {
            let w = npb_name(k, s);
            let mut row = vec![k.to_uppercase(), s.to_string()];
            row.extend(
                ["memory-mode", AUTONUMA_SETUP, "ambix", ALL_FAST].iter().map(|p| times(runs.speedup(&w, p))),
            );
            row.push(seed_npb_kernel(k, s).to_string());
            rows.push(row);
        }
    }
    md(&["kernel", "size", "memory-mode", AUTONUMA_SETUP, "ambix", ALL_FAST, "seed"], &rows)
}

/// Ambix thesis Table 5.2: DRAM hit rates in percent, (all accesses, writes), each as
/// (ADM-default, autonuma, ambix), by kernel and size; PCM counts, migration traffic included.
const SEED_TABLE_5_2: [(&str, &str, [u32; 3], [u32; 3]); 12] = [
    ("bt", "small", [100, 53, 100], [100, 35, 100]),
    ("bt", "medium", [77, 42, 95], [55, 16, 95]),
    ("bt", "large", [51, 36, 83], [26, 14, 92]),
    ("ft", "small", [100, 100, 100], [100, 100, 100]),
    ("ft", "medium", [29, 78, 93], [24, 79, 94]),
    ("ft", "large", [7, 82, 88], [5, 83, 89]),
    ("mg", "small", [100, 100, 98], [100, 100, 99]),
    ("mg", "medium", [45, 44, 48], [43, 42, 49]),
    ("mg", "large", [29, 28, 31], [28, 28, 30]),
    ("cg", "small", [100, 100, 100], [100, 100, 100]),
    ("cg", "medium", [28, 72, 90], [95, 96, 91]),
    ("cg", "large", [2, 54, 77], [31, 37, 50]),
];
/// Ambix thesis Table 5.2's "Average" rows, by size.
const SEED_TABLE_5_2_AVERAGE: [(&str, [u32; 3], [u32; 3]); 3] = [
    ("small", [100, 88, 100], [100, 84, 100]),
    ("medium", [45, 59, 82], [54, 58, 82]),
    ("large", [22, 50, 70], [23, 41, 65]),
];
const NPB_HIT_POLICIES: [&str; 3] = [FIRST_TOUCH, AUTONUMA_SETUP, "ambix"];

fn npb_hits(runs: &Runs) -> String {
    let seed = |all: [u32; 3], writes: [u32; 3]| {
        format!("{}/{}/{} \\| {}/{}/{}", all[0], all[1], all[2], writes[0], writes[1], writes[2])
    };
    let mut rows = Vec::new();
    for (k, s, all, writes) in SEED_TABLE_5_2 {
        let w = npb_name(k, s);
        let mut row = vec![k.to_uppercase(), s.to_string()];
        row.extend(NPB_HIT_POLICIES.iter().map(|p| {
            let r = runs.get(&w, p);
            format!("{} \\| {}", share(r.fast_hit_rate()), share(r.fast_write_hit_rate()))
        }));
        let (all_copies, writes_copies) = runs.get(&w, "ambix").fast_hit_rates_with_copies();
        row.push(format!("{} \\| {}", share(all_copies), share(writes_copies)));
        row.push(seed(all, writes));
        rows.push(row);
    }
    for (s, all, writes) in SEED_TABLE_5_2_AVERAGE {
        let mut row = vec!["mean".to_string(), s.to_string()];
        row.extend(NPB_HIT_POLICIES.iter().map(|p| {
            let reports: Vec<&RunReport> = NPB_KERNELS.iter().map(|k| runs.get(&npb_name(k, s), p)).collect();
            let all = mean(&reports.iter().map(|r| r.fast_hit_rate()).collect::<Vec<_>>());
            let writes = mean(&reports.iter().map(|r| r.fast_write_hit_rate()).collect::<Vec<_>>());
            format!("{} \\| {}", share(all), share(writes))
        }));
        let with_copies: Vec<(f64, f64)> = NPB_KERNELS
            .iter()
            .map(|k| runs.get(&npb_name(k, s), "ambix").fast_hit_rates_with_copies())
            .collect();
        let all_copies = mean(&with_copies.iter().map(|r| r.0).collect::<Vec<_>>());
        let writes_copies = mean(&with_copies.iter().map(|r| r.1).collect::<Vec<_>>());
        row.push(format!("{} \\| {}", share(all_copies), share(writes_copies)));
        row.push(seed(all, writes));
        rows.push(row);
    }
    md(
        &[
            "kernel",
            "size",
            "first-touch (all \\| writes)",
            AUTONUMA_SETUP,
            "ambix",
            "ambix, counting its copies as the seed's do",
            "seed: ADM-default / autonuma / ambix (all \\| writes)",
        ],
        &rows,
    )
}

// ---- Ambix §5.5.2: BFS ----

const BFS_SIZES: [&str; 3] = ["small", "medium", "large"];
const BFS_POLICIES: [&str; 5] = [FIRST_TOUCH, "ambix", "ambix-noswitch", AUTONUMA_SETUP, "memory-mode"];
/// The dynamic configurations of the seed's Figure 5.2 (ambix without Switch is reported apart).
const BFS_DYNAMIC: [&str; 3] = ["ambix", AUTONUMA_SETUP, "memory-mode"];

/// Ambix thesis §5.5.2: the best dynamic configuration per size and its throughput against
/// ADM-default ("small MemM ... 6.8% lower", "medium ... ambix (17% lower)", "large ... autonuma
/// (10% lower)"); ADM-default is best at every size.
const SEED_BFS_BEST: [&str; 3] = ["MemM -6.8%", "ambix -17%", "autonuma -10%"];
/// Ambix thesis §5.5.2: mean throughput change over the three sizes, in BFS_POLICIES' order after
/// first-touch: ambix -17.6%, ambix with Switch off -2%, autonuma -16%, MemM -17.8%.
const SEED_BFS_MEAN: [&str; 4] = ["-17.6%", "-2%", "-16%", "-17.8%"];

/// The BFS workloads, `bfs-SIZE`.
fn bfs_workloads() -> Vec<String> {
    BFS_SIZES.iter().map(|s| format!("bfs-{s}")).collect()
}

fn bfs_runs() -> Vec<(String, String)> {
    grid(&bfs_workloads(), &BFS_POLICIES)
}

fn bfs(runs: &Runs) -> String {
    bfs_table(runs)
}

/// The policies whose placement the BFS placement table shows, after first-touch and all-fast.
const BFS_MOVERS: [&str; 2] = ["ambix", AUTONUMA_SETUP];

fn bfs_placement_runs() -> Vec<(String, String)> {
    let mut policies = vec![FIRST_TOUCH, ALL_FAST];
    policies.extend(BFS_MOVERS);
    grid(&bfs_workloads(), &policies)
}

/// Per size: the builder's peak (the footprint) and the BFS's arrays (144 of its 284 bytes a
/// vertex, docs/workloads.md), first-touch's fast-tier hits and how far all-fast is from it, and
/// the hits and moves of the policies that move pages.
fn bfs_placement(runs: &Runs) -> String {
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1 << 20));
    let mut rows = Vec::new();
    for (s, w) in BFS_SIZES.iter().zip(bfs_workloads()) {
        let ft = runs.get(&w, FIRST_TOUCH);
        let mut row = vec![
            s.to_string(),
            mib(ft.footprint_bytes),
            mib(ft.footprint_bytes / 284 * 144),
            format!("{} \\| {}", share(ft.fast_read_hit_rate()), share(ft.fast_write_hit_rate())),
            times(runs.speedup(&w, ALL_FAST)),
        ];
        for p in BFS_MOVERS {
            let r = runs.get(&w, p);
            row.push(format!("{}, {}", share(r.fast_read_hit_rate()), human_bytes(r.bytes_migrated)));
        }
        rows.push(row);
    }
    md(
        &[
            "size",
            "builder's peak",
            "BFS arrays",
            "first-touch hits, reads \\| writes (%)",
            "all-fast over first-touch",
            "ambix read hits (%), migrated",
            "kernel-tiering read hits (%), migrated",
        ],
        &rows,
    )
}

fn bfs_table(runs: &Runs) -> String {
    let change = |w: &str, p: &str| runs.speedup(w, p) - 1.0;
    let workloads = bfs_workloads();
    let mut rows = Vec::new();
    for ((s, w), seed_best) in BFS_SIZES.iter().zip(&workloads).zip(SEED_BFS_BEST) {
        let mut row = vec![s.to_string()];
        row.extend(BFS_POLICIES[1..].iter().map(|p| pct(change(w, p))));
        let best = BFS_DYNAMIC
            .iter()
            .max_by(|a, b| change(w, a).total_cmp(&change(w, b)))
            .expect("BFS_DYNAMIC is not empty");
        row.push(format!("{best} {}", pct(change(w, best))));
        row.push(seed_best.to_string());
        rows.push(row);
    }
    let mut row = vec!["mean".to_string()];
    row.extend(
        BFS_POLICIES[1..]
            .iter()
            .map(|p| pct(mean(&workloads.iter().map(|w| change(w, p)).collect::<Vec<_>>()))),
    );
    row.extend(["".into(), "".into()]);
    rows.push(row);
    let mut row = vec!["mean, seed".to_string()];
    row.extend(SEED_BFS_MEAN.iter().map(|c| c.to_string()));
    row.extend(["".into(), "".into()]);
    rows.push(row);
    md(
        &[
            "size",
            "ambix",
            "ambix-noswitch",
            AUTONUMA_SETUP,
            "memory-mode",
            "best dynamic, model",
            "best dynamic, seed",
        ],
        &rows,
    )
}

// ---- Ambix §5.5.1: pmbench ----

const PMBENCH_SIGMAS: [(&str, &str); 2] = [("s12", "12.5%"), ("s25", "25%")];
const PMBENCH_READS: [u32; 3] = [20, 50, 80];
/// The footprints: (workload suffix, the seed's array it stands for). Ambix §5.4.1 runs 32, 64,
/// 128 and 240 GB arrays on 27 GB of DRAM; the registry's 2x, 4x and 8x stand for the last three,
/// `32g` is the first, scaled; 1x (no page in the slow tier under first touch) is no seed size.
const PMBENCH_SIZES: [(&str, &str); 5] =
    [("x1", "-"), ("32g", "32 GB"), ("x2", "64 GB"), ("x4", "128 GB"), ("x8", "240 GB")];
const PMBENCH_POLICIES: [&str; 4] = [FIRST_TOUCH, "ambix", AUTONUMA_SETUP, "memory-mode"];

fn pmbench_name(sigma: &str, reads: u32, size: &str) -> String {
    format!("pmbench-{sigma}-r{reads}-{size}")
}

fn pmbench_runs() -> Vec<(String, String)> {
    let mut workloads = Vec::new();
    for (s, _) in PMBENCH_SIGMAS {
        for r in PMBENCH_READS {
            for (size, _) in PMBENCH_SIZES {
                workloads.push(pmbench_name(s, r, size));
            }
        }
    }
    grid(&workloads, &PMBENCH_POLICIES)
}

/// Improvement of average access latency over first-touch: 1 - AAL_policy / AAL_first-touch.
fn aal_improvement(runs: &Runs, workload: &str, policy: &str) -> f64 {
    1.0 - runs.aal(workload, policy) / runs.aal(workload, FIRST_TOUCH)
}

fn pmbench(runs: &Runs) -> String {
    let mut rows = Vec::new();
    for (s, sigma) in PMBENCH_SIGMAS {
        for r in PMBENCH_READS {
            for (size, seed_size) in PMBENCH_SIZES {
                let w = pmbench_name(s, r, size);
                let ft = runs.get(&w, FIRST_TOUCH);
                let mut row = vec![
                    sigma.to_string(),
                    format!("{r}%"),
                    format!(
                        "{} ({:.2}x)",
                        human_bytes(ft.footprint_bytes),
                        ft.footprint_bytes as f64 / ft.fast_capacity_bytes as f64
                    ),
                    seed_size.to_string(),
                    format!("{:.1} ns", runs.aal(&w, FIRST_TOUCH)),
                ];
                row.extend(PMBENCH_POLICIES[1..].iter().map(|p| pct(aal_improvement(runs, &w, p))));
                // What ambix's moves cost: the bytes, and the program's stall (shootdowns and tracking).
                let ambix = runs.get(&w, "ambix");
                row.extend([human_bytes(ambix.bytes_migrated), human_time(ambix.stall_ns)]);
                rows.push(row);
            }
        }
    }
    md(
        &[
            "σ",
            "reads",
            "footprint (x fast tier)",
            "seed size",
            "first-touch AAL",
            "ambix",
            AUTONUMA_SETUP,
            "memory-mode",
            "ambix migrated",
            "ambix stall",
        ],
        &rows,
    )
}

/// The figures Ambix thesis §5.5.1 states about pmbench (its Figure 5.1 is a plot without data),
/// as (statement, the seed's figure). "In the 64-240GB σ = 12.5% workloads ... ambix improves
/// AAL by 16%, while autonuma improves by 18%. ambix outperforms autonuma in the 64GB workloads,
/// by an average of 6.3%. However, it is outperformed by 12% in the 128GB workloads, with no
/// performance difference in the 240GB"; "In the 64-240GB σ = 25% workloads ... an average
/// improvement of 5 and 6%" (autonuma, ambix); MemM's "AAL is similar in the 64 and 128GB
/// parametrizations", "in the 240GB parametrization, MemM performance degrades by an average of
/// 46%", at σ 25% "its frequent cache replacements cause AAL to degrade past the static
/// ADM-default", and it is best "only ... in the write-intensive σ = 12.5% 128GB workload";
/// ADM-default's AAL "settling around the 128GB range" at σ 12.5%, and at 32 GB σ 25% "AAL
/// increases by an average of 25% across all read/write distributions, with a peak increase of
/// 30% in the write-intensive 20% reads workload".
const SEED_PMBENCH: [(&str, &str); 14] = [
    ("ambix over first-touch, σ 12.5%, 64-240 GB (2x-8x, 3 read shares: mean of 9)", "+16%"),
    ("kernel-tiering (autonuma) over first-touch, same points", "+18%"),
    ("ambix over first-touch, σ 25%, 64-240 GB (mean of 9)", "+6%"),
    ("kernel-tiering (autonuma) over first-touch, same points", "+5%"),
    ("ambix over kernel-tiering (autonuma), σ 12.5%, 64 GB (2x, mean of 3)", "+6.3%"),
    ("the same at 128 GB (4x)", "-12%"),
    ("the same at 240 GB (8x)", "0%"),
    (
        "memory-mode, σ 12.5%: change in performance (1/AAL) from 64 to 128 GB (2x to 4x), mean of 3",
        "similar AAL",
    ),
    ("memory-mode, σ 12.5%: change in performance from 128 to 240 GB (4x to 8x), mean of 3", "-46%"),
    ("memory-mode over first-touch, σ 25%, 128 and 240 GB (mean of 6)", "worse than ADM-default"),
    ("best of ambix, autonuma and MemM at σ 12.5%, 20% reads, 128 GB (4x)", "MemM"),
    ("first-touch, σ 12.5%: change in performance from 128 to 240 GB (4x to 8x), mean of 3", "similar AAL"),
    ("first-touch at 32 GB: AAL at σ 25% over σ 12.5%, mean of 3 read shares", "+25%"),
    ("the same at 20% reads", "+30%"),
];

fn pmbench_seed(runs: &Runs) -> String {
    let points = |sigma: &str, reads: &[u32], sizes: &[&str]| -> Vec<String> {
        let mut v = Vec::new();
        for r in reads {
            for size in sizes {
                v.push(pmbench_name(sigma, *r, size));
            }
        }
        v
    };
    let all_reads = PMBENCH_READS;
    let mean_impr =
        |ws: &[String], p: &str| mean(&ws.iter().map(|w| aal_improvement(runs, w, p)).collect::<Vec<_>>());
    let head_to_head = |size: &str| {
        mean(
            &points("s12", &all_reads, &[size])
                .iter()
                .map(|w| 1.0 - runs.aal(w, "ambix") / runs.aal(w, AUTONUMA_SETUP))
                .collect::<Vec<_>>(),
        )
    };
    // Change in performance (1 / AAL) of one policy from one size to the next, mean over reads.
    let perf_change = |sigma: &str, p: &str, from: &str, to: &str| {
        mean(
            &all_reads
                .iter()
                .map(|r| {
                    runs.aal(&pmbench_name(sigma, *r, from), p) / runs.aal(&pmbench_name(sigma, *r, to), p)
                        - 1.0
                })
                .collect::<Vec<_>>(),
        )
    };
    let sigma_cost = |r: u32| {
        runs.aal(&pmbench_name("s25", r, "32g"), FIRST_TOUCH)
            / runs.aal(&pmbench_name("s12", r, "32g"), FIRST_TOUCH)
            - 1.0
    };
    let best_at = |w: &str| {
        let named = [("ambix", "ambix"), (AUTONUMA_SETUP, "autonuma"), ("memory-mode", "MemM")];
        let (_, seed_name) = named
            .iter()
            .min_by(|a, b| runs.aal(w, a.0).total_cmp(&runs.aal(w, b.0)))
            .expect("three policies");
        seed_name.to_string()
    };
    let model = [
        pct(mean_impr(&pmbench_seed_points("s12"), "ambix")),
        pct(mean_impr(&pmbench_seed_points("s12"), AUTONUMA_SETUP)),
        pct(mean_impr(&pmbench_seed_points("s25"), "ambix")),
        pct(mean_impr(&pmbench_seed_points("s25"), AUTONUMA_SETUP)),
        pct(head_to_head("x2")),
        pct(head_to_head("x4")),
        pct(head_to_head("x8")),
        pct(perf_change("s12", "memory-mode", "x2", "x4")),
        pct(perf_change("s12", "memory-mode", "x4", "x8")),
        pct(mean_impr(&points("s25", &all_reads, &["x4", "x8"]), "memory-mode")),
        best_at(&pmbench_name("s12", 20, "x4")),
        pct(perf_change("s12", FIRST_TOUCH, "x4", "x8")),
        pct(mean(&all_reads.iter().map(|r| sigma_cost(*r)).collect::<Vec<_>>())),
        pct(sigma_cost(20)),
    ];
    let rows: Vec<Vec<String>> = SEED_PMBENCH
        .iter()
        .zip(model)
        .map(|((statement, seed), m)| vec![statement.to_string(), seed.to_string(), m])
        .collect();
    md(&["Ambix §5.5.1 (improvement of AAL unless said)", "seed", "model"], &rows)
}

// ---- HPWP §6.3: key-value store ----

const KVSTORE_SETS: [u32; 5] = [10, 30, 50, 70, 90];
const KVSTORE_POLICIES: [&str; 3] = [FIRST_TOUCH, "hemem", "hpwp"];
/// HPWP thesis §6.3 (Fig 9): "HPWP provides up to 19% higher throughput than HeMem"; "as the
/// ratio of set requests increases ... it has a greater performance advantage". The GET:SET
/// ratios are not listed.
const SEED_KVSTORE: &str = "up to +19%, growing with the SET share (shares not given)";

fn kvstore_runs() -> Vec<(String, String)> {
    grid(&KVSTORE_SETS.iter().map(|s| format!("kvstore-set{s}")).collect::<Vec<_>>(), &KVSTORE_POLICIES)
}

fn kvstore(runs: &Runs) -> String {
    let row = |label: &str, cell: &dyn Fn(&str) -> String, seed: &str| {
        let mut r = vec![label.to_string()];
        r.extend(KVSTORE_SETS.iter().map(|s| cell(&format!("kvstore-set{s}"))));
        r.push(seed.to_string());
        r
    };
    let rows = vec![
        row("hemem, speedup over first-touch", &|w| times(runs.speedup(w, "hemem")), "-"),
        row("hpwp, speedup over first-touch", &|w| times(runs.speedup(w, "hpwp")), "-"),
        row("hpwp vs hemem", &|w| pct(runs.time(w, "hemem") / runs.time(w, "hpwp") - 1.0), SEED_KVSTORE),
        row(
            "migrated, hemem / hpwp",
            &|w| {
                let mib = |p: &str| runs.get(w, p).bytes_migrated as f64 / f64::from(1 << 20);
                format!("{:.0} / {:.0} MiB", mib("hemem"), mib("hpwp"))
            },
            "-",
        ),
        row(
            "fast-tier read hits, hemem / hpwp",
            &|w| {
                let hits = |p: &str| share(runs.get(w, p).fast_read_hit_rate());
                format!("{}% / {}%", hits("hemem"), hits("hpwp"))
            },
            "-",
        ),
    ];
    let mut header = vec!["SET share".to_string()];
    header.extend(KVSTORE_SETS.iter().map(|s| format!("{s}%")));
    header.push("seed (HPWP §6.3)".into());
    md(&header.iter().map(String::as_str).collect::<Vec<_>>(), &rows)
}

// ---- Nimble §4.4: the migration configurations end to end ----

/// Fig. 12's workloads as far as the simulator has their shapes (docs/policies.md, "nimble"):
/// graph500's BFS, with graph500's 64 searches (the reference code's `NBFS_max`), and the NPB kernels that SPEC ACCEL's OpenMP codes derive from or share
/// their solvers with, at most 32 iterations (FT's own count is 25): SPEC ACCEL's run lengths are
/// not NPB's, and NPB's own counts at full size would cost the simulator eight times as much for
/// BT (the huge pages these configurations move need the full size).
pub(crate) const NIMBLE_WORKLOADS: [&str; 5] = [
    "bfs-medium:iterations=64",
    "npb-bt-medium:iterations=32",
    "npb-cg-medium:iterations=32",
    "npb-mg-medium:iterations=32",
    "npb-ft-medium",
];
/// Fig. 12's configurations in its order, then All Local; All Remote is the reference.
const NIMBLE_CONFIGS: [&str; 7] =
    [FIRST_TOUCH, "nimble-linux", "nimble-exchange-4k", "nimble-thp", "nimble-opt", "nimble", ALL_FAST];
const ALL_REMOTE: &str = "all-slow";
/// Nimble §4.4, Fig. 12 (16 GB local): geometric-mean speedup over All Remote, in
/// `NIMBLE_CONFIGS` order; first touch alone and Table 2's "Opt." are not in the figure.
const NIMBLE_SEED: [&str; 7] = ["-", "1.09x", "1.16x", "1.31x", "-", "1.48x", "about 2x"];

fn nimble_runs() -> Vec<(String, String)> {
    let mut policies = vec![ALL_REMOTE];
    policies.extend(NIMBLE_CONFIGS);
    grid(&names(&NIMBLE_WORKLOADS), &policies)
}

fn nimble_fig12(runs: &Runs) -> String {
    let over_remote = |w: &str, p: &str| runs.time(w, ALL_REMOTE) / runs.time(w, p);
    let mut header = vec!["workload"];
    header.extend(NIMBLE_CONFIGS);
    let mut rows: Vec<Vec<String>> = NIMBLE_WORKLOADS
        .iter()
        .map(|w| {
            let mut row = vec![w.to_string()];
            row.extend(NIMBLE_CONFIGS.iter().map(|p| times(over_remote(w, p))));
            row
        })
        .collect();
    let mut mean_row = vec!["geometric mean".to_string()];
    mean_row.extend(
        NIMBLE_CONFIGS
            .iter()
            .map(|p| times(geomean(&NIMBLE_WORKLOADS.iter().map(|w| over_remote(w, p)).collect::<Vec<_>>()))),
    );
    rows.push(mean_row);
    let mut moved_row = vec!["migrated, all five".to_string()];
    moved_row.extend(
        NIMBLE_CONFIGS.iter().map(|p| {
            human_bytes(NIMBLE_WORKLOADS.iter().map(|w| runs.get(w, p).bytes_migrated).sum::<u64>())
        }),
    );
    rows.push(moved_row);
    let mut seed_row = vec!["seed, geometric mean (Fig. 12)".to_string()];
    seed_row.extend(NIMBLE_SEED.iter().map(|s| s.to_string()));
    rows.push(seed_row);
    md(&header, &rows)
}

/// Fig. 13's local memory, 4 to 28 GB of 32 (Nimble §4.4), as shares of each footprint: 4, 8,
/// 16 and 28 GB. Four of the seed's seven points: the 50% point is Fig. 12's machine, so its runs
/// are shared, and each further point costs as much as Fig. 12 (the test suite re-runs every
/// table, within its time budget).
const NIMBLE_SWEEP: [Machine; 4] = nimble_sweep("remote-socket");
/// [`NIMBLE_SWEEP`] on Nimble's own machine.
const NIMBLE_SWEEP_XEON: [Machine; 4] = nimble_sweep("nimble-xeon");

const fn nimble_sweep(profile: &'static str) -> [Machine; 4] {
    const fn local(profile: &'static str, share: &'static str) -> Machine {
        Machine { profile, fast_capacity: Some(share), scale: (1, 1), repeat: 0 }
    }
    [local(profile, "12.5%"), local(profile, "25%"), local(profile, "50%"), local(profile, "87.5%")]
}
/// The two configurations whose gap is Fig. 13's headline: Linux's base-page migration and the
/// optimised exchange of huge pages (the other two are in Fig. 12's table).
const NIMBLE_SWEEP_CONFIGS: [&str; 2] = ["nimble-linux", "nimble"];
/// Fig. 12's workloads but MG, whose 74 MiB at 32 iterations costs the simulator as much as the
/// other four together, seven times over (the test suite runs every table).
const NIMBLE_SWEEP_WORKLOADS: [&str; 4] = [
    "bfs-medium:iterations=64",
    "npb-bt-medium:iterations=32",
    "npb-cg-medium:iterations=32",
    "npb-ft-medium",
];

fn nimble_sweep_runs() -> Vec<(String, String)> {
    let mut policies = vec![ALL_REMOTE];
    policies.extend(NIMBLE_SWEEP_CONFIGS);
    grid(&names(&NIMBLE_SWEEP_WORKLOADS), &policies)
}

fn nimble_fig13(runs: &Runs) -> String {
    nimble_fig13_over(runs, &NIMBLE_SWEEP)
}

fn nimble_fig13_xeon(runs: &Runs) -> String {
    nimble_fig13_over(runs, &NIMBLE_SWEEP_XEON)
}

/// Fig. 13's table from the runs on each machine of `sweep`.
fn nimble_fig13_over(runs: &Runs, sweep: &[Machine]) -> String {
    let mean_over_remote = |r: &Runs, p: &str| {
        geomean(
            &NIMBLE_SWEEP_WORKLOADS.iter().map(|w| r.time(w, ALL_REMOTE) / r.time(w, p)).collect::<Vec<_>>(),
        )
    };
    let mut header = vec!["local memory"];
    header.extend(NIMBLE_SWEEP_CONFIGS);
    header.push("nimble over nimble-linux");
    let mut gains = Vec::new();
    let mut rows: Vec<Vec<String>> = sweep
        .iter()
        .map(|m| {
            let r = runs.on(*m);
            let mut row = vec![format!("{} of the footprint", m.fast_capacity.unwrap_or("-"))];
            row.extend(NIMBLE_SWEEP_CONFIGS.iter().map(|p| times(mean_over_remote(&r, p))));
            let gain = mean_over_remote(&r, "nimble") / mean_over_remote(&r, "nimble-linux") - 1.0;
            gains.push(gain);
            row.push(pct(gain));
            row
        })
        .collect();
    let mut mean_row = vec!["mean over the sweep".to_string()];
    mean_row.extend(NIMBLE_SWEEP_CONFIGS.iter().map(|_| String::new()));
    mean_row.push(pct(mean(&gains)));
    rows.push(mean_row);
    let mut seed_row = vec!["seed (Fig. 13, §4.4)".to_string()];
    seed_row.extend([
        "loses 5-10% to All Remote at 4 and 8 GB".to_string(),
        "-".to_string(),
        "+40% on average".to_string(),
    ]);
    rows.push(seed_row);
    md(&header, &rows)
}

// ---- mtier (Teague, UTK MS thesis 2018) ----

/// mtier's machine (§4.3): a remote socket as the slow tier, the pool 12.5% of the RSS (§5.5,
/// Table 5.1's 98 MB of 784).
const MTIER_MACHINE: Machine =
    Machine { profile: "remote-socket", fast_capacity: Some("12.5%"), scale: (1, 1), repeat: 0 };
/// [`MTIER_MACHINE`] with the workload at the thesis's size (§4.2.2: two read-only sources of 48M
/// doubles, 768 MB; 91.5 times the built-in 8 MiB), so that the pool is the thesis's too: 23,424
/// pages (91.5 MiB) against Table 5.1's 98 MB. Table 5.1's factors are about the pages one epoch
/// moves, that is about the pool (docs/policies.md, "mtier §5.2"). Only the shootdown table runs
/// there: its three runs take about a CPU-minute.
const MTIER_THESIS_SIZE: Machine =
    Machine { profile: "remote-socket", fast_capacity: Some("12.5%"), scale: (183, 2), repeat: 0 };
/// The pool sizes of §4.3, 98/196/392/1000 MB of a 784 MB RSS (the last is all of it).
const MTIER_POOLS: [Machine; 4] = {
    const fn pool(share: &'static str) -> Machine {
        Machine { profile: "remote-socket", fast_capacity: Some(share), scale: (1, 1), repeat: 0 }
    }
    [pool("12.5%"), pool("25%"), pool("50%"), pool("100%")]
};
/// The epoch study's pool (§5.3: 25% of the RSS).
const MTIER_EPOCH_MACHINE: Machine = MTIER_POOLS[1];
const MTIER_VARIANTS: [&str; 3] = ["mtier", "mtier-heavy", "mtier-mbind"];
/// §4.3's epochs.
const MTIER_EPOCHS: [&str; 4] = ["50ms", "100ms", "500ms", "1s"];
/// The workload of Table 5.1 and Figs. 5.6-5.8: 6 threads.
const MTIER_WORKLOAD: &str = "mtier-stream-t6";
const MTIER_THREADS: [&str; 4] = ["mtier-stream-t1", "mtier-stream-t2", "mtier-stream-t4", "mtier-stream-t6"];
/// Table 5.1 (6 threads, 98 MB, 50 ms, about 1000 s): shootdowns of each variant.
const MTIER_SEED_SHOOTDOWNS: [&str; 3] = ["85,396", "694,472,364", "203,591,624"];
/// mtier's all-local baseline is every page in the fast tier.
const ALL_LOCAL: &str = ALL_FAST;

/// `variant` at `epoch`, by its canonical name.
fn mtier_at(variant: &str, epoch: &str) -> String {
    terrace_policy::canonical(&format!("{variant}:epoch={epoch}")).expect("a valid mtier spec")
}

fn mtier_runs() -> Vec<(String, String)> {
    let mut policies = vec![ALL_LOCAL, ALL_REMOTE];
    policies.extend(MTIER_VARIANTS);
    grid(&names(&MTIER_THREADS), &policies)
}

fn mtier_shootdown_runs() -> Vec<(String, String)> {
    grid(&names(&[MTIER_WORKLOAD]), &MTIER_VARIANTS)
}

fn mtier_epoch_runs() -> Vec<(String, String)> {
    let mut policies: Vec<String> = vec![ALL_LOCAL.into(), ALL_REMOTE.into()];
    for e in MTIER_EPOCHS {
        policies.extend(MTIER_VARIANTS.iter().map(|v| mtier_at(v, e)));
    }
    let policies: Vec<&str> = policies.iter().map(String::as_str).collect();
    grid(&names(&[MTIER_WORKLOAD]), &policies)
}

fn mtier_pool_runs() -> Vec<(String, String)> {
    let mut policies = vec![ALL_LOCAL, ALL_REMOTE];
    policies.extend(MTIER_VARIANTS);
    grid(&names(&[MTIER_WORKLOAD]), &policies)
}

/// Table 5.1 and Fig. 5.4: shootdowns of each variant, and pages moved per shootdown, with the
/// pool of this table's other runs and with the thesis's ([`MTIER_THESIS_SIZE`]).
fn mtier_shootdowns(runs: &Runs) -> String {
    let header = [
        "variant",
        "pool",
        "pool pages",
        "shootdowns",
        "pages moved",
        "pages per shootdown",
        "mover time per page moved, us",
        "mover busy, share of the run",
        "shootdowns over mtier's",
        "seed shootdowns (Table 5.1)",
        "seed, over mtier's",
    ];
    let seed_base = 85_396.0;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (pool, machine) in [(MTIER_POOL_BUILT_IN, MTIER_MACHINE), (MTIER_POOL_THESIS, MTIER_THESIS_SIZE)] {
        let runs = runs.on(machine);
        let base = runs.get(MTIER_WORKLOAD, "mtier").tlb_shootdowns.max(1) as f64;
        for (v, seed) in MTIER_VARIANTS.iter().zip(MTIER_SEED_SHOOTDOWNS) {
            let r = runs.get(MTIER_WORKLOAD, v);
            // Pages whose copies completed: a page is flushed as its copy starts, so what the
            // run ended before was never flushed (docs/model.md §4, "Movers").
            let moved = r.pages_migrated;
            let seed_n: f64 = seed.replace(',', "").parse().unwrap_or(f64::NAN);
            rows.push(vec![
                v.to_string(),
                pool.to_string(),
                (r.fast_capacity_bytes / 4096).to_string(),
                r.tlb_shootdowns.to_string(),
                moved.to_string(),
                format!("{:.1}", moved as f64 / r.tlb_shootdowns.max(1) as f64),
                // What sets how many pages a variant moves: its mover runs synchronously and is
                // busy most of the run, so its cost per page bounds its pages (docs/policies.md).
                format!("{:.2}", r.migration_ns / r.pages_migrated.max(1) as f64 / 1e3),
                format!("{:.0}%", 100.0 * r.migration_ns / r.runtime_ns),
                format!("{:.0}x", r.tlb_shootdowns as f64 / base),
                seed.to_string(),
                format!("{:.0}x", seed_n / seed_base),
            ]);
        }
    }
    md(&header, &rows)
}

/// The shootdown table's pools, as its "pool" column names them (the headlines read the thesis's).
pub(crate) const MTIER_POOL_BUILT_IN: &str = "built-in size";
pub(crate) const MTIER_POOL_THESIS: &str = "the thesis's";

/// Fig. 5.5: what one 4 KiB page's movement costs the mover, by kind, from the model's
/// remote-socket figures (docs/model.md §4, "Shadow copies").
fn mtier_move_cost(_: &Runs) -> String {
    use terrace_model::{MoveOptions, PageSize};
    use terrace_sim::migration::{cost, MoveWork};
    let p = terrace_sim::Profile::load(MTIER_MACHINE.profile).expect("a built-in profile");
    // One page in a large batch (the call's cost spread out), as in an epoch's batch.
    let o = MoveOptions { batch_pages: 4096, ..MoveOptions::default() };
    let pages = 4096;
    let per = |w: MoveWork| cost(&p.migration, &p.tiers, &o, PageSize::Base4K, &w).mover_ns / pages as f64;
    let kernel = per(MoveWork::one_way(1, 0, pages, 4096));
    let mut shadow = MoveWork { shadow_copies: pages, ..MoveWork::default() };
    shadow.shadow_bytes[1][0] = pages * 4096;
    let copy_switch = per(shadow);
    let switch = per(MoveWork { switched: pages, ..MoveWork::default() });
    let row = |what: &str, ns: f64, seed: &str| {
        vec![what.to_string(), format!("{:.2}", ns / 1e3), times(kernel / ns), seed.to_string()]
    };
    md(
        &["movement (Table 5.2)", "mover time per page, us", "kernel migration over it", "seed (Fig. 5.5)"],
        &[
            row("mapping switch (mtier's eviction)", switch, "over 22x"),
            row("copy + switch (mtier's promotion)", copy_switch, "2.6x"),
            row("kernel migration (mtier-heavy)", kernel, "1x"),
            row("kernel migration with allocation (massive)", kernel, "about 1x"),
        ],
    )
}

/// Figs. 5.6-5.7: run time over all-local as the epoch grows (pool 25%, 6 threads).
fn mtier_epochs(runs: &Runs) -> String {
    let local = runs.time(MTIER_WORKLOAD, ALL_LOCAL);
    let remote = times(runs.time(MTIER_WORKLOAD, ALL_REMOTE) / local);
    let mut header = vec!["epoch"];
    header.extend(MTIER_VARIANTS);
    header.push(ALL_REMOTE);
    let mut rows: Vec<Vec<String>> = MTIER_EPOCHS
        .iter()
        .map(|e| {
            let mut row = vec![e.to_string()];
            row.extend(
                MTIER_VARIANTS.iter().map(|v| times(runs.time(MTIER_WORKLOAD, &mtier_at(v, e)) / local)),
            );
            row.push(remote.clone());
            row
        })
        .collect();
    rows.push(vec![
        "seed (Figs. 5.6-5.7)".into(),
        "below remote at every epoch, a little lower when longer".into(),
        "near remote only at the longest epochs".into(),
        "never reaches remote".into(),
        "1.06-1.14x (Table 4.4)".into(),
    ]);
    md(&header, &rows)
}

/// Fig. 5.8: run time over all-local as the pool grows (50 ms, 6 threads).
fn mtier_pool(runs: &Runs) -> String {
    let mut header = vec!["pool"];
    header.extend(MTIER_VARIANTS);
    header.push(ALL_REMOTE);
    let mut rows: Vec<Vec<String>> = MTIER_POOLS
        .iter()
        .map(|m| {
            let r = runs.on(*m);
            let local = r.time(MTIER_WORKLOAD, ALL_LOCAL);
            let mut row = vec![format!("{} of the footprint", m.fast_capacity.unwrap_or("-"))];
            row.extend(MTIER_VARIANTS.iter().map(|v| times(r.time(MTIER_WORKLOAD, v) / local)));
            row.push(times(r.time(MTIER_WORKLOAD, ALL_REMOTE) / local));
            row
        })
        .collect();
    rows.push(vec![
        "seed (Fig. 5.8)".into(),
        "little effect; always below remote".into(),
        "improves with size, never meets remote".into(),
        "\"substantially worse\" (no data)".into(),
        "-".into(),
    ]);
    md(&header, &rows)
}

/// Figs. 5.9-5.10: run time over all-local by thread count (50 ms, pool 12.5%).
fn mtier_threads(runs: &Runs) -> String {
    let mut header = vec!["threads"];
    header.extend(MTIER_VARIANTS);
    header.extend([ALL_REMOTE, "mtier over all-slow"]);
    let mut rows: Vec<Vec<String>> = MTIER_THREADS
        .iter()
        .map(|w| {
            let local = runs.time(w, ALL_LOCAL);
            let mut row = vec![w.trim_start_matches("mtier-stream-t").to_string()];
            row.extend(MTIER_VARIANTS.iter().map(|v| times(runs.time(w, v) / local)));
            row.push(times(runs.time(w, ALL_REMOTE) / local));
            row.push(times(runs.time(w, "mtier") / runs.time(w, ALL_REMOTE)));
            row
        })
        .collect();
    rows.push(vec![
        "seed (Figs. 5.9-5.10)".into(),
        "beats heavy at every count".into(),
        "worse than both baselines everywhere".into(),
        "-".into(),
        "-".into(),
        "above 1 except at 6 threads".into(),
    ]);
    md(&header, &rows)
}

// ---- Object tiering (Kammerdiener et al. 2024) ----

/// §5.3.1's caps on the fast tier: 12.5%, 25% and 50% of peak use, on the default profile (the
/// seed's machine is Optane, as the default profile's slow tier), the workload at a sixteenth of
/// its size (4 MiB): its seed-long run (about 590 passes over memory) takes about a second so.
const OBJECTS_CAPS: [Machine; 3] = {
    const fn cap(share: &'static str) -> Machine {
        Machine {
            profile: terrace_sim::DEFAULT_PROFILE,
            fast_capacity: Some(share),
            scale: (1, 16),
            repeat: 0,
        }
    }
    [cap("12.5%"), cap("25%"), cap("50%")]
};
const OBJECTS_WORKLOAD: &str = "objects";
/// Fig. 4's orders and triggers (§3.4.2, §3.4.3), as the policy's parameter values.
const OBJECTS_PRIORITIES: [(&str, &str); 3] =
    [("fifo", "FIFO"), ("lru", "LRU"), ("apb", "accesses per byte")];
const OBJECTS_TRIGGERS: [(&str, &str); 3] = [("time", "time"), ("mpi", "LLC MPI"), ("alloc", "allocation")];

/// The reactive policy: §5.3.1, "these experiments ... only evaluate reactive object tiering".
fn objects_at(priority: &str, trigger: &str) -> String {
    terrace_policy::canonical(&format!("objects-reactive:priority={priority},trigger={trigger}"))
        .expect("a valid objects spec")
}

fn objects_fig4_runs() -> Vec<(String, String)> {
    let mut policies = vec![FIRST_TOUCH.to_string()];
    for (p, _) in OBJECTS_PRIORITIES {
        policies.extend(OBJECTS_TRIGGERS.iter().map(|(t, _)| objects_at(p, t)));
    }
    policies.into_iter().map(|p| (OBJECTS_WORKLOAD.to_string(), p)).collect()
}

/// Fig. 4: speedup over first-touch of each priority x trigger at each cap.
fn objects_fig4(runs: &Runs) -> String {
    let caps: Vec<Runs> = OBJECTS_CAPS.iter().map(|m| runs.on(*m)).collect();
    let header = ["priority", "trigger", "12.5%", "25%", "50%"];
    let mut rows = Vec::new();
    for (p, pname) in OBJECTS_PRIORITIES {
        for (t, tname) in OBJECTS_TRIGGERS {
            let policy = objects_at(p, t);
            let mut row = vec![pname.to_string(), tname.to_string()];
            row.extend(caps.iter().map(|r| times(r.speedup(OBJECTS_WORKLOAD, &policy))));
            rows.push(row);
        }
    }
    let mut seed =
        vec!["seed (Fig. 4)".to_string(), "best: allocation, with LRU or accesses per byte".into()];
    seed.extend(OBJECTS_FIG4_SEED.iter().map(|s| s.to_string()));
    rows.push(seed);
    md(&header, &rows)
}

/// §5.3.2: the best configurations' mean speedups over first touch at the three caps.
const OBJECTS_FIG4_SEED: [&str; 3] = ["1.4x", "1.6x", "1.35x"];
/// Fig. 4's two best configurations (§5.3.2: "the allocation trigger with either the LRU or APB
/// object prioritization policies"), each by its column's name.
const OBJECTS_FIG4_BEST: [(&str, &str); 2] =
    [("apb", "accesses per byte, allocation"), ("lru", "LRU, allocation")];
/// The row of the applications' mean speedups.
const OBJECTS_APPS_MEAN: &str = "mean of the seven";

fn objects_fig4_apps_runs() -> Vec<(String, String)> {
    let mut policies = vec![FIRST_TOUCH.to_string(), ALL_FAST.to_string()];
    policies.extend(OBJECTS_FIG4_BEST.iter().map(|(p, _)| objects_at(p, "alloc")));
    let policies: Vec<&str> = policies.iter().map(String::as_str).collect();
    let mut specs: Vec<String> =
        terrace_workloads::OBJECTS_TABLE3_SMALL_PROGRAMS.iter().map(|a| a.spec.to_string()).collect();
    specs.sort();
    specs.dedup();
    grid(&specs, &policies)
}

/// Fig. 4 as the seed measured it, a mean over its applications: at each cap, each application's
/// program (terrace_workloads::OBJECTS_TABLE3_SMALL_PROGRAMS) under the two best configurations,
/// as speedups over first-touch, and their mean.
fn objects_fig4_apps(runs: &Runs) -> String {
    let header = [
        "application",
        "fast tier",
        "workload",
        "all-DRAM over first-touch",
        OBJECTS_FIG4_BEST[0].1,
        OBJECTS_FIG4_BEST[1].1,
    ];
    let apps = terrace_workloads::OBJECTS_TABLE3_SMALL_PROGRAMS;
    let best: Vec<String> = OBJECTS_FIG4_BEST.iter().map(|(p, _)| objects_at(p, "alloc")).collect();
    let mut rows = Vec::new();
    for (machine, seed) in OBJECTS_CAPS.iter().zip(OBJECTS_FIG4_SEED) {
        let r = runs.on(*machine);
        let cap = machine.fast_capacity.unwrap_or("-").to_string();
        let mut sums = [0.0; 3];
        for app in &apps {
            let speedups =
                [r.speedup(app.spec, ALL_FAST), r.speedup(app.spec, &best[0]), r.speedup(app.spec, &best[1])];
            for (sum, v) in sums.iter_mut().zip(speedups) {
                *sum += v;
            }
            let mut row = vec![app.name.to_string(), cap.clone(), format!("`{}`", app.spec)];
            row.extend(speedups.iter().map(|v| times(*v)));
            rows.push(row);
        }
        let mut row = vec![OBJECTS_APPS_MEAN.to_string(), cap.clone(), "-".to_string()];
        row.extend(sums.iter().map(|v| times(v / apps.len() as f64)));
        rows.push(row);
        rows.push(vec![
            "seed (Fig. 4)".into(),
            cap,
            "-".into(),
            "not given".into(),
            format!("{seed} (the better of the two)"),
            "-".into(),
        ]);
    }
    md(&header, &rows)
}

fn objects_fig7_runs() -> Vec<(String, String)> {
    grid(&names(&[OBJECTS_WORKLOAD, OBJECTS_MANY_SITES]), &[FIRST_TOUCH, "objects", "objects-reactive"])
}

/// Fig. 7's many-sites case: the buffers of `objects` from 2,048 sites (docs/workloads.md).
const OBJECTS_MANY_SITES: &str = "objects-sites";

/// Fig. 7: the conservative proactive scheme (`objects`) against the reactive avg-best
/// (`objects-reactive`), at each cap, on the workload of few sites and on the one of many.
fn objects_fig7(runs: &Runs) -> String {
    let header = [
        "workload",
        "fast tier",
        "objects-reactive",
        "objects (proactive)",
        "proactive over reactive",
        "bytes placed at allocation",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for w in [OBJECTS_WORKLOAD, OBJECTS_MANY_SITES] {
        for m in OBJECTS_CAPS.iter() {
            let r = runs.on(*m);
            let placed = r.get(w, "objects").objects.bytes_placed_by_advice;
            rows.push(vec![
                w.to_string(),
                m.fast_capacity.unwrap_or("-").to_string(),
                times(r.speedup(w, "objects-reactive")),
                times(r.speedup(w, "objects")),
                times(r.time(w, "objects-reactive") / r.time(w, "objects")),
                format!("{:.1} MiB", placed as f64 / (1 << 20) as f64),
            ]);
        }
    }
    rows.push(vec![
        "seed (Fig. 7)".into(),
        "-".into(),
        "avg-best".into(),
        "-".into(),
        "1.19x QMCPACK, 1.17x IdenProf (2-4 thousand sites); others about 1x, LULESH 0.98x".into(),
        "-".into(),
    ]);
    md(&header, &rows)
}

/// Fig. 8's programs (docs/workloads.md, "objects-pair") on the default profile, at the sixteenth
/// of their size the other object tables run, with each workload's own fast tier: sized,
/// started and paced as the seed's Table 3 gives them, and in the shape chosen before it was
/// read (10/9 of the high-priority program at half the size).
const OBJECTS_PAIR_MACHINE: Machine =
    Machine { profile: terrace_sim::DEFAULT_PROFILE, fast_capacity: None, scale: (1, 16), repeat: 0 };
const OBJECTS_PAIRS: [&str; 2] = ["objects-pair-table3", "objects-pair"];
/// Fig. 8's configurations (§5.5): the baseline binds each program to a tier; LTP is the kernel's
/// tiering; MD Default is avg-best without priorities, MD Priority with them.
const OBJECTS_FIG8_BASELINE: &str = "bind-priority";
const OBJECTS_FIG8_CONFIGS: [(&str, &str); 3] = [
    ("kernel-tiering", "LTP (kernel-tiering)"),
    ("objects:priorities=false", "MD Default (objects:priorities=false)"),
    ("objects", "MD Priority (objects)"),
];

fn objects_fig8_runs() -> Vec<(String, String)> {
    let mut policies = vec![OBJECTS_FIG8_BASELINE];
    policies.extend(OBJECTS_FIG8_CONFIGS.iter().map(|(p, _)| *p));
    grid(&names(&OBJECTS_PAIRS), &policies)
}

/// Fig. 8: each program's speedup over its run in the baseline (each bound to a tier), under
/// each configuration, the high-priority program first, for each shape of the pair.
fn objects_fig8(runs: &Runs) -> String {
    let header = [
        "configuration",
        "workload",
        "high priority: speedup over bound to DRAM",
        "low priority: speedup over bound to the slow tier",
        "high priority runs",
        "low priority runs",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for pair in OBJECTS_PAIRS {
        let programs = |p: &str| {
            let mut v = runs.get(pair, p).programs.clone();
            // Highest priority first.
            v.sort_by_key(|r| std::cmp::Reverse(r.priority));
            v
        };
        let base = programs(OBJECTS_FIG8_BASELINE);
        rows.push(vec![
            format!("baseline ({OBJECTS_FIG8_BASELINE})"),
            pair.to_string(),
            "1.00x".into(),
            "1.00x".into(),
            human_time(base[0].runtime_ns()),
            human_time(base[1].runtime_ns()),
        ]);
        for (policy, label) in OBJECTS_FIG8_CONFIGS {
            let got = programs(policy);
            rows.push(vec![
                label.to_string(),
                pair.to_string(),
                times(base[0].runtime_ns() / got[0].runtime_ns()),
                times(base[1].runtime_ns() / got[1].runtime_ns()),
                human_time(got[0].runtime_ns()),
                human_time(got[1].runtime_ns()),
            ]);
        }
    }
    rows.push(vec![
        "seed (Fig. 8)".into(),
        "QMCPACK full, then one shared input".into(),
        "MD Priority: very close to all-DRAM; LTP and MD Default slow it".into(),
        "MD Priority: 1.26x (26% faster on average); LTP and MD Default: little or none".into(),
        "-".into(),
        "-".into(),
    ]);
    md(&header, &rows)
}

// ---- Markers, check and write ----

const START: &str = "<!-- reproduce: ";
const START_TAIL: &str = " -->";
const END: &str = "<!-- /reproduce -->";

/// A marked block of a file: its name and the line indices of its two markers.
#[derive(Debug, PartialEq)]
struct Block {
    name: String,
    start: usize,
    end: usize,
}

/// The marked blocks of `text`, in order; a marker out of place is an error naming its line.
fn blocks(path: &Path, text: &str) -> Result<Vec<Block>> {
    let mut out: Vec<Block> = Vec::new();
    let mut open: Option<(String, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        let at = || format!("{}:{}", path.display(), i + 1);
        if let Some(rest) = line.strip_prefix(START) {
            let name = rest
                .strip_suffix(START_TAIL)
                .with_context(|| format!("{}: a start marker is `{START}NAME{START_TAIL}`", at()))?;
            if let Some((open_name, _)) = &open {
                bail!("{}: block '{name}' starts inside block '{open_name}' (no `{END}` before it)", at());
            }
            if out.iter().any(|b| b.name == name) {
                bail!("{}: a second block '{name}'; each table appears once", at());
            }
            open = Some((name.to_string(), i));
        } else if line == END {
            let (name, start) =
                open.take().with_context(|| format!("{}: `{END}` with no block open", at()))?;
            out.push(Block { name, start, end: i });
        }
    }
    if let Some((name, start)) = open {
        bail!("{}:{}: block '{name}' has no `{END}`", path.display(), start + 1);
    }
    Ok(out)
}

/// A block's lines between its markers, without the blank lines around the table.
fn block_body<'a>(lines: &[&'a str], b: &Block) -> Vec<&'a str> {
    let mut body: Vec<&str> = lines[b.start + 1..b.end].to_vec();
    while body.first().is_some_and(|l| l.trim().is_empty()) {
        body.remove(0);
    }
    while body.last().is_some_and(|l| l.trim().is_empty()) {
        body.pop();
    }
    body
}

/// A table as the lines of its block: a blank line either side, so that markdown sees the
/// markers and the table apart.
fn block_lines(table: &str) -> Vec<String> {
    let mut v = vec![String::new()];
    v.extend(table.trim_end().lines().map(str::to_string));
    v.push(String::new());
    v
}

/// The lines that differ between `old` and `new`, `-` and `+`, in order (a longest common
/// subsequence); at most `limit` lines, then how many more.
fn short_diff(old: &[&str], new: &[&str], limit: usize) -> String {
    let (n, m) = (old.len(), new.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] =
                if old[i] == new[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut lines = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] > lcs[i + 1][j]) {
            lines.push(format!("    + {}", new[j]));
            j += 1;
        } else {
            lines.push(format!("    - {}", old[i]));
            i += 1;
        }
    }
    let more = lines.len().saturating_sub(limit);
    lines.truncate(limit);
    if more > 0 {
        lines.push(format!("    ... and {more} more changed lines"));
    }
    lines.join("\n")
}

/// The tables asked for, in the doc's order.
fn selected(only: &[String]) -> Result<Vec<&'static Table>> {
    for name in only {
        if !TABLES.iter().any(|t| t.name == name) {
            bail!(
                "no table '{name}'; the tables are {} (`terrace reproduce --list`)",
                TABLES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(TABLES.iter().filter(|t| only.is_empty() || only.iter().any(|n| n == t.name)).collect())
}

/// Runs what the tables need, each (workload, policy) once per machine, and renders them. Every
/// machine's runs go to one pool (`compare::run_all`, longest first), so the cores stay busy
/// until the last run ends rather than idling at the end of each machine's share.
fn render(tables: &[&Table], seed: u64) -> Result<Vec<String>> {
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let mut machines: Vec<Machine> = Vec::new();
    for m in tables.iter().flat_map(|t| t.machines()) {
        if !machines.contains(&m) {
            machines.push(m);
        }
    }
    let mut setups = Vec::new();
    for &machine in &machines {
        let mut seen = HashSet::new();
        let pairs: Vec<(String, String)> = tables
            .iter()
            .filter(|t| t.machines().contains(&machine))
            .flat_map(|t| t.runs_on(machine))
            .filter(|pair| seen.insert(pair.clone()))
            .collect();
        let args = machine_args(machine, seed)?;
        let profile = args.profile()?;
        eprintln!(
            "terrace: reproduce: {} runs on {}{}{}{}",
            pairs.len(),
            machine.profile,
            machine.fast_capacity.map(|f| format!(", fast tier {f} of each footprint")).unwrap_or_default(),
            match machine.repeat {
                0 => String::new(),
                r => format!(", repeat {r} (generator seed {})", args.seed),
            },
            match machine.scale {
                (1, 1) => String::new(),
                (1, d) => format!(", workloads at 1/{d} of their size"),
                (n, d) => format!(", workloads at {} times their size", f64::from(n) / f64::from(d)),
            }
        );
        setups.push((machine, args, profile, pairs));
    }
    let runs: Vec<Run> = setups
        .iter()
        .flat_map(|(_, args, profile, pairs)| {
            pairs.iter().map(move |(w, p)| Run { machine: args, profile, workload: w, policy: p })
        })
        .collect();
    eprintln!(
        "terrace: reproduce: {} runs for {} table{} on {} machine{}",
        runs.len(),
        tables.len(),
        if tables.len() == 1 { "" } else { "s" },
        setups.len(),
        if setups.len() == 1 { "" } else { "s" }
    );
    let results = run_all(&runs)?;
    let mut reports = Reports::new();
    let mut failures = Vec::new();
    let keys =
        setups.iter().flat_map(|(machine, _, _, pairs)| pairs.iter().map(move |(w, p)| (*machine, w, p)));
    for ((machine, w, p), r) in keys.zip(results) {
        match r {
            Ok(r) => {
                reports.insert((machine, w.clone(), p.clone()), r);
            }
            Err(e) => failures.push(crate::error_line(&e)),
        }
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("terrace: {f}");
        }
        bail!("{} runs failed (above); no table is made from a partial set of runs", failures.len());
    }
    Ok(tables.iter().map(|t| (t.render)(&Runs { all: &reports, machine: t.machine })).collect())
}

/// The simulated machine's arguments for a reproduction's machine, with the generators' `seed`.
fn machine_args(machine: Machine, seed: u64) -> Result<MachineArgs> {
    Ok(MachineArgs {
        profile: machine.profile.to_string(),
        fast_capacity: machine
            .fast_capacity
            .map(crate::run_spec::parse_capacity)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        slow_capacity: None,
        seed: seed.wrapping_add(machine.repeat),
        size_scale: f64::from(machine.scale.0) / f64::from(machine.scale.1),
    })
}

pub fn reproduce(args: ReproduceArgs) -> Result<ExitCode> {
    // The headline table has no runs: it is made from the other tables' cells.
    let want_headlines = args.only.is_empty() || args.only.iter().any(|n| n == headlines::NAME);
    let only: Vec<String> = args.only.iter().filter(|n| *n != headlines::NAME).cloned().collect();
    let tables = if only.is_empty() && !args.only.is_empty() { Vec::new() } else { selected(&only)? };
    if args.list {
        for t in &tables {
            let runs: usize = t.machines().into_iter().map(|m| t.runs_on(m).len()).sum();
            println!("{:<18} {} ({runs} runs)", t.name, t.what);
        }
        if want_headlines {
            println!(
                "{:<18} docs/policies.md \"Headlines against the seeds\": each seed's summary figures beside Terrace's, \
                 made from the tables above ({}) (no runs of its own)",
                headlines::NAME,
                headlines::sources().join(", ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(path) = args.check.as_ref().or(args.write.as_ref()) else {
        let rendered = render(&tables, args.seed)?;
        for (t, text) in tables.iter().zip(&rendered) {
            println!("{START}{}{START_TAIL}", t.name);
            println!("{}", block_lines(text).join("\n"));
            println!("{END}\n");
        }
        if want_headlines {
            if tables.is_empty() {
                bail!(
                    "the headline table is made from the doc's other tables: give it with --check FILE or \
                     --write FILE, or run every table"
                );
            }
            let cells: HashMap<String, Cells> = tables
                .iter()
                .zip(&rendered)
                .map(|(t, text)| (t.name.to_string(), Cells::parse(text)))
                .collect();
            println!("{START}{}{START_TAIL}", headlines::NAME);
            println!("{}", block_lines(&headlines::render(&cells)?).join("\n"));
            println!("{END}\n");
        }
        return Ok(ExitCode::SUCCESS);
    };
    if args.seed != 1 {
        bail!(
            "--seed {}: {}'s tables are seed 1's; print another seed's tables without --check or --write",
            args.seed,
            path.display()
        );
    }
    // The file's markers are checked before anything long runs.
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let found = blocks(path, &text)?;
    for b in &found {
        if !TABLES.iter().any(|t| t.name == b.name) && b.name != headlines::NAME {
            bail!(
                "{}:{}: no table '{}'; the tables are {}",
                path.display(),
                b.start + 1,
                b.name,
                TABLES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let missing: Vec<&str> = (tables.iter().map(|t| t.name))
        .chain(want_headlines.then_some(headlines::NAME))
        .filter(|n| !found.iter().any(|b| b.name == *n))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} has no block for {} (mark where each goes with `{START}NAME{START_TAIL}` and `{END}`)",
            path.display(),
            missing.join(", ")
        );
    }
    let rendered = render(&tables, args.seed)?;
    let mut by_name: HashMap<&str, String> = tables.iter().map(|t| t.name).zip(rendered).collect();
    if want_headlines {
        // From the other tables as the file holds them once theirs are rewritten.
        let (after, _) = rewrite(&text, &found, &by_name);
        let lines: Vec<&str> = after.lines().collect();
        let cells: HashMap<String, Cells> = (blocks(path, &after)?.iter())
            .filter(|b| b.name != headlines::NAME)
            .map(|b| (b.name.clone(), Cells::parse(&block_body(&lines, b).join("\n"))))
            .collect();
        by_name.insert(headlines::NAME, headlines::render(&cells)?);
    }
    let tables_checked = by_name.len();
    let count = |n: usize| if n == 1 { "1 table".to_string() } else { format!("{n} tables") };
    if args.check.is_some() {
        let differ = differences(&text, &found, &by_name);
        for (b, diff) in &differ {
            eprintln!(
                "terrace: {}:{}: table '{}' differs from what the runs give now:\n{diff}",
                path.display(),
                b.start + 1,
                b.name
            );
        }
        if differ.is_empty() {
            eprintln!(
                "terrace: {}: {} checked, each what the runs give now",
                path.display(),
                count(tables_checked)
            );
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "terrace: {} of {} in {} differ: {} (`terrace reproduce --write {}` rewrites them)",
            differ.len(),
            count(tables_checked),
            path.display(),
            differ.iter().map(|(b, _)| b.name.as_str()).collect::<Vec<_>>().join(", "),
            path.display()
        );
        return Ok(ExitCode::from(1));
    }
    let (new_text, changed) = rewrite(&text, &found, &by_name);
    std::fs::write(path, new_text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "terrace: {}: {} of {} rewritten{}",
        path.display(),
        changed.len(),
        count(tables_checked),
        if changed.is_empty() { String::new() } else { format!(" ({})", changed.join(", ")) }
    );
    Ok(ExitCode::SUCCESS)
}

/// The blocks of `text` (`found`) whose table differs from the one `rendered` gives for its
/// name, each with a short diff; blocks `rendered` does not name are not checked.
fn differences<'a>(
    text: &str,
    found: &'a [Block],
    rendered: &HashMap<&str, String>,
) -> Vec<(&'a Block, String)> {
    let lines: Vec<&str> = text.lines().collect();
    found
        .iter()
        .filter_map(|b| {
            let new: Vec<&str> = rendered.get(b.name.as_str())?.trim_end().lines().collect();
            let old = block_body(&lines, b);
            (old != new).then(|| (b, short_diff(&old, &new, 12)))
        })
        .collect()
}

/// `text` with the table of every block `rendered` names replaced, and the names of the blocks
/// whose table changed. Every line outside those blocks' markers is kept as it was.
fn rewrite(text: &str, found: &[Block], rendered: &HashMap<&str, String>) -> (String, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = Vec::new();
    let mut next = 0;
    let mut changed = Vec::new();
    for b in found {
        out.extend(lines[next..=b.start].iter().map(|l| l.to_string()));
        match rendered.get(b.name.as_str()) {
            Some(new) => {
                if block_body(&lines, b) != new.trim_end().lines().collect::<Vec<_>>() {
                    changed.push(b.name.clone());
                }
                out.extend(block_lines(new));
            }
            None => out.extend(lines[b.start + 1..b.end].iter().map(|l| l.to_string())),
        }
        next = b.end;
    }
    out.extend(lines[next..].iter().map(|l| l.to_string()));
    let mut new_text = out.join("\n");
    if text.ends_with('\n') {
        new_text.push('\n');
    }
    (new_text, changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use terrace_sim::TierTotals;

    #[test]
    fn blocks_are_found_and_bad_markers_refused() {
        let p = Path::new("doc.md");
        let text = "a\n<!-- reproduce: one -->\n\n| x |\n\n<!-- /reproduce -->\nb\n<!-- reproduce: two -->\n<!-- /reproduce -->\n";
        let b = blocks(p, text).unwrap();
        assert_eq!(
            b,
            vec![
                Block { name: "one".into(), start: 1, end: 5 },
                Block { name: "two".into(), start: 7, end: 8 }
            ]
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(block_body(&lines, &b[0]), vec!["| x |"]);
        assert!(block_body(&lines, &b[1]).is_empty());
        for (bad, says) in [
            ("<!-- reproduce: a -->\n<!-- reproduce: b -->\n", "doc.md:2: block 'b' starts inside block 'a'"),
            ("<!-- /reproduce -->\n", "doc.md:1: `<!-- /reproduce -->` with no block open"),
            ("x\n<!-- reproduce: a -->\n", "doc.md:2: block 'a' has no `<!-- /reproduce -->`"),
            (
                "<!-- reproduce: a -->\n<!-- /reproduce -->\n<!-- reproduce: a -->\n<!-- /reproduce -->\n",
                "doc.md:3: a second block 'a'",
            ),
            ("<!-- reproduce: a\n", "doc.md:1: a start marker is"),
        ] {
            let e = blocks(p, bad).unwrap_err().to_string();
            assert!(e.starts_with(says), "{bad:?}: {e}");
        }
    }

    /// --check names each block whose table differs (and only those); --write replaces the
    /// tables it has and keeps every other line, blank lines and the last newline included.
    #[test]
    fn check_names_the_tables_that_differ_and_write_touches_only_their_blocks() {
        let p = Path::new("doc.md");
        let text = "# Doc\n\nprose | with a bar\n<!-- reproduce: a -->\n\n| x |\n|---|\n| 1 |\n\n<!-- /reproduce -->\n\
                    middle\n<!-- reproduce: b -->\n| y |\n<!-- /reproduce -->\n<!-- reproduce: c -->\n\n| z |\n\n<!-- /reproduce -->\nend\n";
        let found = blocks(p, text).unwrap();
        let rendered: HashMap<&str, String> =
            [("a", "| x |\n|---|\n| 2 |\n".to_string()), ("b", "| y |\n".to_string())].into_iter().collect();
        let differ = differences(text, &found, &rendered);
        assert_eq!(differ.len(), 1);
        assert_eq!(differ[0].0.name, "a");
        assert_eq!(differ[0].1, "    - | 1 |\n    + | 2 |");
        let (new, changed) = rewrite(text, &found, &rendered);
        assert_eq!(changed, vec!["a".to_string()]);
        assert_eq!(
            new,
            text.replace("| 1 |", "| 2 |")
                .replace("<!-- reproduce: b -->\n| y |\n", "<!-- reproduce: b -->\n\n| y |\n\n")
        );
        let again = blocks(p, &new).unwrap();
        assert!(differences(&new, &again, &rendered).is_empty());
        assert_eq!(rewrite(&new, &again, &rendered), (new.clone(), vec![]));
    }

    #[test]
    fn the_diff_shows_only_changed_lines() {
        let old = ["| a | 1 |", "| b | 2 |", "| c | 3 |"];
        let new = ["| a | 1 |", "| b | 4 |", "| c | 3 |", "| d | 5 |"];
        assert_eq!(short_diff(&old, &new, 10), "    - | b | 2 |\n    + | b | 4 |\n    + | d | 5 |");
        assert_eq!(short_diff(&old, &new, 1), "    - | b | 2 |\n    ... and 2 more changed lines");
    }

    #[test]
    fn percentages_are_signed_and_zero_is_plain() {
        assert_eq!(pct(0.468), "+47%");
        assert_eq!(pct(-1.113), "-111%");
        assert_eq!(pct(-0.004), "0%");
        assert_eq!(pct1(0.0269), "+2.7%");
        assert!((geomean(&[0.4, 1.0, 1.0, 1.0]) - 0.795).abs() < 1e-3);
    }

    #[test]
    fn every_run_names_a_known_workload_and_policy() {
        let workloads: Vec<&str> = terrace_workloads::list().iter().map(|w| w.name).collect();
        for t in TABLES {
            for (w, p) in t.machines().into_iter().flat_map(|m| t.runs_on(m)) {
                let base = w.split_once(':').map_or(w.as_str(), |(base, _)| base);
                assert!(workloads.contains(&base), "{}: unknown workload {w}", t.name);
                if w.contains(':') {
                    terrace_workloads::build(&w, 1, 1.0 / 64.0).unwrap_or_else(|e| panic!("{}: {e}", t.name));
                }
                assert_eq!(
                    terrace_policy::canonical(&p).unwrap(),
                    p,
                    "{}: {p} is not a canonical name",
                    t.name
                );
            }
        }
    }

    /// A stand-in report of `w` under `p` that ran `runtime_ns`, every other figure small and
    /// nonzero; two programs, for the tables of a co-run (Fig. 8), which others do not read.
    fn stand_in(w: &str, p: &str, runtime_ns: f64) -> RunReport {
        let tier = |n: u64| TierTotals { reads: 100 * n, writes: 10 * n, ..TierTotals::default() };
        RunReport {
            workload: w.to_string(),
            policy: p.to_string(),
            profile: "optane-2019".into(),
            page_bytes: 4096,
            footprint_bytes: 54 << 20,
            fast_capacity_bytes: 27 << 20,
            accesses: 1000,
            runtime_ns,
            tiers: vec![tier(2), tier(1)],
            pages_migrated: 1,
            bytes_migrated: 4096,
            failed_moves: 0,
            tlb_shootdowns: 0,
            pages_switched: 0,
            shadows_dropped: 0,
            shadow_peak_bytes: 0,
            pages_not_done: 0,
            split_page_accesses: 0,
            migration_ns: 1.0,
            mover_ns: vec![1.0],
            move_wait_ns: 1.0,
            tracking_ns: 1.0,
            stall_ns: 1.0,
            energy_j: 1.0,
            objects: Default::default(),
            programs: (0..2)
                .map(|k| terrace_sim::corun::ProgramRun {
                    name: format!("p{k}"),
                    priority: k,
                    start_ns: 0.0,
                    end_ns: runtime_ns + k as f64,
                    ..Default::default()
                })
                .collect(),
        }
    }

    /// Every table renders from exactly the runs it lists (a stand-in report for each), without
    /// running anything: a table that reads a run it does not list panics here, not after minutes.
    #[test]
    fn every_table_renders_from_the_runs_it_lists() {
        for t in TABLES {
            let mut reports = Reports::new();
            for (i, (m, (w, p))) in t
                .machines()
                .into_iter()
                .flat_map(|m| t.runs_on(m).into_iter().map(move |r| (m, r)))
                .enumerate()
            {
                let r = stand_in(&w, &p, 1e6 + i as f64);
                reports.insert((m, w, p), r);
            }
            let text = (t.render)(&Runs { all: &reports, machine: t.machine });
            let rows: Vec<&str> = text.lines().collect();
            assert!(rows.len() >= 3, "{}: {text}", t.name);
            let columns = rows[0].matches(" | ").count();
            for r in rows.iter().filter(|r| !r.starts_with("|---")) {
                assert_eq!(
                    r.replace("\\|", "").matches(" | ").count(),
                    columns,
                    "{}: ragged row {r}",
                    t.name
                );
            }
        }
    }

    /// hpwp's GUPS gain is the mean of the 5 runs, as HPWP §6.2 averages its 5, beside the range
    /// they span.
    #[test]
    fn the_gups_summary_is_the_mean_of_five_runs() {
        let mut reports = Reports::new();
        for (k, m) in std::iter::once(SEED_DRAM).chain(GUPS_REPEATS).enumerate() {
            for (w, _) in GUPS_HOT_SETS {
                // hemem takes 0, 10, 20, 30 and 40% longer than hpwp on the five runs.
                for (p, ns) in [("hemem", 100.0 + 10.0 * k as f64), ("hpwp", 100.0), (FIRST_TOUCH, 500.0)] {
                    reports.insert((m, w.to_string(), p.to_string()), stand_in(w, p, ns));
                }
            }
        }
        let text = hpwp_gups_summary(&Runs { all: &reports, machine: SEED_DRAM });
        for (w, _) in GUPS_HOT_SETS {
            let row = text.lines().find(|l| l.starts_with(&format!("| {w} |"))).expect("a row per hot set");
            assert!(row.contains("| +20.0% | +0.0% to +40.0% |"), "{row}");
        }
    }

    #[test]
    fn only_names_known_tables() {
        assert_eq!(selected(&[]).unwrap().len(), TABLES.len());
        assert_eq!(selected(&["bfs".into()]).unwrap().len(), 1);
        let e = selected(&["nope".into()]).err().unwrap().to_string();
        assert!(e.starts_with("no table 'nope'; the tables are builtin, "), "{e}");
    }
}
