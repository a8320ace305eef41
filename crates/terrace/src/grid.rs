//! Grids of `terrace compare`: the axes (workloads, policies, profiles, fast-tier sizes, seeds)
//! from the command line or a TOML file, their cells, the shards a grid is dealt into for several
//! machines, the shard files, and `terrace compare merge` (docs/grids.md).
//!
//! A cell is one workload on one machine (profile, fast-tier size, seed) under every policy of
//! the grid, first-touch among them: a shard runs whole cells, so it has each of its rows'
//! reference and computes their speedups itself, and merged shards equal one machine's run.

use crate::compare::{self, CellResult};
use crate::run_spec::{parse_capacity, parse_size, MachineArgs};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use terrace_sim::{Profile, RunReport};

/// A grid's axes as given: a grid file's keys, or compare's flags (each list flag a list).
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct GridAxes {
    pub workloads: Option<Vec<String>>,
    pub policies: Option<Vec<String>>,
    pub sweep: Option<Vec<String>>,
    pub profile: Option<Vec<String>>,
    pub fast_capacity: Option<Vec<String>>,
    pub slow_capacity: Option<String>,
    pub seed: Option<Vec<u64>>,
    pub size_scale: Option<f64>,
}

impl GridAxes {
    /// Reads a grid file; a bad one is refused in one line naming the file (and an unknown key
    /// by name).
    pub fn read(path: &Path) -> Result<GridAxes> {
        let text = terrace_input::read_text("grid", path)?;
        toml::from_str(&text).map_err(|e| {
            anyhow!(
                "grid '{}' is invalid: {}",
                path.display(),
                terrace_input::parse_error_line(&text, e.message(), e.span())
            )
        })
    }
}

/// One profile of a grid: as given, its name, and the policies run on it (the default
/// comparison leaves out those that manage fewer tiers than it has).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GridProfile {
    pub spec: String,
    pub name: String,
    pub policies: Vec<String>,
}

/// A grid after defaults and checks: what every shard of it records, and what `merge` compares
/// to tell shards of one grid from another's.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    pub workloads: Vec<String>,
    pub profiles: Vec<GridProfile>,
    /// Each a capacity as given ("40%", "48MiB"); none: each workload's suggested size.
    pub fast_capacity: Vec<Option<String>>,
    pub seed: Vec<u64>,
    pub size_scale: f64,
    pub slow_capacity: Option<u64>,
}

/// Where a cell sits on the grid's axes (indexes into the grid's lists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub profile: usize,
    pub fast: usize,
    pub seed: usize,
    pub workload: usize,
}

impl Grid {
    /// How many cells the grid has.
    pub fn cell_count(&self) -> usize {
        self.profiles.len() * self.fast_capacity.len() * self.seed.len() * self.workloads.len()
    }

    /// Cell `k` in grid order: profiles outermost, then fast-tier sizes, seeds, and workloads
    /// innermost (the order rows are printed in).
    pub fn cell(&self, k: usize) -> Cell {
        let w = self.workloads.len();
        let s = self.seed.len();
        let f = self.fast_capacity.len();
        Cell { workload: k % w, seed: (k / w) % s, fast: (k / w / s) % f, profile: k / w / s / f }
    }

    /// The machine group of a cell (profile, fast-tier size, seed): one table of the output.
    pub fn group(&self, cell: Cell) -> usize {
        (cell.profile * self.fast_capacity.len() + cell.fast) * self.seed.len() + cell.seed
    }

    pub fn group_count(&self) -> usize {
        self.profiles.len() * self.fast_capacity.len() * self.seed.len()
    }

    /// The runs a cell holds: one per policy of its profile.
    pub fn runs_in(&self, cell: Cell) -> usize {
        self.profiles[cell.profile].policies.len()
    }

    pub fn fast_capacity_of(&self, cell: Cell) -> Option<terrace_sim::Capacity> {
        self.fast_capacity[cell.fast]
            .as_deref()
            .map(|c| parse_capacity(c).expect("checked when the grid was made"))
    }

    /// The simulated machine's arguments for a cell.
    pub fn machine(&self, cell: Cell) -> MachineArgs {
        MachineArgs {
            profile: self.profiles[cell.profile].spec.clone(),
            fast_capacity: self.fast_capacity_of(cell),
            slow_capacity: self.slow_capacity,
            seed: self.seed[cell.seed],
            size_scale: self.size_scale,
        }
    }

    /// The line above a group's table: its profile and fast tier, and its seed when the grid
    /// has several (one machine's comparison prints the first two alone, as it always has).
    pub fn group_header(&self, cell: Cell) -> String {
        let mut line = format!(
            "profile {}; fast tier {}",
            self.profiles[cell.profile].name,
            compare::describe_capacity(self.fast_capacity_of(cell))
        );
        if self.seed.len() > 1 {
            line.push_str(&format!("; seed {}", self.seed[cell.seed]));
        }
        line
    }
}

/// Builds a grid from its axes, loading each profile and checking every policy before anything
/// runs. Returns the loaded profiles too, in the grid's order.
pub fn make_grid(axes: GridAxes) -> Result<(Grid, Vec<Profile>)> {
    let workloads = match axes.workloads {
        Some(w) if !w.is_empty() => w,
        Some(_) => bail!("the grid names no workload; give at least one (`terrace list workloads`)"),
        None => terrace_workloads::DEFAULT_SUITE.iter().map(|s| s.to_string()).collect(),
    };
    let named = axes.policies.unwrap_or_default();
    let sweep = axes.sweep.unwrap_or_default();
    let specs = axes.profile.unwrap_or_else(|| vec![terrace_sim::DEFAULT_PROFILE.to_string()]);
    if specs.is_empty() {
        bail!("the grid names no profile; give at least one (`terrace list profiles`)");
    }
    let mut profiles = Vec::new();
    let mut grid_profiles = Vec::new();
    for spec in specs {
        let profile = Profile::load(&spec)?;
        let policies = compare::policies(&named, &sweep, &profile)?;
        grid_profiles.push(GridProfile { spec, name: profile.name.clone(), policies });
        profiles.push(profile);
    }
    let fast_capacity: Vec<Option<String>> = match axes.fast_capacity {
        None => vec![None],
        Some(list) if list.is_empty() => {
            bail!("the grid's fast_capacity lists no size; leave it out for each workload's own")
        }
        Some(list) => {
            for c in &list {
                parse_capacity(c).map_err(|e| anyhow!("fast_capacity {e}"))?;
            }
            list.into_iter().map(Some).collect()
        }
    };
    let seed = axes.seed.unwrap_or_else(|| vec![1]);
    if seed.is_empty() {
        bail!("the grid's seed lists no seed; leave it out for seed 1");
    }
    let size_scale = axes.size_scale.unwrap_or(1.0);
    let slow_capacity =
        axes.slow_capacity.map(|s| parse_size(&s).map_err(|e| anyhow!("slow_capacity {e}"))).transpose()?;
    Ok((
        Grid { workloads, profiles: grid_profiles, fast_capacity, seed, size_scale, slow_capacity },
        profiles,
    ))
}

/// `--shard I/N`: the I-th of N shards, counting from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether cell `k` is this shard's: cells are dealt round the shards in grid order, so the
    /// choice depends on the grid alone, never on the machine or the order runs finish in.
    pub fn owns(&self, k: usize) -> bool {
        k % self.count == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Parses `I/N`.
pub fn parse_shard(s: &str) -> Result<Shard, String> {
    let bad = || format!("'{s}' is not a shard; give I/N, the I-th of N shards counting from 0 (0/4 to 3/4)");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let index: usize = i.trim().parse().map_err(|_| bad())?;
    let count: usize = n.trim().parse().map_err(|_| bad())?;
    if count == 0 {
        return Err(format!("'{s}': a grid is dealt into one shard or more"));
    }
    if index >= count {
        return Err(format!("'{s}': shards count from 0, so the last of {count} is {}/{count}", count - 1));
    }
    Ok(Shard { index, count })
}

/// What a shard file says it is, so that `merge` refuses anything else.
const SHARD_FORMAT: &str = "terrace compare shard, version 1";

/// A shard file: the grid it is part of, which shard it is, and its cells' rows (each row as
/// `compare --json` writes it) and failed runs. `R` is the row: `compare`'s when written, the
/// report it carries when read.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardFile<R> {
    format: String,
    shard: String,
    grid: Grid,
    cells: Vec<ShardCell<R>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardCell<R> {
    cell: usize,
    rows: Vec<R>,
    failures: Vec<String>,
}

/// Writes a shard's file.
pub fn write_shard(path: &Path, grid: &Grid, shard: Shard, results: &[CellResult]) -> Result<()> {
    let file = ShardFile {
        format: SHARD_FORMAT.into(),
        shard: shard.to_string(),
        grid: grid.clone(),
        cells: results
            .iter()
            .map(|c| ShardCell { cell: c.cell, rows: compare::rows(grid, c), failures: c.failures.clone() })
            .collect(),
    };
    crate::write_json(&path.to_path_buf(), &file)
}

/// A shard file as read: a row's report is all `merge` needs, as it works the rest out again
/// exactly as `compare` did.
struct ReadShard {
    path: PathBuf,
    shard: Shard,
    grid: Grid,
    cells: Vec<ShardCell<RunReport>>,
}

fn read_shard(path: &Path) -> Result<ReadShard> {
    let shown = path.display();
    let (mut file, _) = terrace_input::open_regular("shard", path)?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text)
        .with_context(|| format!("cannot read shard '{shown}'"))?;
    if text.trim_start().starts_with('[') {
        bail!(
            "'{shown}' is a whole comparison's JSON, not a shard's; write shards with \
             `terrace compare --shard I/N --json FILE`"
        );
    }
    let file: ShardFile<RunReport> = serde_json::from_str(&text)
        .map_err(|e| anyhow!("'{shown}' is not a shard of `terrace compare --shard I/N --json FILE`: {e}"))?;
    if file.format != SHARD_FORMAT {
        bail!(
            "'{shown}' is a shard of another format ('{}'; this terrace reads '{SHARD_FORMAT}')",
            file.format
        );
    }
    let shard = parse_shard(&file.shard).map_err(|e| anyhow!("'{shown}' says it is shard {e}"))?;
    // What compare checked when it made the grid, checked again: the file may have been edited.
    for c in file.grid.fast_capacity.iter().flatten() {
        parse_capacity(c).map_err(|e| anyhow!("'{shown}': its grid's fast_capacity {e}"))?;
    }
    Ok(ReadShard { path: path.to_path_buf(), shard, grid: file.grid, cells: file.cells })
}

/// The first of a grid's keys on which two grids differ, to name it.
fn differing_key(a: &Grid, b: &Grid) -> String {
    let (a, b) = (serde_json::to_value(a).unwrap_or_default(), serde_json::to_value(b).unwrap_or_default());
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            a.iter().find(|(k, v)| b.get(*k) != Some(v)).map_or("keys".into(), |(k, _)| k.clone())
        }
        _ => "keys".into(),
    }
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shard files (`terrace compare --shard I/N --json FILE`), every shard of one grid once.
    #[arg(required = true, value_name = "SHARD.json")]
    pub shards: Vec<PathBuf>,
    /// What the grid's `compare` would write besides the terminal.
    #[command(flatten)]
    pub outputs: compare::Outputs,
}

/// `--plot` draws one machine's comparison (bars by workload and policy): a grid of several
/// profiles, fast-tier sizes or seeds is refused in one line before anything runs.
pub fn check_plottable(grid: &Grid) -> Result<()> {
    let machines = grid.group_count();
    if machines > 1 {
        anyhow::bail!(
            "--plot draws one machine's comparison, and this grid has {machines} (profiles x fast-tier sizes x \
             seeds): plot one profile, one fast-tier size and one seed at a time"
        );
    }
    Ok(())
}

/// `terrace compare merge`: checks that the files are every shard of one grid, once each and
/// whole, then prints and writes what one machine running the grid would have.
pub fn merge(args: MergeArgs) -> Result<()> {
    args.outputs.check()?;
    let shards = args.shards.iter().map(|p| read_shard(p)).collect::<Result<Vec<_>>>()?;
    let first = &shards[0];
    let count = first.shard.count;
    let mut by_index: Vec<Option<&ReadShard>> = vec![None; count];
    for s in &shards {
        if s.grid != first.grid {
            bail!(
                "'{}' and '{}' are shards of different grids (they differ in `{}`)",
                first.path.display(),
                s.path.display(),
                differing_key(&first.grid, &s.grid)
            );
        }
        if s.shard.count != count {
            bail!(
                "'{}' is shard {} but '{}' is shard {}: a grid is merged from the shards of one split",
                s.path.display(),
                s.shard,
                first.path.display(),
                first.shard
            );
        }
        if let Some(other) = by_index[s.shard.index] {
            bail!("'{}' and '{}' are both shard {}", other.path.display(), s.path.display(), s.shard);
        }
        by_index[s.shard.index] = Some(s);
    }
    let missing: Vec<String> = (0..count)
        .filter(|&i| by_index[i].is_none())
        .map(|i| Shard { index: i, count }.to_string())
        .collect();
    if !missing.is_empty() {
        bail!(
            "shard{} {} of the grid {} missing; merge needs all {count}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" }
        );
    }
    let grid = &first.grid;
    let mut results: Vec<CellResult> = Vec::with_capacity(grid.cell_count());
    for s in &shards {
        let owned: Vec<usize> = (0..grid.cell_count()).filter(|&k| s.shard.owns(k)).collect();
        let held: Vec<usize> = s.cells.iter().map(|c| c.cell).collect();
        let whole = held == owned
            && s.cells.iter().all(|c| c.rows.len() + c.failures.len() == grid.runs_in(grid.cell(c.cell)));
        if !whole {
            bail!(
                "'{}' does not hold shard {}'s runs in full (cut short or edited?); run that shard again",
                s.path.display(),
                s.shard
            );
        }
        results.extend(s.cells.iter().map(|c| CellResult {
            cell: c.cell,
            reports: c.rows.clone(),
            failures: c.failures.clone(),
        }));
    }
    results.sort_by_key(|c| c.cell);
    let o = &args.outputs;
    if o.plot.is_some() {
        check_plottable(grid)?;
    }
    compare::present(grid, &results, o.json.as_deref(), o.csv.as_deref(), o.plot.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_deal_every_cell_to_one_shard() {
        assert_eq!(parse_shard("2/3"), Ok(Shard { index: 2, count: 3 }));
        assert!(parse_shard("3/3").unwrap_err().contains("the last of 3 is 2/3"));
        assert!(parse_shard("0/0").is_err());
        assert!(parse_shard("1").is_err());
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        for k in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.owns(k)).count(), 1, "cell {k}");
        }
    }

    #[test]
    fn cells_enumerate_workloads_innermost() {
        let grid = Grid {
            workloads: vec!["a".into(), "b".into()],
            profiles: vec![GridProfile { spec: "default".into(), name: "default".into(), policies: vec![] }],
            fast_capacity: vec![Some("25%".into()), Some("50%".into())],
            seed: vec![1, 2, 3],
            size_scale: 1.0,
            slow_capacity: None,
        };
        assert_eq!(grid.cell_count(), 12);
        assert_eq!(grid.cell(0), Cell { profile: 0, fast: 0, seed: 0, workload: 0 });
        assert_eq!(grid.cell(1), Cell { profile: 0, fast: 0, seed: 0, workload: 1 });
        assert_eq!(grid.cell(2), Cell { profile: 0, fast: 0, seed: 1, workload: 0 });
        assert_eq!(grid.cell(11), Cell { profile: 0, fast: 1, seed: 2, workload: 1 });
        assert_eq!(grid.group(grid.cell(11)), 5);
        assert_eq!(grid.machine(grid.cell(7)).seed, 1);
    }
}
