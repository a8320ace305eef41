//! `terrace bench migrate` on a live host: how fast move_pages(2) moves this process's own memory
//! between two NUMA nodes, per page size (4 KiB, 2 MiB THP), thread count, batch size and kind of
//! move (one way each direction, and exchange), beside the memcpy bandwidth between the same nodes
//! measured in the same run.
//!
//! Every cell moves a whole region of `mib` MiB that was first touched on the source node, through
//! the live machine's own mover ([`crate::migrate::execute`], what `LiveMachine::apply` calls):
//! batches of `batch_pages` pages (one address per huge page for 2 MiB pages) with `threads`
//! callers, each batch checked afterwards as the machine checks it. Afterwards the kernel is
//! asked where every 4 KiB page is: a cell whose pages did not all land reports that instead of a
//! figure. An exchange starts with the first half of the region on the source node and the second
//! half on the other, and swaps them as the live machine carries an exchange out
//! ([`crate::migrate::execute_exchange`]): pairs of batches, a demotion batch then its partners'
//! promotion batch, each caller working through whole pairs (mainline Linux has no
//! exchange_pages(2)). "Two one-way" swaps the same halves as every demotion, then every
//! promotion. Both count all bytes moved.
//! The 2 MiB cells run only if the kernel really backed the region with transparent huge pages
//! (checked in /proc/self/smaps) and report "no THP" otherwise.

use crate::aligned_mapping::AlignedMapping;
use crate::migrate::{self, PageMove, PairMoves};
use crate::numa_sys;
use crate::topology::{Topology, TopologyError};
use serde::Serialize;
use std::io;
use std::path::Path;
use std::sync::Barrier;
use std::time::Instant;
use terrace_model::MoveOptions;

const SMALL: u64 = 4096;
const HUGE: u64 = 2 << 20;

/// Pages per move_pages call measured by default: 1 to 512 (issue 13).
pub const DEFAULT_BATCHES: [u32; 4] = [1, 8, 64, 512];

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Region size, MiB; a positive multiple of 4 (two halves of whole 2 MiB pages).
    pub mib: u64,
    /// Thread counts 1..=max_threads.
    pub max_threads: u32,
    /// Pages per move_pages call.
    pub batches: Vec<u32>,
    /// Source and destination nodes; `None` = the first two nodes with memory.
    pub nodes: Option<(u32, u32)>,
    /// Runs per cell and per memcpy figure; the best one counts.
    pub repeat: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options { mib: 64, max_threads: 4, batches: DEFAULT_BATCHES.to_vec(), nodes: None, repeat: 3 }
    }
}

/// Page size of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Page {
    #[serde(rename = "4KiB")]
    Small,
    #[serde(rename = "2MiB")]
    Huge,
}

impl Page {
    pub fn bytes(self) -> u64 {
        match self {
            Page::Small => SMALL,
            Page::Huge => HUGE,
        }
    }
}

impl std::fmt::Display for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Page::Small => "4KiB",
            Page::Huge => "2MiB",
        })
    }
}

/// What a cell moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// The whole region from the source node to the destination node.
    Demote,
    /// The whole region back from the destination node to the source node.
    Promote,
    /// Half on each node, swapped as the live machine swaps them: pairs of batches, each
    /// demotion batch followed by its partners' promotion batch.
    Exchange,
    /// The same swap as two one-way moves: every demotion, then every promotion.
    TwoOneWay,
}

impl Op {
    pub const ALL: [Op; 4] = [Op::Demote, Op::Promote, Op::Exchange, Op::TwoOneWay];
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Cell {
    pub page: Page,
    pub threads: u32,
    pub batch_pages: u32,
    pub op: Op,
}

/// What a cell came to.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Outcome {
    Measured {
        seconds: f64,
        gb_s: f64,
        /// `gb_s` over the memcpy bandwidth with as many threads in the same direction(s).
        ratio_to_memcpy: f64,
    },
    /// The kernel did not back the region with transparent huge pages.
    NoThp { reason: String },
    /// Some pages did not land where asked, or the call failed.
    Failed { reason: String },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellResult {
    #[serde(flatten)]
    pub cell: Cell,
    /// Bytes moved (both directions for an exchange).
    pub bytes: u64,
    pub outcome: Outcome,
}

impl CellResult {
    pub fn gb_s(&self) -> Option<f64> {
        match self.outcome {
            Outcome::Measured { gb_s, .. } => Some(gb_s),
            _ => None,
        }
    }
}

/// memcpy between a buffer on one node and one on the other.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MemcpyFigure {
    pub threads: u32,
    pub from: u32,
    pub to: u32,
    /// Best of `repeat` copies.
    pub gb_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub source_node: u32,
    pub destination_node: u32,
    pub bytes: u64,
    /// /sys/kernel/mm/transparent_hugepage/enabled as read.
    pub thp_setting: String,
    /// Runs per figure; each figure is the best of them.
    pub repeat: u32,
    pub memcpy: Vec<MemcpyFigure>,
    pub cells: Vec<CellResult>,
    /// What the grid says about the goal for 2 MiB pages (at least half of memcpy).
    pub summary: Option<Summary>,
}

impl Report {
    /// memcpy bandwidth with `threads` threads from `from` to `to`.
    pub fn memcpy_gb_s(&self, threads: u32, from: u32, to: u32) -> Option<f64> {
        self.memcpy.iter().find(|m| m.threads == threads && m.from == from && m.to == to).map(|m| m.gb_s)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(
        "terrace bench migrate needs two NUMA nodes with memory; this host has {found} ({nodes}). \
         Run it in the guest (tests/vm) or use --simulated"
    )]
    NeedsTwoNodes { found: usize, nodes: String },
    #[error("{0}")]
    BadOptions(String),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "the data in the region changed while its pages moved (4 KiB page {page}): a kernel or Terrace bug"
    )]
    Corrupted { page: u64 },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError::Io { what, source }
}

/// The nodes with memory, from the host's sysfs.
pub fn memory_nodes() -> Result<Vec<u32>, BenchError> {
    let topo = Topology::read(Path::new("/sys"), Path::new("/proc"))?;
    Ok(topo.nodes.iter().filter(|n| n.mem_total_bytes > 0).map(|n| n.id).collect())
}

/// Checks the options and the host before anything is allocated.
pub fn check(opts: &Options) -> Result<(u32, u32), BenchError> {
    if opts.mib == 0 || !opts.mib.is_multiple_of(4) {
        return Err(BenchError::BadOptions(format!(
            "--mib must be a positive multiple of 4 (two halves of whole 2 MiB pages), not {}",
            opts.mib
        )));
    }
    if opts.max_threads == 0 {
        return Err(BenchError::BadOptions("--threads must be at least 1".into()));
    }
    if opts.batches.is_empty() || opts.batches.contains(&0) {
        return Err(BenchError::BadOptions("--batches needs one or more positive page counts".into()));
    }
    pick_nodes(&memory_nodes()?, opts.nodes)
}

/// The two nodes to move between, from the host's memory nodes and the ones asked for.
fn pick_nodes(nodes: &[u32], wanted: Option<(u32, u32)>) -> Result<(u32, u32), BenchError> {
    if nodes.len() < 2 {
        return Err(BenchError::NeedsTwoNodes {
            found: nodes.len(),
            nodes: if nodes.is_empty() {
                "none".into()
            } else {
                format!("node {}", crate::topology::format_list(nodes))
            },
        });
    }
    match wanted {
        None => Ok((nodes[0], nodes[1])),
        Some((a, b)) if a != b && nodes.contains(&a) && nodes.contains(&b) => Ok((a, b)),
        Some((a, b)) => Err(BenchError::BadOptions(format!(
            "nodes {a} and {b} must be two different nodes with memory (this host: {})",
            crate::topology::format_list(nodes)
        ))),
    }
}

/// An anonymous mapping, 2 MiB-aligned, first touched on one node.
struct Region {
    start: u64,
    len: u64,
    mapping: AlignedMapping,
}

impl Region {
    /// Maps `len` bytes, asks for huge pages or forbids them, touches every page under a policy
    /// bound to `node`, writes each 4 KiB page's index into it, then drops the policy.
    fn new(len: u64, huge: bool, node: u32) -> Result<Region, BenchError> {
        // The advice is required: the benchmark's page size depends on it.
        let mapping = AlignedMapping::new(len as usize, huge, true).map_err(io_err("mmap and madvise"))?;
        let start = mapping.addr() as u64;
        numa_sys::mbind(start as usize, len as usize, numa_sys::MPOL_BIND, Some(node), 0)
            .map_err(io_err(format!("mbind to node {node}")))?;
        let mut region = Region { start, len, mapping };
        let bytes = region.mapping.bytes_mut();
        bytes.fill(0x5a);
        for (i, page) in bytes.chunks_exact_mut(SMALL as usize).enumerate() {
            page[..8].copy_from_slice(&(i as u64).to_le_bytes());
        }
        numa_sys::mbind(start as usize, len as usize, numa_sys::MPOL_DEFAULT, None, 0)
            .map_err(io_err("mbind back to the default policy"))?;
        Ok(region)
    }

    /// One address per page of `page`.
    fn addrs(&self, page: u64) -> Vec<u64> {
        (0..self.len / page).map(|i| self.start + i * page).collect()
    }

    /// Bytes of this region in transparent huge pages, from /proc/self/smaps.
    fn thp_bytes(&self) -> Result<u64, BenchError> {
        self.mapping.huge_bytes().map_err(io_err("reading /proc/self/smaps"))
    }

    /// Whether every 4 KiB page still holds its index and filler; the first bad page if not.
    fn first_corrupt_page(&self) -> Option<u64> {
        self.mapping.bytes().chunks_exact(SMALL as usize).enumerate().find_map(|(i, page)| {
            let ok = page[..8] == (i as u64).to_le_bytes() && page[8..].iter().all(|&b| b == 0x5a);
            (!ok).then_some(i as u64)
        })
    }
}

/// Sum of AnonHugePages over the smaps entries lying inside `[start, end)`, in bytes.
pub fn anon_huge_bytes(smaps: &str, start: u64, end: u64) -> u64 {
    let mut inside = false;
    let mut total = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                inside = a >= start && b <= end;
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                total += kb * 1024;
            }
        }
    }
    total
}

/// Moves of all of `addrs` to `node`, for the live machine's migrator.
fn moves_to(addrs: &[u64], node: u32) -> Vec<PageMove> {
    addrs.iter().enumerate().map(|(i, &addr)| PageMove { addr, node: node as i32, tag: i as u32 }).collect()
}

/// What a cell hands the live machine's mover.
enum Work {
    /// One-way moves, one list after the other ([`migrate::execute`], as `apply` does).
    OneWay(Vec<Vec<PageMove>>),
    /// Exchanges as pairs of batches ([`migrate::execute_exchange`], as `apply` does).
    Paired(Vec<PairMoves>),
}

/// Runs `work` through the live machine's own mover with `threads` callers; returns the seconds
/// it took, or what did not move.
fn run_mover(work: &Work, threads: u32, batch_pages: u32) -> Result<f64, String> {
    let opts = MoveOptions { batch_pages, concurrent_batches: threads, ..MoveOptions::default() };
    let did_not_move = |failed: &[(u32, terrace_model::MoveFailure)], of: usize| {
        failed.first().map(|(_, why)| format!("{} of {of} pages did not move (first: {why:?})", failed.len()))
    };
    match work {
        Work::OneWay(phases) => {
            let mut secs = 0.0;
            for moves in phases {
                let out = migrate::execute(0, moves, &opts, "bench migrate");
                secs += out.elapsed.as_secs_f64();
                if let Some(e) = did_not_move(&out.failed, moves.len()) {
                    return Err(e);
                }
            }
            Ok(secs)
        }
        Work::Paired(pairs) => {
            let out = migrate::execute_exchange(0, pairs, &opts, "bench migrate", None);
            if let Some(e) = did_not_move(&out.moves.failed, 2 * pairs.len()) {
                return Err(e);
            }
            if let Some(p) = out.pairs.iter().find(|p| !p.exchanged()) {
                return Err(format!("an exchange did not happen: {p:?}"));
            }
            Ok(out.moves.elapsed.as_secs_f64())
        }
    }
}

/// Pairs that swap `down` (to `to_down`) with `up` (to `to_up`), page by page; tags number the
/// down pages first, then the up pages.
fn pairs_of(down: &[u64], to_down: u32, up: &[u64], to_up: u32) -> Vec<PairMoves> {
    let n = down.len() as u32;
    down.iter()
        .zip(up)
        .enumerate()
        .map(|(i, (&d, &u))| {
            let i = i as u32;
            PairMoves {
                down_tag: i,
                down: vec![PageMove { addr: d, node: to_down as i32, tag: i }],
                up_tag: n + i,
                up: vec![PageMove { addr: u, node: to_up as i32, tag: n + i }],
            }
        })
        .collect()
}

/// Moves pages outside any measurement (batches of 512, one thread) and checks they landed.
fn place(addrs: &[u64], node: u32, check: &[u64]) -> Result<(), String> {
    run_mover(&Work::OneWay(vec![moves_to(addrs, node)]), 1, 512)?;
    let off = not_on(check, node)?;
    if off > 0 {
        return Err(format!("{off} 4 KiB pages could not be placed on node {node}"));
    }
    Ok(())
}

/// How many of `pages` (4 KiB addresses) are not on `node`.
fn not_on(pages: &[u64], node: u32) -> Result<u64, String> {
    let mut status = vec![0i32; pages.len()];
    numa_sys::query_nodes(0, pages, &mut status).map_err(|e| format!("cannot ask where pages are: {e}"))?;
    Ok(status.iter().filter(|&&s| s != node as i32).count() as u64)
}

/// Copies `len` bytes from `src` to `dst` with `threads` threads, best of `repeat`, GB/s.
fn memcpy_gb_s(src: &Region, dst: &Region, threads: u32, repeat: u32) -> f64 {
    let len = src.len.min(dst.len) as usize;
    let per = len.div_ceil(threads.max(1) as usize).div_ceil(SMALL as usize) * SMALL as usize;
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let barrier = Barrier::new(threads as usize + 1);
        let mut secs = 0.0;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..len.div_ceil(per))
                .map(|i| {
                    let (from, to) = (src.start as usize + i * per, dst.start as usize + i * per);
                    let n = per.min(len - i * per);
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        // SAFETY: the two regions are distinct live mappings of at least `len`
                        // bytes; each thread copies its own disjoint range.
                        unsafe { std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, n) };
                    })
                })
                .collect();
            // Threads that got no share still count toward the barrier.
            for _ in handles.len()..threads as usize {
                s.spawn(|| barrier.wait());
            }
            barrier.wait();
            let start = Instant::now();
            for h in handles {
                h.join().expect("copy thread panicked");
            }
            secs = start.elapsed().as_secs_f64();
        });
        best = best.min(secs);
    }
    len as f64 / best / 1e9
}

/// The rate of copying half one way and half the other.
fn both_ways(a: f64, b: f64) -> f64 {
    2.0 / (1.0 / a + 1.0 / b)
}

/// Runs the whole grid; `each` sees every cell as it completes (for progress output).
pub fn run(opts: &Options, each: &mut dyn FnMut(&CellResult)) -> Result<Report, BenchError> {
    let (src, dst) = check(opts)?;
    let len = opts.mib << 20;
    let thp_setting = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "(no transparent_hugepage in sysfs)".into());

    let mut memcpy = Vec::new();
    {
        let a = Region::new(len, false, src)?;
        let b = Region::new(len, false, dst)?;
        for threads in 1..=opts.max_threads {
            memcpy.push(MemcpyFigure {
                threads,
                from: src,
                to: dst,
                gb_s: memcpy_gb_s(&a, &b, threads, opts.repeat),
            });
            memcpy.push(MemcpyFigure {
                threads,
                from: dst,
                to: src,
                gb_s: memcpy_gb_s(&b, &a, threads, opts.repeat),
            });
        }
    }
    let mut report = Report {
        source_node: src,
        destination_node: dst,
        bytes: len,
        thp_setting,
        repeat: opts.repeat.max(1),
        memcpy,
        cells: Vec::new(),
        summary: None,
    };

    for page in [Page::Small, Page::Huge] {
        let region = Region::new(len, page == Page::Huge, src)?;
        let no_thp = if page == Page::Huge {
            let thp = region.thp_bytes()?;
            (thp < len).then(|| {
                format!(
                    "the kernel backed {} of {} MiB with huge pages (transparent_hugepage/enabled: {})",
                    thp >> 20,
                    len >> 20,
                    report.thp_setting
                )
            })
        } else {
            None
        };
        let units = region.addrs(page.bytes());
        let small = region.addrs(SMALL);
        let (half_units, half_small) = (units.len() / 2, small.len() / 2);
        for threads in 1..=opts.max_threads {
            for &batch_pages in &opts.batches {
                for op in Op::ALL {
                    let cell = Cell { page, threads, batch_pages, op };
                    let outcome = match &no_thp {
                        Some(reason) => Outcome::NoThp { reason: reason.clone() },
                        None => {
                            measure(&region, &units, &small, half_units, half_small, src, dst, cell, &report)?
                        }
                    };
                    let result = CellResult { cell, bytes: len, outcome };
                    each(&result);
                    report.cells.push(result);
                }
            }
        }
        if let Some(page) = region.first_corrupt_page() {
            return Err(BenchError::Corrupted { page });
        }
    }
    report.summary = summary(&report, opts.max_threads, &host_cpu());
    Ok(report)
}

/// The goal of issue 13 for 2 MiB pages with several callers: at least this share of memcpy.
pub const GOAL: f64 = 0.5;

/// The CPU the grid ran on, from /proc/cpuinfo.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostCpu {
    /// The first `model name`.
    pub model: String,
    /// The `hypervisor` flag: a virtual machine.
    pub hypervisor: bool,
}

/// The host's [`HostCpu`].
pub fn host_cpu() -> HostCpu {
    std::fs::read_to_string("/proc/cpuinfo").map(|t| parse_cpuinfo(&t)).unwrap_or_default()
}

fn parse_cpuinfo(text: &str) -> HostCpu {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.trim() == name).map(|(_, v)| v.trim().to_string())
        })
    };
    HostCpu {
        model: field("model name").unwrap_or_default(),
        hypervisor: field("flags").is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor")),
    }
}

/// What one move_pages call costs beyond its pages, from one caller's demotions at two batch
/// sizes: `t = calls x per_call + pages x per_page`, solved for both.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallCost {
    pub page: Page,
    pub small_batch: u32,
    pub small_batch_seconds: f64,
    pub large_batch: u32,
    pub large_batch_seconds: f64,
    /// Seconds per call beyond its pages.
    pub per_call_s: f64,
    /// The rate pages move at without the per-call cost, GB/s, and its share of one thread's
    /// memcpy in the same direction.
    pub page_gb_s: f64,
    pub page_ratio_to_memcpy: f64,
}

/// The grid's answer for the goal: 2 MiB pages with the most callers at [`GOAL`] of memcpy or
/// more, and where not, the measured figures that stand in the way.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The most callers measured.
    pub threads: u32,
    /// The best 2 MiB cell with that many callers, its share of memcpy and GB/s.
    pub best: Option<(Cell, f64, f64)>,
    /// The best 2 MiB cell with one caller: its share of memcpy and GB/s.
    pub best_one_caller: Option<(f64, f64)>,
    /// memcpy with `threads` threads over memcpy with one (source to destination).
    pub memcpy_scaling: Option<f64>,
    pub goal: f64,
    pub meets_goal: bool,
    /// Per page size, where two batch sizes with different numbers of calls were measured and
    /// the figures separate (a noisy run can make them contradict each other).
    pub call_costs: Vec<CallCost>,
    pub cpu: HostCpu,
}

/// The [`Summary`] of `report`, measured with up to `threads` callers on `cpu`.
pub fn summary(report: &Report, threads: u32, cpu: &HostCpu) -> Option<Summary> {
    let best_at = |t: u32| {
        report
            .cells
            .iter()
            .filter(|c| c.cell.page == Page::Huge && c.cell.threads == t)
            .filter_map(|c| match c.outcome {
                Outcome::Measured { ratio_to_memcpy, gb_s, .. } => Some((c.cell, ratio_to_memcpy, gb_s)),
                _ => None,
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    if !report.cells.iter().any(|c| c.cell.page == Page::Huge) {
        return None;
    }
    let best = best_at(threads);
    let call_costs = [Page::Small, Page::Huge].into_iter().filter_map(|p| call_cost(report, p)).collect();
    Some(Summary {
        threads,
        best,
        best_one_caller: best_at(1).map(|b| (b.1, b.2)),
        memcpy_scaling: report
            .memcpy_gb_s(threads, report.source_node, report.destination_node)
            .zip(report.memcpy_gb_s(1, report.source_node, report.destination_node))
            .map(|(t, one)| t / one),
        goal: GOAL,
        meets_goal: best.is_some_and(|b| b.1 >= GOAL),
        call_costs,
        cpu: cpu.clone(),
    })
}

/// The fewest times as many calls the smaller batch must make as the larger one for
/// [`call_cost`] to separate the two costs.
const MIN_CALLS_RATIO: f64 = 4.0;

/// [`CallCost`] of `page` from the one-caller demotions at the smallest and the largest batch.
fn call_cost(report: &Report, page: Page) -> Option<CallCost> {
    let seconds = |batch: u32| {
        report.cells.iter().find_map(|c| match c.outcome {
            Outcome::Measured { seconds, .. }
                if c.cell.page == page
                    && c.cell.threads == 1
                    && c.cell.op == Op::Demote
                    && c.cell.batch_pages == batch =>
            {
                Some(seconds)
            }
            _ => None,
        })
    };
    let batches: Vec<u32> = report
        .cells
        .iter()
        .filter(|c| c.cell.page == page && c.cell.threads == 1 && c.cell.op == Op::Demote)
        .map(|c| c.cell.batch_pages)
        .collect();
    let (small, large) = (*batches.iter().min()?, *batches.iter().max()?);
    let pages = report.bytes / page.bytes();
    let calls = |b: u32| pages.div_ceil(b as u64) as f64;
    // Two points whose calls differ by one or two (2 MiB pages in a small region) would read a
    // run's noise as the cost of a call.
    if calls(small) < MIN_CALLS_RATIO * calls(large) {
        return None;
    }
    let (ts, tl) = (seconds(small)?, seconds(large)?);
    let per_call = (ts - tl) / (calls(small) - calls(large));
    let per_page = (tl - calls(large) * per_call) / pages as f64;
    if per_call <= 0.0 || per_page <= 0.0 {
        return None;
    }
    let page_gb_s = page.bytes() as f64 / per_page / 1e9;
    let memcpy = report.memcpy_gb_s(1, report.source_node, report.destination_node)?;
    Some(CallCost {
        page,
        small_batch: small,
        small_batch_seconds: ts,
        large_batch: large,
        large_batch_seconds: tl,
        per_call_s: per_call,
        page_gb_s,
        page_ratio_to_memcpy: page_gb_s / memcpy,
    })
}

impl Summary {
    /// One line: the best share reached, whether it meets the goal, and if not what stands in
    /// the way, in measured figures.
    pub fn line(&self) -> String {
        let callers = |t: u32| format!("{t} caller{}", if t == 1 { "" } else { "s" });
        let Some((cell, ratio, gb_s)) = self.best else {
            return format!(
                "summary: 2 MiB pages, {}: nothing measured (no THP, or every cell failed), so the goal of {:.2}x of memcpy cannot be judged",
                callers(self.threads),
                self.goal
            );
        };
        let mut line = format!(
            "summary: 2 MiB pages, {}: best {ratio:.2}x of memcpy ({gb_s:.3} GB/s, {:?}, batch {}): {}",
            callers(self.threads),
            cell.op,
            cell.batch_pages,
            if self.meets_goal {
                format!("meets the goal of at least {:.2}x", self.goal)
            } else {
                format!("below the goal of {:.2}x", self.goal)
            }
        );
        if self.meets_goal {
            return line;
        }
        let mut why = Vec::new();
        if let (Some((one, one_gb_s)), true) = (self.best_one_caller, self.threads > 1) {
            let mut callers = format!(
                "1 caller reaches {one:.2}x ({one_gb_s:.3} GB/s); {} move {:.2}x its GB/s",
                self.threads,
                gb_s / one_gb_s
            );
            if let Some(m) = self.memcpy_scaling {
                callers += &format!(" where memcpy gains {m:.2}x from {} threads", self.threads);
            }
            why.push(callers);
        }
        let huge = self.call_costs.iter().find(|c| c.page == Page::Huge);
        if let Some(c) = huge {
            why.push(format!(
                "without the per-call cost ({:.0} us a call) a 2 MiB page moves at {:.3} GB/s, {:.2}x of memcpy{} \
                 (1 caller, batch {} {:.3} s vs batch {} {:.3} s)",
                c.per_call_s * 1e6,
                c.page_gb_s,
                c.page_ratio_to_memcpy,
                if c.page_ratio_to_memcpy < self.goal {
                    ", so the kernel's page copy itself is below the goal"
                } else {
                    ", so the calls are what hold it back"
                },
                c.small_batch,
                c.small_batch_seconds,
                c.large_batch,
                c.large_batch_seconds
            ));
        }
        if let Some(c) = self.call_costs.iter().find(|c| c.page == Page::Small) {
            why.push(format!(
                "a move_pages call costs {:.0} us beyond its pages on 4 KiB pages (batch {} {:.3} s vs batch {} {:.3} s), \
                 a 4 KiB page {:.1} us ({:.3} GB/s, {:.2}x of memcpy, without the per-call cost)",
                c.per_call_s * 1e6,
                c.small_batch,
                c.small_batch_seconds,
                c.large_batch,
                c.large_batch_seconds,
                4096.0 / c.page_gb_s / 1e3,
                c.page_gb_s,
                c.page_ratio_to_memcpy
            ));
        }
        if huge.is_none() {
            why.push("the per-call and per-page costs of 2 MiB pages could not be told apart in this run (batch sizes too \
                 close in calls for this region, or noise)".into());
        }
        if self.cpu.hypervisor {
            let m = &self.cpu.model;
            let emulated = m.contains("QEMU") || m.contains("TCG");
            why.push(format!(
                "the CPU is {} (hypervisor flag; model name \"{m}\")",
                if emulated { "emulated by QEMU" } else { "virtual" }
            ));
        }
        line.push_str("; in the way here: ");
        line.push_str(&why.join("; "));
        line
    }
}

/// Pages to put on a node before a cell: what to move (one address per page of the cell's size),
/// the 4 KiB pages to check, and the node.
type Placement<'a> = (&'a [u64], &'a [u64], u32);
/// 4 KiB pages that should be on a node after a cell.
type Landing<'a> = (&'a [u64], u32);

/// One cell: put the region where the cell starts, move it, check where it landed.
#[allow(clippy::too_many_arguments)]
fn measure(
    region: &Region,
    units: &[u64],
    small: &[u64],
    half_units: usize,
    half_small: usize,
    src: u32,
    dst: u32,
    cell: Cell,
    report: &Report,
) -> Result<Outcome, BenchError> {
    let t = cell.threads;
    let memcpy = |from, to| report.memcpy_gb_s(t, from, to).unwrap_or(f64::NAN);
    let failed = |reason: String| Ok(Outcome::Failed { reason });
    // Where the cell starts, where it should end, the work and the memcpy to compare with.
    let (start, work, end, copy): (Vec<Placement>, Work, Vec<Landing>, f64) = match cell.op {
        Op::Demote => (
            vec![(units, small, src)],
            Work::OneWay(vec![moves_to(units, dst)]),
            vec![(small, dst)],
            memcpy(src, dst),
        ),
        Op::Promote => (
            vec![(units, small, dst)],
            Work::OneWay(vec![moves_to(units, src)]),
            vec![(small, src)],
            memcpy(dst, src),
        ),
        Op::Exchange | Op::TwoOneWay => {
            let (a, b) = units.split_at(half_units);
            let (sa, sb) = small.split_at(half_small);
            let work = if cell.op == Op::Exchange {
                // As the live machine carries an exchange out: pairs of batches.
                Work::Paired(pairs_of(a, dst, b, src))
            } else {
                Work::OneWay(vec![moves_to(a, dst), moves_to(b, src)])
            };
            (
                vec![(a, sa, src), (b, sb, dst)],
                work,
                vec![(sa, dst), (sb, src)],
                both_ways(memcpy(src, dst), memcpy(dst, src)),
            )
        }
    };
    // Best of `repeat` runs, each from the cell's starting placement.
    let mut secs = f64::INFINITY;
    for _ in 0..report.repeat.max(1) {
        for (units, small, node) in &start {
            let misplaced = match not_on(small, *node) {
                Ok(n) => n,
                Err(e) => return failed(e),
            };
            if misplaced > 0 {
                if let Err(e) = place(units, *node, small) {
                    return failed(format!("setting up: {e}"));
                }
            }
        }
        match run_mover(&work, t, cell.batch_pages) {
            Ok(s) => secs = secs.min(s),
            Err(e) => return failed(e),
        };
        let mut off = 0;
        for (small, node) in &end {
            off += match not_on(small, *node) {
                Ok(n) => n,
                Err(e) => return failed(e),
            };
        }
        if off > 0 {
            return failed(format!("{off} of {} 4 KiB pages did not land", small.len()));
        }
        if cell.page == Page::Huge {
            let thp = region.thp_bytes()?;
            if thp < region.len {
                return failed(format!(
                    "the kernel split huge pages while moving them ({} of {} MiB still huge)",
                    thp >> 20,
                    region.len >> 20
                ));
            }
        }
    }
    let gb_s = region.len as f64 / secs / 1e9;
    Ok(Outcome::Measured { seconds: secs, gb_s, ratio_to_memcpy: gb_s / copy })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_huge_pages_are_summed_inside_the_range_only() {
        let smaps = "\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Size:               4096 kB
AnonHugePages:      4096 kB
VmFlags: rd wr mr mw me ac hg
7f0000400000-7f0000600000 rw-p 00000000 00:00 0
AnonHugePages:      2048 kB
7f0000600000-7f0000800000 rw-p 00000000 00:00 0 [heap]
AnonHugePages:      2048 kB
";
        assert_eq!(anon_huge_bytes(smaps, 0x7f00_0000_0000, 0x7f00_0060_0000), 6 << 20);
        assert_eq!(anon_huge_bytes(smaps, 0x7f00_0040_0000, 0x7f00_0080_0000), 4 << 20);
        assert_eq!(anon_huge_bytes(smaps, 0x1000, 0x2000), 0);
    }

    #[test]
    fn every_address_becomes_one_move_to_the_node() {
        let m = moves_to(&[0x1000, 0x2000], 1);
        assert_eq!(
            m,
            [PageMove { addr: 0x1000, node: 1, tag: 0 }, PageMove { addr: 0x2000, node: 1, tag: 1 }]
        );
    }

    #[test]
    fn bad_options_are_refused_before_anything_runs() {
        for bad in [
            Options { mib: 6, ..Default::default() },
            Options { max_threads: 0, ..Default::default() },
            Options { batches: vec![], ..Default::default() },
        ] {
            assert!(matches!(check(&bad), Err(BenchError::BadOptions(_))), "{bad:?}");
        }
    }

    /// On a host with one memory node (the development and CI machines) the live benchmark
    /// refuses with a message that says where to run it instead; on two it takes both, or the
    /// two asked for.
    #[test]
    fn a_single_node_host_is_refused_clearly() {
        let e = pick_nodes(&[0], None).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, BenchError::NeedsTwoNodes { found: 1, .. }), "{msg}");
        assert!(msg.contains("needs two NUMA nodes") && msg.contains("(node 0)"), "{msg}");
        assert!(msg.contains("tests/vm") && msg.contains("--simulated"), "{msg}");
        assert!(matches!(pick_nodes(&[], None), Err(BenchError::NeedsTwoNodes { found: 0, .. })));
        assert_eq!(pick_nodes(&[0, 1], None).unwrap(), (0, 1));
        assert_eq!(pick_nodes(&[0, 1, 2], Some((2, 0))).unwrap(), (2, 0));
        for bad in [(1, 1), (0, 3)] {
            assert!(matches!(pick_nodes(&[0, 1, 2], Some(bad)), Err(BenchError::BadOptions(_))), "{bad:?}");
        }
    }

    fn measured(page: Page, threads: u32, batch_pages: u32, op: Op, seconds: f64, ratio: f64) -> CellResult {
        CellResult {
            cell: Cell { page, threads, batch_pages, op },
            bytes: 32 << 20,
            outcome: Outcome::Measured {
                seconds,
                gb_s: (32 << 20) as f64 / seconds / 1e9,
                ratio_to_memcpy: ratio,
            },
        }
    }

    fn report(cells: Vec<CellResult>) -> Report {
        Report {
            source_node: 0,
            destination_node: 1,
            bytes: 32 << 20,
            thp_setting: String::new(),
            repeat: 1,
            memcpy: vec![
                MemcpyFigure { threads: 1, from: 0, to: 1, gb_s: 0.2 },
                MemcpyFigure { threads: 2, from: 0, to: 1, gb_s: 0.3 },
            ],
            cells,
            summary: None,
        }
    }

    #[test]
    fn the_summary_takes_the_best_2m_cell_with_the_most_callers_and_says_why_it_falls_short() {
        // 32 MiB: 16 huge pages, 8192 base pages. One caller's 2 MiB demotions: 16 calls in 0.9 s,
        // 1 call in 0.6 s: 20 ms a call, and 0.6 s - 20 ms for 16 pages: 36.25 ms a page.
        let cells = vec![
            measured(Page::Huge, 1, 1, Op::Demote, 0.9, 0.1),
            measured(Page::Huge, 1, 512, Op::Demote, 0.6, 0.3),
            measured(Page::Huge, 2, 1, Op::Exchange, 0.5, 0.35),
            measured(Page::Huge, 2, 512, Op::TwoOneWay, 0.5, 0.2),
            // 8192 calls in 2.0 s against 16 in 0.4 s.
            measured(Page::Small, 1, 1, Op::Demote, 2.0, 0.05),
            measured(Page::Small, 1, 512, Op::Demote, 0.4, 0.2),
            // A better 4 KiB cell does not count as the best.
            measured(Page::Small, 2, 512, Op::Demote, 0.1, 0.9),
        ];
        let cpu = HostCpu { model: "QEMU TCG CPU version 2.5+".into(), hypervisor: true };
        let s = summary(&report(cells), 2, &cpu).unwrap();
        let (cell, ratio, _) = s.best.unwrap();
        assert_eq!((cell.op, cell.batch_pages, ratio), (Op::Exchange, 1, 0.35));
        let (one, one_gb_s) = s.best_one_caller.unwrap();
        assert_eq!(one, 0.3);
        assert!((one_gb_s - (32 << 20) as f64 / 0.6 / 1e9).abs() < 1e-9);
        assert!((s.memcpy_scaling.unwrap() - 1.5).abs() < 1e-9);
        assert!(!s.meets_goal);
        let huge = s.call_costs.iter().find(|c| c.page == Page::Huge).unwrap();
        assert!((huge.per_call_s - 0.02).abs() < 1e-9, "{huge:?}");
        assert!((huge.page_gb_s - (2 << 20) as f64 / 0.03625 / 1e9).abs() < 1e-6, "{huge:?}");
        // Batches of 8 and 512 huge pages make 2 calls and 1 over 16 pages: too close to tell.
        let close = vec![
            measured(Page::Huge, 1, 8, Op::Demote, 0.9, 0.1),
            measured(Page::Huge, 1, 512, Op::Demote, 0.6, 0.3),
        ];
        assert!(summary(&report(close), 2, &cpu).unwrap().call_costs.is_empty());
        let small = s.call_costs.iter().find(|c| c.page == Page::Small).unwrap();
        assert!((small.per_call_s - 1.6 / 8176.0).abs() < 1e-9, "{small:?}");
        let line = s.line();
        assert!(line.contains("best 0.35x of memcpy") && line.contains("below the goal of 0.50x"), "{line}");
        assert!(line.contains("1 caller reaches 0.30x (0.056 GB/s); 2 move 1.20x its GB/s"), "{line}");
        assert!(line.contains("where memcpy gains 1.50x from 2 threads"), "{line}");
        assert!(line.contains("(20000 us a call)"), "{line}");
        assert!(line.contains("kernel's page copy itself is below the goal"), "{line}");
        assert!(line.contains("emulated by QEMU"), "{line}");
        // Reaching the goal says so and nothing more.
        let s = summary(
            &report(vec![measured(Page::Huge, 2, 8, Op::Exchange, 0.1, 0.6)]),
            2,
            &HostCpu::default(),
        )
        .unwrap();
        assert!(s.meets_goal && s.call_costs.is_empty());
        assert!(s.line().ends_with("meets the goal of at least 0.50x"), "{}", s.line());
        // No 2 MiB cell measured: the goal cannot be judged.
        let no_thp = CellResult {
            cell: Cell { page: Page::Huge, threads: 2, batch_pages: 8, op: Op::Exchange },
            bytes: 32 << 20,
            outcome: Outcome::NoThp { reason: "never".into() },
        };
        let line = summary(&report(vec![no_thp]), 2, &HostCpu::default()).unwrap().line();
        assert!(line.contains("cannot be judged"), "{line}");
    }

    #[test]
    fn cpuinfo_gives_the_model_and_the_hypervisor_flag() {
        let c = parse_cpuinfo("processor\t: 0\nmodel name\t: QEMU TCG CPU version 2.5+\nflags\t\t: fpu vme hypervisor lahf_lm\n");
        assert_eq!(c, HostCpu { model: "QEMU TCG CPU version 2.5+".into(), hypervisor: true });
        assert!(!parse_cpuinfo("model name: x\nflags: fpu sse\n").hypervisor);
    }

    #[test]
    fn an_exchange_pairs_each_page_of_one_half_with_one_of_the_other() {
        let p = pairs_of(&[0x1000, 0x2000], 1, &[0x3000, 0x4000], 0);
        assert_eq!(p.len(), 2);
        assert_eq!((p[1].down_tag, p[1].down[0].addr, p[1].down[0].node), (1, 0x2000, 1));
        assert_eq!((p[1].up_tag, p[1].up[0].addr, p[1].up[0].node), (3, 0x4000, 0));
        assert_eq!(Options::default().batches, [1, 8, 64, 512]);
    }

    #[test]
    fn a_region_is_first_touched_and_keeps_its_data() {
        let r = Region::new(4 << 20, false, 0).unwrap();
        assert_eq!(r.start % HUGE, 0);
        assert_eq!(not_on(&r.addrs(SMALL), 0).unwrap(), 0);
        assert_eq!(r.first_corrupt_page(), None);
        assert_eq!(r.thp_bytes().unwrap(), 0, "MADV_NOHUGEPAGE");
        // Moving to the node the pages are on changes nothing and keeps the data.
        run_mover(&Work::OneWay(vec![moves_to(&r.addrs(SMALL), 0)]), 2, 64).unwrap();
        assert_eq!(r.first_corrupt_page(), None);
    }
}
