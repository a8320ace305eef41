//! The named workloads, and the size arithmetic they share.

use crate::phases::Generator;
use crate::stream::Kernel;
use crate::{
    bfs, corun, gups, kvstore, npb, objects, pmbench, stream, AccessSource, WorkloadError, WorkloadInfo,
};
use std::sync::OnceLock;

/// The seeds' sizes are in GB; Terrace's default runs are in MB.
pub(crate) const SEED_SCALE: f64 = 1024.0;
/// Beyond the seeds' own sizes a run would take hours to simulate; refuse rather than surprise.
const MAX_SIZE_SCALE: f64 = 1024.0;
const PAGE: u64 = 4096;

/// A workload `build` knows, for `terrace list workloads`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    pub name: &'static str,
    pub summary: &'static str,
}

/// The names `terrace compare` runs by default: one workload per seed pattern (uniform-with-hot-set,
/// Gaussian at two spreads and read mixes, streaming with and without writes).
pub const DEFAULT_SUITE: &[&str] =
    &["gups", "pmbench-s12-r50", "pmbench-s25-r20", "stream-triad", "stream-ro"];

#[derive(Clone, Copy)]
enum Recipe {
    Gups {
        hot_mib: u64,
    },
    /// `array`: the array's bytes at the built-in size; `None` = the 64 GB array.
    Pmbench {
        sigma: f64,
        reads: f64,
        array: Option<u64>,
    },
    Stream(Kernel),
    /// mtier's read-only STREAM with this many threads.
    MtierStream(u32),
    /// The kernel, its size, and its iterations when not NPB's own count.
    Npb(npb::Kernel, npb::Size, Option<u32>),
    /// The size, and the searches when not the built-in count.
    Bfs(bfs::Size, Option<u32>),
    KvStore {
        set_percent: u32,
    },
    /// Allocations and frees between the accesses (object tiering); its pace, where the name
    /// sets it.
    Objects(ObjectsPace),
    ObjectsManySites(ObjectsPace),
    /// Two programs sharing the machine by priority (object tiering §5.5), in one of two shapes.
    ObjectsPair(&'static PairShape),
}

/// `objects` and `objects-sites`' parameters: instructions per access, and lines a thread
/// accesses in a row; the generator's own (20, 1) where `None`.
#[derive(Clone, Copy, Default)]
struct ObjectsPace {
    instructions: Option<u32>,
    run: Option<u32>,
}

#[derive(Clone, Copy)]
struct Entry {
    name: &'static str,
    summary: &'static str,
    recipe: Recipe,
}

const fn pmbench(name: &'static str, summary: &'static str, sigma: f64, reads: f64) -> Entry {
    Entry { name, summary, recipe: Recipe::Pmbench { sigma, reads, array: None } }
}

/// The hand-written entries; `entries` appends the generated sweeps.
const FIXED: &[Entry] = &[
    Entry {
        name: "gups",
        summary: "GUPS, 16 threads, 128 MiB, 90% of updates to an 8 MiB hot set (HPWP §6.2)",
        recipe: Recipe::Gups { hot_mib: 8 },
    },
    Entry {
        name: "gups-hot16",
        summary: "GUPS as `gups` with a 16 MiB hot set (hot-set sweep)",
        recipe: Recipe::Gups { hot_mib: 16 },
    },
    Entry {
        name: "gups-hot32",
        summary: "GUPS as `gups` with a 32 MiB hot set (hot-set sweep)",
        recipe: Recipe::Gups { hot_mib: 32 },
    },
    Entry {
        name: "gups-hot64",
        summary: "GUPS as `gups` with a 64 MiB hot set, larger than the 48 MiB fast tier (hot-set sweep)",
        recipe: Recipe::Gups { hot_mib: 64 },
    },
    pmbench(
        "pmbench-s12-r50",
        "pmbench, 32 threads, 64 MiB, Gaussian sigma 12.5%, 50% reads (Ambix §5.4.1)",
        0.125,
        0.5,
    ),
    pmbench(
        "pmbench-s12-r20",
        "pmbench, 32 threads, 64 MiB, Gaussian sigma 12.5%, 20% reads (Ambix §5.4.1)",
        0.125,
        0.2,
    ),
    pmbench(
        "pmbench-s12-r80",
        "pmbench, 32 threads, 64 MiB, Gaussian sigma 12.5%, 80% reads (Ambix §5.4.1)",
        0.125,
        0.8,
    ),
    pmbench(
        "pmbench-s25-r20",
        "pmbench, 32 threads, 64 MiB, Gaussian sigma 25%, 20% reads (Ambix §5.4.1)",
        0.25,
        0.2,
    ),
    pmbench(
        "pmbench-s25-r50",
        "pmbench, 32 threads, 64 MiB, Gaussian sigma 25%, 50% reads (Ambix §5.4.1)",
        0.25,
        0.5,
    ),
    pmbench(
        "pmbench-s25-r80",
        "pmbench, 32 threads, 64 MiB, Gaussian sigma 25%, 80% reads (Ambix §5.4.1)",
        0.25,
        0.8,
    ),
    Entry {
        name: "stream-copy",
        summary: "STREAM copy c = a, 6 threads, 3 x 32 MiB, 10 passes (mtier §4.2.2)",
        recipe: Recipe::Stream(Kernel::Copy),
    },
    Entry {
        name: "stream-scale",
        summary: "STREAM scale b = q*c, 6 threads, 3 x 32 MiB, 10 passes (mtier §4.2.2)",
        recipe: Recipe::Stream(Kernel::Scale),
    },
    Entry {
        name: "stream-add",
        summary: "STREAM add c = a + b, 6 threads, 3 x 32 MiB, 10 passes (mtier §4.2.2)",
        recipe: Recipe::Stream(Kernel::Add),
    },
    Entry {
        name: "stream-triad",
        summary: "STREAM triad a = b + q*c, 6 threads, 3 x 32 MiB, 10 passes (mtier §4.2.2)",
        recipe: Recipe::Stream(Kernel::Triad),
    },
    Entry {
        name: "stream-ro",
        summary: "STREAM read-only sum over a, b, c: the data mtier shadows (mtier §4.2.2)",
        recipe: Recipe::Stream(Kernel::ReadOnly),
    },
];

/// Spreads of the pmbench footprint sweep: (name part, sigma).
const PMBENCH_SIGMAS: [(&str, f64); 2] = [("s12", 0.125), ("s25", 0.25)];
/// Read shares of the pmbench footprint sweep, percent.
const PMBENCH_READS: [u32; 3] = [20, 50, 80];
/// Footprints of the pmbench sweep, as multiples of the fast tier (the 1x to 8x).
const PMBENCH_MULTIPLES: [u64; 4] = [1, 2, 4, 8];
/// The seed's smallest array, 32 GB scaled (1.19x the fast tier): the one size of Ambix §5.5.1
/// that the multiples do not stand for, since at 1x first touch leaves no page in the slow tier
/// and the seed's 32 GB run left 5 GB there.
const PMBENCH_SEED_SMALLEST_GB: u64 = 32;

/// A generated name or summary, made once per process and kept for its lifetime.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Every entry: the fixed ones, then the generated sweeps (pmbench footprints, NPB kernels and
/// sizes, BFS sizes, key-value SET shares).
fn entries() -> &'static [Entry] {
    static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        let mut v = FIXED.to_vec();
        for t in stream::mtier::THREADS {
            v.push(Entry {
                name: leak(format!("mtier-stream-t{t}")),
                summary: leak(format!(
                    "mtier's STREAM: its four read-only kernels over two 4 MiB arrays, {t} thread{}, 48 \
                     rounds (mtier §4.2.2)",
                    if t == 1 { "" } else { "s" }
                )),
                recipe: Recipe::MtierStream(t),
            });
        }
        for (s, sigma) in PMBENCH_SIGMAS {
            for reads in PMBENCH_READS {
                for m in PMBENCH_MULTIPLES {
                    v.push(Entry {
                        name: leak(format!("pmbench-{s}-r{reads}-x{m}")),
                        summary: leak(format!(
                            "pmbench as `pmbench-{s}-r{reads}` over {} MiB = {m}x the 27 MiB fast \
                             tier (Ambix §5.4.1 footprint sweep)",
                            27 * m
                        )),
                        recipe: Recipe::Pmbench {
                            sigma,
                            reads: f64::from(reads) / 100.0,
                            array: Some(m * pmbench::FAST_TIER),
                        },
                    });
                }
                let gb = PMBENCH_SEED_SMALLEST_GB;
                v.push(Entry {
                    name: leak(format!("pmbench-{s}-r{reads}-{gb}g")),
                    summary: leak(format!(
                        "pmbench as `pmbench-{s}-r{reads}` over {gb} MiB, the seed's {gb} GB array \
                         scaled (1.19x the fast tier; Ambix §5.5.1)"
                    )),
                    recipe: Recipe::Pmbench { sigma, reads: f64::from(reads) / 100.0, array: Some(gb << 20) },
                });
            }
        }
        for kernel in npb::KERNELS {
            for size in npb::SIZES {
                v.push(Entry {
                    name: leak(format!("npb-{}-{}", kernel.name(), size.name())),
                    summary: leak(npb::summary(kernel, size)),
                    recipe: Recipe::Npb(kernel, size, None),
                });
            }
        }
        for size in bfs::SIZES {
            v.push(Entry {
                name: leak(format!("bfs-{}", size.name())),
                summary: leak(bfs::summary(size)),
                recipe: Recipe::Bfs(size, None),
            });
        }
        v.push(Entry {
            name: "objects",
            summary: leak(objects::summary()),
            recipe: Recipe::Objects(ObjectsPace::default()),
        });
        v.push(Entry {
            name: "objects-sites",
            summary: leak(objects::summary_many_sites()),
            recipe: Recipe::ObjectsManySites(ObjectsPace::default()),
        });
        for shape in [&PAIR_CHOSEN, &PAIR_TABLE3] {
            v.push(Entry { name: shape.name, summary: shape.summary, recipe: Recipe::ObjectsPair(shape) });
        }
        for set_percent in kvstore::SET_PERCENTS {
            v.push(Entry {
                name: leak(format!("kvstore-set{set_percent}")),
                summary: leak(kvstore::summary(set_percent)),
                recipe: Recipe::KvStore { set_percent },
            });
        }
        v
    })
}

/// Every workload `build` accepts, in a stable order.
pub fn list() -> Vec<WorkloadSpec> {
    entries().iter().map(|e| WorkloadSpec { name: e.name, summary: e.summary }).collect()
}

/// Builds a named workload. `seed` makes it deterministic (STREAM has no randomness and ignores
/// it); `size_scale` multiplies footprint, accesses and suggested fast bytes (1.0 = default).
///
/// A name may carry parameters, `NAME:key=value`: the NPB kernels take `iterations` (their run
/// length; NPB's own count by default), BFS its searches the same way (8 by default), and
/// `objects` and `objects-sites` `instructions`, the compute each access carries (20 by
/// default), which sets how fast the program makes memory traffic, and `run`, the lines each
/// thread accesses in a row (1 by default).
pub fn build(name: &str, seed: u64, size_scale: f64) -> Result<Box<dyn AccessSource>, WorkloadError> {
    let (base, params) = name.split_once(':').unwrap_or((name, ""));
    let entry = entries().iter().find(|e| e.name == base).ok_or_else(|| WorkloadError::Unknown {
        name: base.to_string(),
        known: entries().iter().map(|e| e.name).collect::<Vec<_>>().join(", "),
    })?;
    let entry = &with_params(entry, name, params)?;
    if !(size_scale.is_finite() && size_scale > 0.0) {
        return Err(WorkloadError::InvalidScale { size_scale });
    }
    if size_scale > MAX_SIZE_SCALE {
        return Err(WorkloadError::TooLarge { name: name.to_string(), size_scale });
    }
    // Above the built-in size, some generators do work in proportion to the footprint when
    // they are built (BFS builds its graph): check the footprint against what a simulated
    // machine can hold first, from the built-in size (footprints grow linearly with the scale).
    if size_scale > 1.0 {
        let footprint = generate(entry, name, seed, 1.0)?.info().footprint_bytes as f64 * size_scale;
        if footprint > WorkloadInfo::MAX_FOOTPRINT_BYTES as f64 {
            return Err(WorkloadError::FootprintTooLarge {
                name: name.to_string(),
                size_scale,
                footprint_gib: footprint / (1u64 << 30) as f64,
                max_size_scale: size_scale * WorkloadInfo::MAX_FOOTPRINT_BYTES as f64 / footprint,
            });
        }
    }
    generate(entry, name, seed, size_scale)
}

/// `entry` with the parameters of `name` (`params`: what follows its ':', comma-separated
/// `key=value`) applied, each checked.
fn with_params(entry: &Entry, name: &str, params: &str) -> Result<Entry, WorkloadError> {
    let bad = |reason: String| WorkloadError::BadParameter { name: name.to_string(), reason };
    let mut entry = *entry;
    if !name.contains(':') {
        return Ok(entry);
    }
    for item in params.split(',') {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| bad(format!("'{item}' is not key=value (e.g. `npb-bt-large:iterations=32`)")))?;
        // A count from 1 to `max`, or the line that says what is wrong.
        let count = |max: u32| match value.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(Some(n)),
            _ => Err(bad(format!("{key} must be a whole number from 1 to {max}, not '{value}'"))),
        };
        match (&mut entry.recipe, key) {
            (Recipe::Npb(_, _, iterations), "iterations") => *iterations = count(npb::MAX_ITERATIONS)?,
            (Recipe::Bfs(_, iterations), "iterations") => *iterations = count(bfs::MAX_ITERATIONS)?,
            (Recipe::Objects(pace) | Recipe::ObjectsManySites(pace), "instructions") => {
                pace.instructions = count(objects::MAX_INSTRUCTIONS)?
            }
            (Recipe::Objects(pace) | Recipe::ObjectsManySites(pace), "run") => {
                pace.run = count(objects::MAX_RUN)?
            }
            (Recipe::Npb(..) | Recipe::Bfs(..), _) => {
                return Err(bad(format!("unknown parameter '{key}'; {} takes `iterations`", entry.name)))
            }
            (Recipe::Objects(_) | Recipe::ObjectsManySites(_), _) => {
                return Err(bad(format!(
                    "unknown parameter '{key}'; {} takes `instructions` and `run`",
                    entry.name
                )))
            }
            _ => {
                return Err(bad(format!(
                    "'{}' takes no parameters (only the NPB kernels and BFS do, `iterations`, and objects \
                     and objects-sites, `instructions` and `run`)",
                    entry.name
                )))
            }
        }
    }
    Ok(entry)
}

fn generate(
    entry: &Entry,
    name: &str,
    seed: u64,
    size_scale: f64,
) -> Result<Box<dyn AccessSource>, WorkloadError> {
    let phases = |g: Generator| -> Box<dyn AccessSource> { Box::new(g) };
    Ok(match entry.recipe {
        Recipe::Gups { hot_mib } => phases(gups::build(name, hot_mib, seed, size_scale)?),
        Recipe::Pmbench { sigma, reads, array } => phases(pmbench::build(
            name,
            array.unwrap_or(pmbench::DEFAULT_ARRAY),
            sigma,
            reads,
            seed,
            size_scale,
        )?),
        Recipe::Stream(kernel) => phases(stream::build(name, kernel, size_scale)?),
        Recipe::MtierStream(threads) => phases(stream::mtier::build(name, threads, size_scale)?),
        Recipe::Npb(kernel, size, iterations) => phases(npb::build(
            name,
            kernel,
            size,
            iterations.unwrap_or(kernel.iterations()),
            seed,
            size_scale,
        )?),
        Recipe::Bfs(size, iterations) => phases(bfs::build(name, size, iterations, seed, size_scale)?),
        Recipe::KvStore { set_percent } => phases(kvstore::build(name, set_percent, seed, size_scale)?),
        // Not made of phases: its stream carries object events.
        Recipe::Objects(pace) => {
            Box::new(objects::build(name, seed, size_scale, false, pace.instructions, pace.run)?)
        }
        Recipe::ObjectsManySites(pace) => {
            Box::new(objects::build(name, seed, size_scale, true, pace.instructions, pace.run)?)
        }
        Recipe::ObjectsPair(shape) => Box::new(objects_pair(shape, name, seed, size_scale)?),
    })
}

/// The shape of Fig. 8's pair (object tiering §5.5): its two programs, by workload name, and each
/// one's size as a multiple of its built-in size (the generators' passes over their footprints
/// are the same, so their accesses are in about the same ratio); when the high-priority one
/// starts (a share of the low one's accesses); and the fast tier (a share of the low one's
/// footprint, or 10/9 of the high one's).
pub(crate) struct PairShape {
    name: &'static str,
    summary: &'static str,
    low: &'static str,
    high: &'static str,
    low_size: f64,
    high_size: f64,
    start_share: f64,
    fast_share_of_low: Option<f64>,
}

/// `objects-pair`: choices made before the seed's Table 3 was read (docs/workloads.md): the
/// high-priority program at half the low one's size, from an eighth of its accesses (the seed
/// lets QMCPACK initialise, about 20 minutes, first), the fast tier holding the high-priority
/// program at the object policy's 90% fill (the seed's priority scheme "assumes the high
/// priority application(s) will use most or all of the fast memory"): 10/9 of its footprint.
const PAIR_CHOSEN: PairShape = PairShape {
    name: "objects-pair",
    summary:
        "two programs by priority (object tiering §5.5, Fig. 8): objects-sites at low priority from the \
              start, objects at half its size and high priority from an eighth of the way; fast tier 10/9 of \
              the second (a shape chosen before the seed's Table 3; objects-pair-table3 is Table 3's)",
    low: "objects-sites",
    high: "objects",
    low_size: 1.0,
    high_size: 0.5,
    start_share: 0.125,
    fast_share_of_low: None,
};

/// Object tiering Table 3: QMCPACK's full input (the low-priority program) peaks at 353.22 GB
/// and runs 12,948 s; its shared inputs (the high-priority programs) peak at these sizes (GB).
const QMCPACK_FULL_PEAK_GB: f64 = 353.22;
const QMCPACK_FULL_SECONDS: f64 = 12_948.0;
const SHARED_PEAKS_GB: [f64; 7] = [119.30, 104.39, 43.28, 51.29, 111.02, 66.09, 52.84];
/// §5.5: QMCPACK "is given about 20 minutes to initialize" before the other starts.
const QMCPACK_HEAD_START_SECONDS: f64 = 1200.0;
/// §4.1: 192 GB of DDR4 (6 x 32 GB).
const SEED_DRAM_GB: f64 = 192.0;

/// The programs of `objects-pair-table3`, low priority first, paced as Table 3 measured the
/// seed's (docs/workloads.md, "Two programs by priority"):
/// - `objects-sites` makes QMCPACK's 24.53 GB/s in DRAM on 16 threads (its shared input's;
///   Table 3 gives the full input's on 32 threads only) with 82 instructions an access, and reads
///   and writes its large objects in runs of 4 lines (256 B), the least of QMCPACK's runs: its
///   spline evaluation reads, at each of the 64 points of its stencil, every orbital's
///   coefficient in one contiguous run (`eval_multi_UBspline_3d_d`, QMCPACK's src/einspline),
///   and NiO has hundreds of orbitals.
/// - `objects` makes the shared inputs' mean, 39.7 GB/s, with 43 (Table 3: 21.3-77.6 GB/s).
///
/// The generators' own 20 instructions make 61 and 60 GB/s. The counts are found on the default
/// profile; `the_table3_pair_makes_table3s_memory_traffic` (terrace-sim) checks the rates.
pub const OBJECTS_PAIR_TABLE3_PROGRAMS: [&str; 2] =
    ["objects-sites:instructions=82,run=4", "objects:instructions=43"];

/// One of the object-tiering seed's applications as Fig. 4 ran it (its small input, Table 3), as
/// the `objects` program paced and shaped like it: `spec` is `objects` with the compute an access
/// that makes the application's bandwidth in DRAM, and its large objects' accesses in runs as the
/// application's main loops make them (docs/workloads.md, "Objects as the seed's applications").
#[derive(Debug, Clone, Copy)]
pub struct ObjectsApp {
    /// The application (Table 2).
    pub name: &'static str,
    /// The workload that stands for it.
    pub spec: &'static str,
    /// Its small input's average memory bandwidth, all in DRAM (Table 3, GB/s).
    pub table3_gb_s: f64,
}

/// The seven applications of object tiering's Fig. 4 (§5.3.2), each as `objects` paced to its
/// small input's bandwidth (Table 3) on the default profile, and with its large objects read
/// and written in runs of lines as its main loops make them: a page (64 lines, the generator's
/// longest run) where the loop streams through arrays, QMCPACK's 4 lines as
/// [`OBJECTS_PAIR_TABLE3_PROGRAMS`] states them, and single random lines for Graph500's search.
/// The instruction counts are found on the default profile; LULESH's and AMG's 87.7 and
/// 84.6 GB/s are beyond what the model's DRAM gives 16 threads of this mix (73 GB/s at the least
/// compute, 1 instruction), so they run at that. `the_fig4_programs_make_table3s_memory_traffic`
/// (terrace-sim) checks the rates.
pub const OBJECTS_TABLE3_SMALL_PROGRAMS: [ObjectsApp; 7] = [
    ObjectsApp {
        name: "LULESH",
        // Runs: element and node loops stream through its arrays
        // (`IntegrateStressForElems`, `CalcKinematicsForElems`).
        spec: "objects:instructions=1,run=64",
        table3_gb_s: 87.68,
    },
    ObjectsApp {
        name: "AMG",
        // Runs: sparse matrix-vector products stream through each row's values and
        // column indices (`hypre_CSRMatrixMatvec`).
        spec: "objects:instructions=1,run=64",
        table3_gb_s: 84.60,
    },
    ObjectsApp {
        name: "SNAP",
        // Runs: transport sweeps stream through the angular fluxes, angles innermost
        // (`dim3_sweep`).
        spec: "objects:instructions=41,run=64",
        table3_gb_s: 42.05,
    },
    ObjectsApp {
        name: "QMCPACK",
        // Runs: spline evaluation reads every orbital's coefficients at a stencil point
        // in one run (`eval_multi_UBspline_3d_d`).
        spec: "objects:instructions=99,run=4",
        table3_gb_s: 20.99,
    },
    ObjectsApp {
        name: "WarpX",
        // Runs: the particle push streams through each tile's particle arrays (`PushPX`).
        spec: "objects:instructions=66,run=64",
        table3_gb_s: 29.59,
    },
    ObjectsApp {
        name: "IdenProf",
        // Runs: DenseNet-121's training streams through dense tensors (convolutions,
        // batch normalisation).
        spec: "objects:instructions=50,run=64",
        table3_gb_s: 36.85,
    },
    ObjectsApp {
        name: "Graph500",
        // Runs: breadth-first search tests and sets a random vertex's visited bit and
        // parent for every edge it scans.
        spec: "objects:instructions=35",
        table3_gb_s: 44.26,
    },
];

const fn mean(xs: &[f64]) -> f64 {
    let (mut sum, mut i) = (0.0, 0);
    while i < xs.len() {
        sum += xs[i];
        i += 1;
    }
    sum / xs.len() as f64
}

/// The object generators' built-in footprint stands for a program of this many GB (64 MiB, the
/// seed's sizes in GB as MB).
const OBJECTS_GB: f64 = 64.0;

/// `objects-pair-table3`: the pair sized, started and paced as Table 3 gives the seed's programs,
/// each scaled from GB to MB as every workload is: QMCPACK full's 353.22 GB and the shared inputs'
/// mean peak, 78.3 GB (22% of it); the high-priority program from QMCPACK's 20 minutes of
/// 12,948 s (9.3% of its accesses); a fast tier of the seed's 192 GB (54% of the low one's
/// footprint).
const PAIR_TABLE3: PairShape = PairShape {
    name: "objects-pair-table3",
    summary:
        "objects-pair as the seed's Table 3 sizes, starts and paces it: objects at 22% of objects-sites' \
              size from 9.3% of its accesses, fast tier 54% of it, 24.5 and 39.7 GB/s in DRAM, QMCPACK's \
              accesses in runs of 256 B",
    low: OBJECTS_PAIR_TABLE3_PROGRAMS[0],
    high: OBJECTS_PAIR_TABLE3_PROGRAMS[1],
    low_size: QMCPACK_FULL_PEAK_GB / OBJECTS_GB,
    high_size: mean(&SHARED_PEAKS_GB) / OBJECTS_GB,
    start_share: QMCPACK_HEAD_START_SECONDS / QMCPACK_FULL_SECONDS,
    fast_share_of_low: Some(SEED_DRAM_GB / QMCPACK_FULL_PEAK_GB),
};

/// Object tiering §5.5 (Fig. 8): a low-priority program with a footprint beyond the fast tier
/// and thousands of allocation sites (the seed's QMCPACK, full input, 16 threads: `objects-sites`)
/// runs from the start; a high-priority one (one benchmark's shared input: `objects`) starts
/// once the first has made a share of its accesses, in `shape`.
fn objects_pair(
    shape: &PairShape,
    name: &str,
    seed: u64,
    size_scale: f64,
) -> Result<corun::CoRun, WorkloadError> {
    let low = build(shape.low, seed, size_scale * shape.low_size)?;
    let high = build(shape.high, seed.wrapping_add(1), size_scale * shape.high_size)?;
    let mut info = low.info().clone();
    info.name = name.to_string();
    info.description = shape.summary.to_string();
    // The seed's run over this one, from the pair's own size (its programs' are multiples of it).
    info.scale = SEED_SCALE / size_scale;
    info.suggested_fast_bytes = match shape.fast_share_of_low {
        Some(share) => ((low.info().footprint_bytes as f64 * share) as u64).next_multiple_of(PAGE),
        None => (high.info().footprint_bytes * 10 / 9).next_multiple_of(PAGE),
    };
    let start = (low.info().accesses as f64 * shape.start_share) as u64;
    let members = vec![
        corun::Member { source: low, priority: 0, start_after: None },
        corun::Member { source: high, priority: 1, start_after: Some((0, start)) },
    ];
    corun::CoRun::new(info, members)
        .map_err(|why| WorkloadError::TooSmall { name: format!("{name} ({why})"), size_scale })
}

/// `bytes * size_scale`, rounded down to whole pages; at least one page per thread, so every
/// thread has work and page-granular policies see at least a page each.
pub(crate) fn scaled_bytes(
    name: &str,
    bytes: u64,
    size_scale: f64,
    threads: u32,
) -> Result<u64, WorkloadError> {
    let scaled = (bytes as f64 * size_scale) as u64 / PAGE * PAGE;
    if scaled < u64::from(threads) * PAGE {
        return Err(WorkloadError::TooSmall { name: name.to_string(), size_scale });
    }
    Ok(scaled)
}

/// `x * size_scale`, rounded to the nearest integer.
pub(crate) fn scaled_count(x: f64, size_scale: f64) -> u64 {
    (x * size_scale).round() as u64
}

/// The description of a workload scaled from a seed experiment: the run is `SEED_SCALE /
/// size_scale` times smaller than the seed's, and so is its fast tier (`seed_fast_bytes` is
/// already divided by `SEED_SCALE`); `Generator::new` fills in the access count.
pub(crate) fn seed_info(
    name: &str,
    description: String,
    footprint_bytes: u64,
    threads: u32,
    seed_fast_bytes: u64,
    size_scale: f64,
) -> WorkloadInfo {
    WorkloadInfo {
        name: name.to_string(),
        description,
        footprint_bytes,
        threads,
        scale: SEED_SCALE / size_scale,
        suggested_fast_bytes: scaled_fast_bytes(seed_fast_bytes, size_scale),
        accesses: 0,
        recording: None,
    }
}

/// A fast-tier capacity `bytes * size_scale`, rounded down to whole pages.
pub(crate) fn scaled_fast_bytes(bytes: u64, size_scale: f64) -> u64 {
    scaled_count(bytes as f64, size_scale) / PAGE * PAGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn every_listed_workload_builds_and_the_suite_is_listed() {
        for spec in list() {
            let w = build(spec.name, 1, 1.0 / 64.0).unwrap();
            assert_eq!(w.info().name, spec.name);
        }
        let names: Vec<&str> = list().iter().map(|s| s.name).collect();
        assert!(DEFAULT_SUITE.iter().all(|n| names.contains(n)));
    }

    /// The grid points docs/policies.md's reproductions need beyond the sweeps' multiples: the
    /// seed's 32 GB pmbench array (Ambix §5.5.1) and a GUPS hot set above the fast tier (HPWP
    /// §6.2, Fig 8).
    #[test]
    fn the_seeds_grid_points_build_at_their_sizes() {
        for s in ["s12", "s25"] {
            for r in [20, 50, 80] {
                let w = build(&format!("pmbench-{s}-r{r}-32g"), 1, 1.0).unwrap();
                let i = w.info();
                assert_eq!((i.footprint_bytes, i.suggested_fast_bytes, i.threads), (32 << 20, 27 << 20, 32));
            }
        }
        let w = build("gups-hot64", 1, 1.0).unwrap();
        let i = w.info();
        assert_eq!((i.footprint_bytes, i.suggested_fast_bytes), (128 << 20, 48 << 20));
        assert!(i.description.ends_with("90% to a 64 MiB hot set"), "{}", i.description);
    }

    #[test]
    fn errors_say_what_to_do() {
        let err = build("nope", 1, 1.0).err().unwrap().to_string();
        assert!(err.starts_with("unknown workload 'nope'; known: gups, gups-hot16"), "{err}");
        assert!(err.ends_with("(see `terrace list workloads`)"), "{err}");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(build("gups", 1, bad), Err(WorkloadError::InvalidScale { .. })));
        }
        assert!(matches!(build("gups", 1, 1e-9), Err(WorkloadError::TooSmall { .. })));
        assert!(matches!(build("gups", 1, 4096.0), Err(WorkloadError::TooLarge { .. })));
    }

    #[test]
    fn npb_kernels_take_their_iterations_as_a_parameter() {
        let scale = 1.0 / 16.0;
        let accesses = |name: &str| build(name, 1, scale).unwrap().info().accesses;
        let init = build("npb-bt-small", 1, scale).unwrap().info().footprint_bytes / 64;
        // NPB's own 250 time steps by default; each iteration is the same passes.
        let (one, two) =
            (accesses("npb-bt-small:iterations=1") - init, accesses("npb-bt-small:iterations=2") - init);
        assert!(one > 0 && (two as f64 / one as f64 - 2.0).abs() < 0.01, "{one} {two}");
        let all = accesses("npb-bt-small") - init;
        assert!((all as f64 / one as f64 - 250.0).abs() < 2.5, "{all} against {one} a step");
        let cg = build("npb-cg-small:iterations=3", 1, scale).unwrap();
        assert_eq!(cg.info().name, "npb-cg-small:iterations=3");
        assert!(cg.info().description.contains("3 iterations"), "{}", cg.info().description);
        for (name, says) in [
            ("npb-bt-small:iterations=0", "iterations must be a whole number from 1 to 1000, not '0'"),
            ("npb-bt-small:iterations=1001", "not '1001'"),
            ("npb-bt-small:iterations=2.5", "not '2.5'"),
            ("npb-bt-small:steps=3", "unknown parameter 'steps'; npb-bt-small takes `iterations`"),
            ("npb-bt-small:iterations", "'iterations' is not key=value"),
            ("gups:iterations=3", "'gups' takes no parameters"),
        ] {
            let err = build(name, 1, scale).err().unwrap().to_string();
            assert!(err.starts_with(&format!("workload '{name}': ")) && err.contains(says), "{err}");
        }
        let err = build("nope:iterations=3", 1, scale).err().unwrap().to_string();
        assert!(err.starts_with("unknown workload 'nope'"), "{err}");
    }

    #[test]
    fn bfs_takes_its_searches_as_a_parameter() {
        let scale = 1.0 / 16.0;
        let accesses = |name: &str| build(name, 1, scale).unwrap().info().accesses;
        // 8 searches by default: the same roots, so the same stream.
        assert_eq!(accesses("bfs-small:iterations=8"), accesses("bfs-small"));
        let (two, eight, sixteen) =
            (accesses("bfs-small:iterations=2"), accesses("bfs-small"), accesses("bfs-small:iterations=16"));
        // More searches, more accesses (each from its own random root, so not in proportion).
        assert!(two < eight && eight < sixteen, "{two} {eight} {sixteen}");
        let g = build("bfs-small:iterations=3", 1, scale).unwrap();
        assert!(g.info().description.contains("3 direction-optimising BFS"), "{}", g.info().description);
        for (name, says) in [
            ("bfs-small:iterations=0", "iterations must be a whole number from 1 to 128, not '0'"),
            ("bfs-small:iterations=129", "not '129'"),
            ("bfs-small:roots=3", "unknown parameter 'roots'; bfs-small takes `iterations`"),
        ] {
            let err = build(name, 1, scale).err().unwrap().to_string();
            assert!(err.starts_with(&format!("workload '{name}': ")) && err.contains(says), "{err}");
        }
    }

    fn stream(name: &str) -> Vec<terrace_model::Access> {
        let mut w = build(name, 1, 1.0 / 16.0).unwrap();
        let mut out = Vec::new();
        while w.fill(&mut out, 1 << 16) > 0 {}
        out
    }

    /// `instructions` sets every access's compute; `run` has each thread access that many lines
    /// in a row, so that a thread's next access is the next line most of the time (never with
    /// the default, which hands each access to the next thread); the defaults given explicitly
    /// make the built-in stream exactly.
    #[test]
    fn the_object_generators_take_their_pace_as_parameters() {
        let own = stream("objects-sites");
        assert_eq!(stream("objects-sites:instructions=20,run=1"), own);
        let slow = stream("objects-sites:instructions=82");
        assert_eq!(slow.len(), own.len());
        assert!(slow.iter().all(|a| a.instructions == 82));
        let next_line_share = |accesses: &[terrace_model::Access]| {
            let mut last: HashMap<u8, u64> = HashMap::new();
            let next = accesses
                .iter()
                .filter(|a| last.insert(a.thread, a.addr) == Some(a.addr.wrapping_sub(64)))
                .count();
            next as f64 / accesses.len() as f64
        };
        let (one, four) = (next_line_share(&own), next_line_share(&stream("objects-sites:run=4")));
        assert!(one < 0.01 && four > 0.7, "{one} {four}");
        // Runs change the order of the accesses, not how many there are.
        let declared = build("objects:run=4", 1, 1.0 / 16.0).unwrap().info().accesses;
        assert_eq!(
            (stream("objects:run=4").len(), stream("objects").len()),
            (declared as usize, declared as usize)
        );
        for (name, says) in [
            ("objects:run=0", "run must be a whole number from 1 to 64, not '0'"),
            ("objects-sites:run=65", "not '65'"),
            ("objects:instructions=0", "instructions must be a whole number from 1 to 10000"),
            ("objects:lines=4", "unknown parameter 'lines'; objects takes `instructions` and `run`"),
        ] {
            let err = build(name, 1, 1.0 / 16.0).err().unwrap().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    /// Table 3's pair: its programs at QMCPACK full's and the shared inputs' mean peak, scaled
    /// GB -> MB as the pair is, a fast tier of 192 GB over QMCPACK's 353.22, and the seed's run
    /// the pair's size scale over 1024 times larger.
    #[test]
    fn the_table3_pair_has_table3s_sizes() {
        let scale = 1.0 / 16.0;
        let pair = build("objects-pair-table3", 1, scale).unwrap();
        let [low, high] = pair.programs() else { panic!("two programs") };
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        assert!((mib(low.bytes) / (353.22 * scale) - 1.0).abs() < 0.01, "{}", mib(low.bytes));
        assert!((mib(high.bytes) / (78.3 * scale) - 1.0).abs() < 0.01, "{}", mib(high.bytes));
        let fast = pair.info().suggested_fast_bytes as f64 / low.bytes as f64;
        assert!((fast - 192.0 / 353.22).abs() < 0.005, "{fast}");
        assert_eq!(pair.info().scale, 1024.0 * 16.0);
        assert_eq!(
            (low.name.as_str(), high.name.as_str()),
            (OBJECTS_PAIR_TABLE3_PROGRAMS[0], OBJECTS_PAIR_TABLE3_PROGRAMS[1])
        );
    }
}
