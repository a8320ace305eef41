//! NPB-like kernels (BT, FT, MG, CG) with the access character Ambix measured (Ambix thesis §5.4.3).
//!
//! Seed setup: NPB 3.4.1 OMP with problem sizes edited so the footprints are Table 5.1's
//! (18-150 GB, about 0.8x / 1.5x / 3.5x the ~27 GB of usable DRAM), 32 threads
//! (`OMP_NUM_THREADS=32`), read:write mixes BT 3.5:1, FT 1.7:1, MG 4:1, CG >60:1.
//!
//! Each generator is the kernel's loop structure at cache-line granularity: which arrays a loop
//! nest reads and writes per grid point, in which order (sequential along x, strided along y and
//! z), threads owning contiguous ranges of the outermost loop as OpenMP's static schedule gives
//! them. Counting the loads and stores of that structure (a store to a line the loop does not
//! read costs a write-allocate read too) gives a little fewer reads than Ambix measured; the rest
//! are *re-fetches*, reads of a line the cache lost although the structure reuses it (the
//! previous plane of a stencil), spread evenly over all passes at the rate that makes the run's
//! mix the seed's. The seed picks where each thread's re-fetches fall, as real cache state would.
//! docs/workloads.md lists every pass.

use crate::phases::{append_slots, Generator, Phase, PhaseFill, Step, Sweep, LINE};
use crate::registry::{scaled_bytes, seed_info};
use crate::rng::Rng;
use crate::WorkloadError;
use terrace_model::{Access, AccessKind};

/// Ambix §5.4: `OMP_NUM_THREADS=32`.
const THREADS: u32 = 32;
/// Ambix §5.2.1: ~27 GB usable DRAM per socket, scaled GB -> MB.
const FAST_BYTES: u64 = 27 << 20;
/// The most iterations the `iterations` parameter allows: four times NPB's longest count, so that
/// a mistyped value is refused rather than simulated for hours (a BT iteration at the large size
/// is about 10 million accesses).
pub(crate) const MAX_ITERATIONS: u32 = 1000;
/// Fixed point for per-cell rates: 2^32 = once per cell.
const ONE: u64 = 1 << 32;
/// The most accesses one pass makes per grid cell.
const MAX_STEPS: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    Bt,
    Ft,
    Mg,
    Cg,
}

/// Ambix's three problem sizes (Table 5.1), shared by the NPB kernels and BFS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Size {
    Small,
    Medium,
    Large,
}

pub(crate) const KERNELS: [Kernel; 4] = [Kernel::Bt, Kernel::Ft, Kernel::Mg, Kernel::Cg];
pub(crate) const SIZES: [Size; 3] = [Size::Small, Size::Medium, Size::Large];

impl Size {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }
}

impl Kernel {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::Bt => "bt",
            Kernel::Ft => "ft",
            Kernel::Mg => "mg",
            Kernel::Cg => "cg",
        }
    }

    /// Ambix Table 5.1, GB.
    fn table_gb(self, size: Size) -> f64 {
        let [s, m, l] = match self {
            Kernel::Bt => [28.4, 39.1, 53.9],
            Kernel::Ft => [20.0, 40.0, 80.0],
            Kernel::Mg => [26.5, 74.3, 131.0],
            Kernel::Cg => [18.0, 39.8, 150.0],
        };
        match size {
            Size::Small => s,
            Size::Medium => m,
            Size::Large => l,
        }
    }

    /// Ambix §5.4.3's read:write mixes; CG's ">60:1" is taken as 64:1.
    pub(crate) fn reads_per_write(self) -> f64 {
        match self {
            Kernel::Bt => 3.5,
            Kernel::Ft => 1.7,
            Kernel::Mg => 4.0,
            Kernel::Cg => 64.0,
        }
    }

    /// Instructions retired per memory access: BT's 5x5 block solves are the most compute per
    /// byte, CG's gathers the least (NPB's own op counts per point, rounded).
    fn instructions(self) -> u32 {
        match self {
            Kernel::Bt => 16,
            Kernel::Ft => 10,
            Kernel::Mg => 8,
            Kernel::Cg => 4,
        }
    }

    /// Iterations after initialisation (time steps, FFT iterations, V-cycles, CG iterations):
    /// NPB 3.4.1's own count for classes D and E (`setparams.c`: BT 250, FT 25, MG 50, CG 100),
    /// the classes Table 5.1's sizes lie at and between (MG small, 26.5 GB, is class D's 1024^3
    /// grid). Ambix §5.4.3 says it edited the sizes, not the counts; a dynamic policy's gain
    /// depends on the run's length relative to its periods, since every iteration after it has
    /// learnt repays its moves (both are scaled alike, docs/model.md §9). The `iterations`
    /// parameter overrides it (`npb-bt-large:iterations=32`).
    pub(crate) fn iterations(self) -> u32 {
        match self {
            Kernel::Bt => 250,
            Kernel::Ft => 25,
            Kernel::Mg => 50,
            Kernel::Cg => 100,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kernel::Bt => "BT: block-tridiagonal ADI sweeps along x, y, z",
            Kernel::Ft => "FT: evolve, then a 3-D FFT in place along z, y and x",
            Kernel::Mg => "MG: multigrid V-cycles over levels of 1/8 size",
            Kernel::Cg => "CG: sparse matrix-vector products with random gathers",
        }
    }
}

/// Table 5.1's GB as MiB (scale 1024), rounded to 256 KiB so that every size scale down to 1/64
/// keeps whole pages.
pub(crate) fn seed_bytes(kernel: Kernel, size: Size) -> u64 {
    (kernel.table_gb(size) * 4.0).round() as u64 * (256 << 10)
}

/// One line for `terrace list workloads`.
pub(crate) fn summary(kernel: Kernel, size: Size) -> String {
    let bytes = seed_bytes(kernel, size);
    format!(
        "NPB {}, 32 threads, {:.2} MiB ({:.1}x the 27 MiB fast tier), {}:1 reads:writes, {} iterations \
         (NPB's; `:iterations=N` for another count) (Ambix §5.4.3)",
        kernel.describe(),
        bytes as f64 / f64::from(1 << 20),
        bytes as f64 / FAST_BYTES as f64,
        kernel.reads_per_write(),
        kernel.iterations()
    )
}

/// Builds one NPB-like workload.
pub(crate) fn build(
    name: &str,
    kernel: Kernel,
    size: Size,
    iterations: u32,
    seed: u64,
    size_scale: f64,
) -> Result<Generator, WorkloadError> {
    let footprint = scaled_bytes(name, seed_bytes(kernel, size), size_scale, THREADS)?;
    let instructions = kernel.instructions();
    let mut phases = Vec::new();
    match kernel {
        // MG and CG first touch their arrays one loop after another, in their code's order.
        Kernel::Mg => mg_init(footprint, &mut phases),
        Kernel::Cg => cg_init(footprint, &CgLayout::fitting(footprint), &mut phases),
        // One loop over every array (docs/workloads.md: FT's `init_ui`; BT's, a choice).
        _ => phases.push(first_touch(0, footprint, kernel)),
    }
    let mut rng = Rng::new(seed);
    match kernel {
        Kernel::Cg => cg_phases(footprint, iterations, seed, &mut phases),
        _ => {
            let passes = match kernel {
                Kernel::Bt => bt_passes(footprint),
                Kernel::Ft => ft_passes(footprint),
                _ => mg_passes(footprint),
            };
            let refetch = refetch_rate(&passes, kernel.reads_per_write());
            for _ in 0..iterations {
                for spec in &passes {
                    let pass = GridPass::new(spec, refetch, instructions, &mut rng);
                    phases.push(Phase::Custom(Box::new(pass)));
                }
            }
        }
    }
    let info = seed_info(
        name,
        format!(
            "NPB-like {} (Ambix §5.4.3): {THREADS} threads, {} iterations, {}:1 reads:writes",
            kernel.describe(),
            iterations,
            kernel.reads_per_write()
        ),
        footprint,
        THREADS,
        FAST_BYTES,
        size_scale,
    );
    Ok(Generator::new(info, phases))
}

// ------------------------------------------------------------------------------------------
// Grids and passes (BT, FT, MG)

/// A 3-D grid of `cells` cache lines, x fastest: `nx` lines per row, `nx` rows per plane, and
/// as many planes as it takes (the last one may be partial, so the grid fills its array
/// exactly at any size).
#[derive(Clone, Copy, Debug)]
struct Grid {
    cells: u64,
    nx: u64,
    plane: u64,
}

impl Grid {
    fn new(cells: u64) -> Self {
        assert!(cells > 0);
        let mut nx = (cells as f64).cbrt() as u64;
        while (nx + 1).pow(3) <= cells {
            nx += 1;
        }
        while nx > 1 && nx.pow(3) > cells {
            nx -= 1;
        }
        let nx = nx.max(1);
        Grid { cells, nx, plane: nx * nx }
    }

    /// The distance of `planes` planes plus `rows` rows (either may be negative) as a forward
    /// offset modulo the grid: neighbours past an edge wrap around (periodic boundaries).
    fn offset(&self, planes: i64, rows: i64) -> u64 {
        let d = planes * self.plane as i64 + rows * self.nx as i64;
        d.rem_euclid(self.cells as i64) as u64
    }
}

/// The order a loop nest visits the grid in: the innermost loop runs along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// Along x: consecutive lines (`do k; do j; do i`).
    X,
    /// Along y: stride `nx` (`do k; do i; do j`).
    Y,
    /// Along z: stride one plane (`do j; do i; do k`).
    Z,
}

impl Family {
    /// How many lines (runs of the innermost loop) the grid has in this order.
    fn lines(self, g: &Grid) -> u64 {
        match self {
            Family::X => g.cells.div_ceil(g.nx),
            Family::Y => g.cells.div_ceil(g.plane) * g.nx,
            Family::Z => g.plane.min(g.cells),
        }
    }

    fn stride(self, g: &Grid) -> u64 {
        match self {
            Family::X => 1,
            Family::Y => g.nx,
            Family::Z => g.plane,
        }
    }

    /// First cell and length of line `l`; threads own contiguous ranges of lines, which is
    /// OpenMP's static schedule of the outermost loop.
    fn line(self, g: &Grid, l: u64) -> (u64, u64) {
        match self {
            Family::X => {
                let start = l * g.nx;
                (start, g.nx.min(g.cells - start))
            }
            Family::Y => {
                let start = (l / g.nx) * g.plane + l % g.nx;
                if start >= g.cells {
                    (start, 0)
                } else {
                    (start, g.nx.min((g.cells - start).div_ceil(g.nx)))
                }
            }
            Family::Z => (l, (g.cells - l).div_ceil(g.plane)),
        }
    }
}

/// One access a pass makes at each cell it visits.
#[derive(Clone, Copy, Debug)]
struct GStep {
    /// Byte offset of the array.
    base: u64,
    /// Cells added to the visited cell (wrapping), e.g. one plane for a z-neighbour.
    off: u64,
    /// The array is this many times coarser per axis, as log2 of the cell ratio (MG: 3).
    shift: u32,
    /// 0 = at every cell; otherwise times per cell out of 2^32.
    rate: u64,
    kind: AccessKind,
}

impl GStep {
    const fn read(base: u64) -> Self {
        GStep { base, off: 0, shift: 0, rate: 0, kind: AccessKind::Read }
    }
    const fn write(base: u64) -> Self {
        GStep { base, off: 0, shift: 0, rate: 0, kind: AccessKind::Write }
    }
    fn at(mut self, off: u64) -> Self {
        self.off = off;
        self
    }
    /// The same access on the next level down, once per 8 fine cells (MG restriction and
    /// prolongation).
    const fn coarse(mut self) -> Self {
        self.shift = 3;
        self.rate = ONE / 8;
        self
    }
    /// An array half as large, by consecutive cells: one access per two cells (FT's twiddle, a
    /// real beside complex arrays).
    const fn half(mut self) -> Self {
        self.shift = 1;
        self.rate = ONE / 2;
        self
    }
    /// Expected accesses per visited cell.
    fn per_cell(&self) -> f64 {
        if self.rate == 0 {
            1.0
        } else {
            self.rate as f64 / ONE as f64
        }
    }
}

/// A loop nest over one grid: its order, its accesses per cell, and the array its re-fetches read.
struct PassSpec {
    grid: Grid,
    family: Family,
    steps: Vec<GStep>,
    /// Base of the array a re-fetch reads (the pass's main input).
    refetch_base: u64,
}

/// Re-fetches per cell (out of 2^32, the same in every pass) that raise the structural mix to
/// `target` reads per write.
fn refetch_rate(passes: &[PassSpec], target: f64) -> u64 {
    let (mut reads, mut writes, mut cells) = (0.0, 0.0, 0.0);
    for p in passes {
        let c = p.grid.cells as f64;
        cells += c;
        for s in &p.steps {
            match s.kind {
                AccessKind::Read => reads += c * s.per_cell(),
                AccessKind::Write => writes += c * s.per_cell(),
            }
        }
    }
    let extra = target * writes - reads;
    assert!(extra >= 0.0 && extra <= cells, "structural mix {} above target {target}", reads / writes);
    (extra / cells * ONE as f64).round() as u64
}

/// `n` arrays of `cells` lines each, one after another from `start` bytes: their bases.
fn arrays<const N: usize>(start: u64, cells: u64) -> [u64; N] {
    std::array::from_fn(|i| start + i as u64 * cells * LINE)
}

/// BT per time step: `compute_rhs` (six loops in x order), x/y/z solves, `add`.
/// Four equal arrays: u, rhs, forcing, and the per-point auxiliaries (rho_i, us, vs, ws, qs,
/// square). Structure: 31 reads, 10 writes per cell; Ambix: 3.5:1 = 35 reads.
fn bt_passes(footprint: u64) -> Vec<PassSpec> {
    let cells = footprint / LINE / 4;
    let g = Grid::new(cells);
    let [u, rhs, forcing, aux] = arrays::<4>(0, cells);
    let (r, w) = (GStep::read, GStep::write);
    let z = |d: i64| g.offset(d, 0);
    let pass = |family, steps: Vec<GStep>| PassSpec { grid: g, family, steps, refetch_base: u };
    vec![
        // rho_i, us, vs, ws, qs, square from u (write-allocate read of aux).
        pass(Family::X, vec![r(u), r(aux), w(aux)]),
        // rhs = forcing.
        pass(Family::X, vec![r(forcing), r(rhs), w(rhs)]),
        // xi and eta fluxes: x and y neighbours are rows apart and stay cached.
        pass(Family::X, vec![r(u), r(aux), r(rhs), w(rhs)]),
        pass(Family::X, vec![r(u), r(aux), r(rhs), w(rhs)]),
        // zeta fluxes: planes k-2..k+2 of u and k-1..k+1 of aux are too far apart to stay cached.
        pass(
            Family::X,
            vec![
                r(u).at(z(-2)),
                r(u).at(z(-1)),
                r(u),
                r(u).at(z(1)),
                r(u).at(z(2)),
                r(aux).at(z(-1)),
                r(aux),
                r(aux).at(z(1)),
                r(rhs),
                w(rhs),
            ],
        ),
        // rhs *= dt.
        pass(Family::X, vec![r(rhs), w(rhs)]),
        // x, y, z solves: the 5x5 blocks of a line stay in cache; u and aux build them.
        pass(Family::X, vec![r(u), r(aux), r(rhs), w(rhs)]),
        pass(Family::Y, vec![r(u), r(aux), r(rhs), w(rhs)]),
        pass(Family::Z, vec![r(u), r(aux), r(rhs), w(rhs)]),
        // add: u += rhs.
        pass(Family::X, vec![r(u), r(rhs), w(u)]),
    ]
}

/// FT per iteration, as NPB 3.4.1's OpenMP FT runs it (`ft.f`): `evolve` (u0 *= twiddle, then
/// u1 = u0, in x order), then the inverse 3-D FFT in place on u1 (`fft(-1, u1, u1)`): `cffts3`,
/// `cffts2` and `cffts1`, along z, y and x, each copying a block of lines into a thread's
/// scratch and back, so u1 is read and written once a pass. The checksum reads 1,024 points.
/// The arrays are u0 and u1, complex (16 B a point), and twiddle, real (8 B): 40 B a point,
/// which makes Table 5.1's 20, 40 and 80 GB exactly 2^29, 2^30 and 2^31 points (GiB). A cell
/// is a line of u0 and of u1 (four points); twiddle's half line is read every second cell.
/// Structure: 5.5 reads, 5 writes per cell; Ambix: 1.7:1 = 8.5.
fn ft_passes(footprint: u64) -> Vec<PassSpec> {
    let cells = footprint / LINE * 2 / 5;
    let g = Grid::new(cells);
    let [u0, u1] = arrays::<2>(0, cells);
    let twiddle = 2 * cells * LINE;
    let (r, w) = (GStep::read, GStep::write);
    let pass = |family, steps: Vec<GStep>, refetch_base| PassSpec { grid: g, family, steps, refetch_base };
    vec![
        // u0 *= twiddle; u1 = u0 (write-allocate read of u1).
        pass(Family::X, vec![r(u0), r(twiddle).half(), w(u0), r(u1), w(u1)], u0),
        pass(Family::Z, vec![r(u1), w(u1)], u1),
        pass(Family::Y, vec![r(u1), w(u1)], u1),
        pass(Family::X, vec![r(u1), w(u1)], u1),
    ]
}

/// MG's grid levels. NPB recurses to a 2x2x2 grid; levels below the fifth hold under 1/4096
/// of the accesses, so five keep the V-cycle's shape while the level count, and with it the
/// mix, stays the same at every size scale.
const MG_LEVELS: usize = 5;

/// The cells of MG's levels: each 1/8 of the one above (rounded up), with the finest level as
/// large as fits three full-size arrays (u, v, r) plus u and r on every coarser level.
fn mg_levels(footprint: u64) -> Vec<u64> {
    let lines = footprint / LINE;
    let levels = |top: u64| {
        let mut v = vec![top];
        while v.len() < MG_LEVELS {
            let next = v.last().unwrap().div_ceil(8);
            v.push(next);
        }
        v
    };
    let total = |v: &[u64]| 3 * v[0] + 2 * v[1..].iter().sum::<u64>();
    let mut top = lines * 7 / 23; // 3 + 2/7 arrays of the finest size
    while total(&levels(top)) > lines {
        top -= 1;
    }
    levels(top)
}

/// One initialising loop over the bytes `[from, to)`: every thread writes each line of its own
/// contiguous share once (an `!$omp parallel do` with static scheduling).
fn first_touch(from: u64, to: u64, kernel: Kernel) -> Phase {
    let write = vec![Step::write(from, kernel.instructions())];
    Phase::Sweep(Sweep::new((to - from) / LINE, THREADS, write, 1, true))
}

/// Where MG's arrays start: v (the finest level only) at 0, then u and r of each level, finest
/// first; and where the last ends.
fn mg_bases(cells: &[u64]) -> (Vec<(u64, u64)>, u64) {
    let mut bases = Vec::new(); // (u, r) per level
    let mut next = cells[0] * LINE;
    for &c in cells {
        bases.push((next, next + c * LINE));
        next += 2 * c * LINE;
    }
    (bases, next)
}

/// MG's first touches, in the order of NPB 3.4's OpenMP `mg.f`, each loop by every thread over
/// its own planes: `zero3(u)` on the finest level, `zran3(v)`, the first `resid` (r on the finest
/// level), then the startup iteration's `mg3P`, whose restrictions touch r's coarser levels
/// from fine to coarse and whose way up zeroes u's from the coarsest; what the layout leaves
/// over up to the footprint comes last. So first touch fills the fast tier with the finest u
/// first, which most of MG's traffic reads and writes.
fn mg_init(footprint: u64, phases: &mut Vec<Phase>) {
    let cells = mg_levels(footprint);
    let (bases, end) = mg_bases(&cells);
    let sweep = |from: u64, lines: u64| first_touch(from, from + lines * LINE, Kernel::Mg);
    phases.push(sweep(bases[0].0, cells[0]));
    phases.push(sweep(0, cells[0]));
    for (l, &c) in cells.iter().enumerate() {
        phases.push(sweep(bases[l].1, c));
    }
    for (l, &c) in cells.iter().enumerate().skip(1).rev() {
        phases.push(sweep(bases[l].0, c));
    }
    if end < footprint {
        phases.push(first_touch(end, footprint, Kernel::Mg));
    }
}

/// MG per iteration: NPB's `mg3P` V-cycle (restrict down the levels, smooth at the bottom,
/// then zero, prolong, residual and smooth on the way up) followed by the finest residual.
/// 27-point stencils read the planes above and below, which are too far apart to stay cached.
fn mg_passes(footprint: u64) -> Vec<PassSpec> {
    let cells = mg_levels(footprint);
    let top = cells.len() - 1;
    let (bases, _) = mg_bases(&cells);
    let v = 0;
    let grids: Vec<Grid> = cells.iter().map(|&c| Grid::new(c)).collect();
    let (r, w) = (GStep::read, GStep::write);
    let mut passes = Vec::new();
    let mut pass = |l: usize, steps: Vec<GStep>, refetch_base| {
        passes.push(PassSpec { grid: grids[l], family: Family::X, steps, refetch_base })
    };
    let stencil = |l: usize, base: u64| {
        let g = grids[l];
        [r(base).at(g.offset(-1, 0)), r(base), r(base).at(g.offset(1, 0))]
    };
    // Restriction r_l -> r_{l+1}: each fine line once, a coarse line per 8 (write-allocate).
    for l in 0..top {
        let (rf, rc) = (bases[l].1, bases[l + 1].1);
        pass(l, vec![r(rf), r(rc).coarse(), w(rc).coarse()], rf);
    }
    // Bottom: zero u, then smooth.
    let (ub, rb) = bases[top];
    pass(top, vec![r(ub), w(ub)], ub);
    pass(top, [stencil(top, rb).as_slice(), &[r(ub), w(ub)]].concat(), rb);
    // Up: zero (except the finest), prolong, residual, smooth.
    for l in (0..top).rev() {
        let ((u, rr), uc) = (bases[l], bases[l + 1].0);
        if l > 0 {
            pass(l, vec![r(u), w(u)], u);
        }
        pass(l, vec![r(uc).coarse(), r(u), w(u)], u);
        if l > 0 {
            // r = r - A u, in place.
            pass(l, [stencil(l, u).as_slice(), &[r(rr), w(rr)]].concat(), u);
        } else {
            // r = v - A u: v read, r written (write-allocate).
            pass(l, [stencil(l, u).as_slice(), &[r(v), r(rr), w(rr)]].concat(), u);
        }
        pass(l, [stencil(l, rr).as_slice(), &[r(u), w(u)]].concat(), rr);
    }
    // The iteration's closing residual on the finest level.
    let (u, rr) = bases[0];
    pass(0, [stencil(0, u).as_slice(), &[r(v), r(rr), w(rr)]].concat(), u);
    passes
}

/// Where one thread is in its share of a pass.
#[derive(Clone, Debug)]
struct GCursor {
    line: u64,
    pos: u64,
    len: u64,
    cell: u64,
    step: usize,
    left: u64,
    /// Per step: the rate accumulator (steps with equal rates fire at the same cells).
    acc: [u64; MAX_STEPS],
}

/// One pass over a grid by all threads, round-robin one access at a time.
pub(crate) struct GridPass {
    grid: Grid,
    family: Family,
    stride: u64,
    steps: Vec<GStep>,
    cursors: Vec<GCursor>,
    next_thread: usize,
    remaining: u64,
    instructions: u32,
}

impl GridPass {
    fn new(spec: &PassSpec, refetch: u64, instructions: u32, rng: &mut Rng) -> Self {
        let g = spec.grid;
        let mut steps = spec.steps.clone();
        if refetch > 0 {
            // A line of the previous plane, one row back: neither the visited cell nor a line
            // this thread's open streams still hold.
            let mut s = GStep::read(spec.refetch_base).at(g.offset(-1, -1));
            s.rate = refetch;
            steps.push(s);
        }
        assert!(steps.len() <= MAX_STEPS);
        let lines = spec.family.lines(&g);
        let t = u64::from(THREADS);
        let mut covered = 0;
        let mut cursors = Vec::with_capacity(THREADS as usize);
        for i in 0..t {
            let (l0, l1) = (i * lines / t, (i + 1) * lines / t);
            let cells: u64 = (l0..l1).map(|l| spec.family.line(&g, l).1).sum();
            // The seed decides where in the thread's range rated steps fire.
            let phase = rng.below(ONE);
            let left = steps
                .iter()
                .map(|s| match s.rate {
                    0 => cells,
                    rate => ((u128::from(phase) + u128::from(cells) * u128::from(rate)) >> 32) as u64,
                })
                .sum();
            let mut line = l0;
            let (mut start, mut len) = (0, 0);
            while line < l1 {
                (start, len) = spec.family.line(&g, line);
                if len > 0 {
                    break;
                }
                line += 1;
            }
            cursors.push(GCursor { line, pos: 0, len, cell: start, step: 0, left, acc: [phase; MAX_STEPS] });
            covered += cells;
        }
        debug_assert_eq!(covered, g.cells);
        let remaining = cursors.iter().map(|c| c.left).sum();
        GridPass {
            grid: g,
            family: spec.family,
            stride: spec.family.stride(&g),
            steps,
            cursors,
            next_thread: 0,
            remaining,
            instructions,
        }
    }
}

impl PhaseFill for GridPass {
    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.remaining) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let threads = self.cursors.len();
        let (cells, stride, nsteps) = (self.grid.cells, self.stride, self.steps.len());
        for out in &mut buf[start..] {
            while self.cursors[self.next_thread].left == 0 {
                crate::turns::pass(&mut self.next_thread, threads);
            }
            let t = self.next_thread;
            let c = &mut self.cursors[t];
            // `left` > 0, so an access is due at this cell or a later one.
            let s = loop {
                if c.step == nsteps {
                    c.step = 0;
                    c.pos += 1;
                    if c.pos < c.len {
                        c.cell += stride;
                    } else {
                        loop {
                            c.line += 1;
                            let (first, len) = self.family.line(&self.grid, c.line);
                            if len > 0 {
                                (c.cell, c.len, c.pos) = (first, len, 0);
                                break;
                            }
                        }
                    }
                }
                let i = c.step;
                c.step += 1;
                let s = self.steps[i];
                if s.rate != 0 {
                    c.acc[i] += s.rate;
                    if c.acc[i] < ONE {
                        continue;
                    }
                    c.acc[i] -= ONE;
                }
                break s;
            };
            let mut x = c.cell + s.off;
            if x >= cells {
                x -= cells;
            }
            let index = x >> s.shift;
            *out = Access {
                addr: s.base + index * LINE,
                instructions: self.instructions,
                size: LINE as u16,
                thread: t as u8,
                kind: s.kind,
            };
            c.left -= 1;
            crate::turns::pass(&mut self.next_thread, threads);
        }
        self.remaining -= n as u64;
        n
    }
}

// ------------------------------------------------------------------------------------------
// CG

/// Nonzeros per matrix row, as 492/19 = 25.89 (rows get 25 or 26): with 8-byte row pointers,
/// 8-byte values, 4-byte column indices, an 8-byte gather per nonzero, and the vector updates
/// of one CG iteration (8 reads, 3 writes per 8 rows), this makes exactly 64 reads per write.
const NNZ_NUM: u64 = 492;
const NNZ_DEN: u64 = 19;

fn nnz_before(row: u64) -> u64 {
    row * NNZ_NUM / NNZ_DEN
}

/// Bytes a row of `makea`'s workspace arrow, acol and aelt take (NPB 3.4's `cg.f`: `arow(na)`,
/// `acol(naz)` 4 B, `aelt(naz)` 8 B, `naz = na * (nonzer + 1)`): each row's outer vector has
/// nonzer + 1 entries and the matrix (nonzer + 1)^2 nonzeros a row, so at 25.89 nonzeros a row
/// nonzer + 1 = 5.09, and 4 + 12 x 5.09 = 65 bytes.
const CG_AUX_BYTES_PER_ROW: u64 = 65;

/// CG's arrays, in 64-byte lines: row pointers, values, column indices, the vectors p, q, z, r,
/// x (8 rows per line = one "block"), then what NPB 3.4's `makea` and `sparse` build the matrix
/// in and never use again: `v` (8 B) and `iv` (4 B) of one entry per nonzero (`v(nz)`,
/// `iv(nz + na)`), and `arow`, `acol`, `aelt`. The workspace is half of CG's footprint, and it
/// is first touched before the matrix ([`cg_init`]).
#[derive(Clone, Copy, Debug)]
struct CgLayout {
    blocks: u64,
    rowstr: u64,
    values: u64,
    colidx: u64,
    vectors: u64,
    /// `v`, then `iv`.
    workspace: u64,
    /// `arow`, `acol` and `aelt`.
    aux: u64,
}

impl CgLayout {
    fn new(blocks: u64) -> Self {
        let rows = 8 * blocks;
        let nnz = nnz_before(rows);
        let rowstr = 0;
        let values = rowstr + blocks * LINE;
        let colidx = values + nnz.div_ceil(8) * LINE;
        let vectors = colidx + nnz.div_ceil(16) * LINE;
        let workspace = vectors + 5 * blocks * LINE;
        let aux = workspace + nnz.div_ceil(8) * LINE + (nnz + rows).div_ceil(16) * LINE;
        CgLayout { blocks, rowstr, values, colidx, vectors, workspace, aux }
    }
    fn end(&self) -> u64 {
        self.aux + (8 * self.blocks * CG_AUX_BYTES_PER_ROW).div_ceil(LINE) * LINE
    }
    fn vector(&self, i: u64) -> u64 {
        self.vectors + i * self.blocks * LINE
    }
    /// The most blocks whose arrays fit in `footprint`.
    fn fitting(footprint: u64) -> Self {
        let nnz_per_block = 8.0 * NNZ_NUM as f64 / NNZ_DEN as f64;
        let per_block = 6.0
            + nnz_per_block * (2.0 / 8.0 + 2.0 / 16.0)
            + 8.0 / 16.0
            + (8 * CG_AUX_BYTES_PER_ROW) as f64 / LINE as f64;
        let mut blocks = (footprint as f64 / LINE as f64 / per_block) as u64 + 1;
        while CgLayout::new(blocks).end() > footprint {
            blocks -= 1;
        }
        CgLayout::new(blocks)
    }
}

/// CG's first touches, in the order of NPB 3.4's OpenMP `cg.f`, each loop by every thread over
/// its own rows: `makea`'s outer vectors (`arow`, `acol`, `aelt`, and what the layout leaves
/// over up to the footprint), `sparse`'s row counts (`rowstr`), its "preload data pages" loop
/// over `v` and `iv`, the matrix itself (`a`, `colidx`), then `x`, then `q`, `z`, `r` and `p`
/// in one loop. So first touch fills the fast tier with the workspace before the matrix.
fn cg_init(footprint: u64, l: &CgLayout, phases: &mut Vec<Phase>) {
    let ins = Kernel::Cg.instructions();
    let sweep = |from: u64, to: u64| first_touch(from, to, Kernel::Cg);
    phases.push(sweep(l.aux, footprint));
    phases.push(sweep(l.rowstr, l.values));
    phases.push(sweep(l.workspace, l.aux));
    phases.push(sweep(l.values, l.vectors));
    phases.push(sweep(l.vector(4), l.workspace));
    let vectors = [1, 2, 3, 0].map(|i| Step::write(l.vector(i), ins)).to_vec();
    phases.push(Phase::Sweep(Sweep::new(l.blocks, THREADS, vectors, 1, true)));
}

fn cg_phases(footprint: u64, iterations: u32, seed: u64, phases: &mut Vec<Phase>) {
    let l = CgLayout::fitting(footprint);
    let ins = Kernel::Cg.instructions();
    let [p, q, z, r] = [0, 1, 2, 3].map(|i| l.vector(i));
    let (rd, wr) = (|b| Step::read(b, ins), |b| Step::write(b, ins));
    let salt = Rng::new(seed).next_u64();
    for _ in 0..iterations {
        phases.push(Phase::Custom(Box::new(Spmv::new(l, salt))));
        // d = p.q; then z += alpha p, r -= alpha q, rho = r.r (one loop); then p = r + beta p.
        let loops =
            [vec![rd(p), rd(q)], vec![rd(z), rd(p), rd(r), rd(q), wr(z), wr(r)], vec![rd(r), rd(p), wr(p)]];
        for steps in loops {
            phases.push(Phase::Sweep(Sweep::new(l.blocks, THREADS, steps, 1, true)));
        }
    }
}

/// What a CG thread emits next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CgState {
    RowPointers,
    Values,
    Columns,
    Gather,
    ResultAllocate,
    Result,
}

#[derive(Clone, Debug)]
struct CgCursor {
    left: u64,
    block: u64,
    row: u64,
    /// The current nonzero, the end of its row, and the thread's first nonzero.
    k: u64,
    row_end: u64,
    k0: u64,
    state: CgState,
}

/// q = A p over the thread's row blocks: row pointers, values and column indices read in
/// order, p gathered at each nonzero's column, q written once per 8 rows.
pub(crate) struct Spmv {
    layout: CgLayout,
    rows: u64,
    /// The matrix's pattern: column of nonzero k is a hash of (k, salt), so it is the same in
    /// every iteration without being stored.
    salt: u64,
    cursors: Vec<CgCursor>,
    next_thread: usize,
    remaining: u64,
}

impl Spmv {
    fn new(layout: CgLayout, salt: u64) -> Self {
        let t = u64::from(THREADS);
        let cursors: Vec<CgCursor> = (0..t)
            .map(|i| {
                let (b0, b1) = (i * layout.blocks / t, (i + 1) * layout.blocks / t);
                let (k0, k1) = (nnz_before(8 * b0), nnz_before(8 * b1));
                let left = if b0 == b1 {
                    0
                } else {
                    3 * (b1 - b0) + (k1 - k0) + ((k1 - 1) / 8 - k0 / 8 + 1) + ((k1 - 1) / 16 - k0 / 16 + 1)
                };
                CgCursor {
                    left,
                    block: b0,
                    row: 8 * b0,
                    k: k0,
                    row_end: nnz_before(8 * b0 + 1),
                    k0,
                    state: CgState::RowPointers,
                }
            })
            .collect();
        let remaining = cursors.iter().map(|c| c.left).sum();
        Spmv { layout, rows: 8 * layout.blocks, salt, cursors, next_thread: 0, remaining }
    }

    #[cfg(test)]
    fn column(&self, k: u64) -> u64 {
        column(k, self.salt, self.rows)
    }
}

/// The column of nonzero `k`: splitmix64's finaliser of (k, salt), so every bit of k moves
/// every output bit, mapped onto `rows` by multiply-shift.
#[inline(always)]
fn column(k: u64, salt: u64, rows: u64) -> u64 {
    let mut x = k ^ salt;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    ((u128::from(x) * u128::from(rows)) >> 64) as u64
}

impl PhaseFill for Spmv {
    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.remaining) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let threads = self.cursors.len();
        let l = self.layout;
        let (q, p) = (l.vector(1), l.vector(0));
        let ins = Kernel::Cg.instructions();
        let (salt, rows) = (self.salt, self.rows);
        for out in &mut buf[start..] {
            while self.cursors[self.next_thread].left == 0 {
                crate::turns::pass(&mut self.next_thread, threads);
            }
            let t = self.next_thread;
            let c = &mut self.cursors[t];
            let line = |base: u64, i: u64| Access::read(base + i * LINE, LINE as u16, t as u8, ins);
            *out = loop {
                match c.state {
                    CgState::RowPointers => {
                        c.state = CgState::Values;
                        break line(l.rowstr, c.block);
                    }
                    CgState::Values => {
                        c.state = CgState::Columns;
                        if c.k == c.k0 || c.k & 7 == 0 {
                            break line(l.values, c.k / 8);
                        }
                    }
                    CgState::Columns => {
                        c.state = CgState::Gather;
                        if c.k == c.k0 || c.k & 15 == 0 {
                            break line(l.colidx, c.k / 16);
                        }
                    }
                    CgState::Gather => {
                        let col = column(c.k, salt, rows);
                        c.k += 1;
                        c.state = CgState::Values;
                        if c.k == c.row_end {
                            c.row += 1;
                            c.row_end = nnz_before(c.row + 1);
                            if c.row & 7 == 0 {
                                c.state = CgState::ResultAllocate;
                            }
                        }
                        break Access::read(p + col * 8, 8, t as u8, ins);
                    }
                    CgState::ResultAllocate => {
                        c.state = CgState::Result;
                        break line(q, c.block);
                    }
                    CgState::Result => {
                        c.state = CgState::RowPointers;
                        c.block += 1;
                        break Access::write(q + (c.block - 1) * LINE, LINE as u16, t as u8, ins);
                    }
                }
            };
            c.left -= 1;
            crate::turns::pass(&mut self.next_thread, threads);
        }
        self.remaining -= n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccessSource;

    /// Post-init reads and writes, checking bounds on the way.
    fn mix(kernel: Kernel, size: Size, scale: f64) -> (u64, u64, Generator) {
        let mut g = build("npb", kernel, size, kernel.iterations(), 3, scale).unwrap();
        let info = g.info().clone();
        let init = info.footprint_bytes / LINE;
        let (mut seen, mut reads, mut writes) = (0u64, 0u64, 0u64);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if g.fill(&mut buf, 1 << 16) == 0 {
                break;
            }
            for a in &buf {
                assert!(a.addr + u64::from(a.size) <= info.footprint_bytes, "{a:?}");
                seen += 1;
                if seen <= init {
                    assert_eq!(a.kind, AccessKind::Write);
                    continue;
                }
                match a.kind {
                    AccessKind::Read => reads += 1,
                    AccessKind::Write => writes += 1,
                }
            }
        }
        assert_eq!(seen, info.accesses);
        (reads, writes, g)
    }

    #[test]
    fn every_kernel_and_size_has_the_seeds_mix_within_one_percent() {
        for kernel in KERNELS {
            for size in SIZES {
                let (r, w, _) = mix(kernel, size, 1.0 / 16.0);
                let ratio = r as f64 / w as f64;
                let target = kernel.reads_per_write();
                assert!((ratio / target - 1.0).abs() < 0.01, "{kernel:?} {size:?}: {ratio} vs {target}");
            }
        }
    }

    #[test]
    fn grids_cover_every_cell_once_in_every_order() {
        for cells in [1, 7, 64, 100, 1000, 12345] {
            let g = Grid::new(cells);
            for f in [Family::X, Family::Y, Family::Z] {
                let mut seen = vec![0u8; cells as usize];
                for l in 0..f.lines(&g) {
                    let (start, len) = f.line(&g, l);
                    for i in 0..len {
                        seen[(start + i * f.stride(&g)) as usize] += 1;
                    }
                }
                assert!(seen.iter().all(|&s| s == 1), "{cells} {f:?}");
            }
        }
    }

    #[test]
    fn strided_passes_stride_and_a_half_array_is_read_once_a_line() {
        let g = Grid::new(4096);
        assert_eq!((g.nx, g.plane), (16, 256));
        let spec = |family, steps| PassSpec { grid: g, family, steps, refetch_base: 0 };
        let run = |spec: &PassSpec| {
            let mut p = GridPass::new(spec, 0, 1, &mut Rng::new(1));
            let mut out = Vec::new();
            while p.fill(&mut out, 100) > 0 {}
            out
        };
        // Thread 0's first accesses along z are one plane apart.
        let z = run(&spec(Family::Z, vec![GStep::read(0)]));
        let t0: Vec<u64> = z.iter().filter(|a| a.thread == 0).take(3).map(|a| a.addr / LINE).collect();
        assert_eq!(t0, [0, 256, 512]);
        let y = run(&spec(Family::Y, vec![GStep::read(0)]));
        let t0: Vec<u64> = y.iter().filter(|a| a.thread == 0).take(3).map(|a| a.addr / LINE).collect();
        assert_eq!(t0, [0, 16, 32]);
        // FT's twiddle beside u0: half as many lines, each read once, the one of its two cells.
        let tw = 1 << 20;
        let x = run(&spec(Family::X, vec![GStep::read(0), GStep::read(tw).half()]));
        let mut lines: Vec<u64> = x.iter().filter(|a| a.addr >= tw).map(|a| (a.addr - tw) / LINE).collect();
        assert_eq!(x.len() - lines.len(), 4096);
        lines.sort_unstable();
        let n = lines.len() as u64;
        assert!((2040..=2056).contains(&n), "{n} twiddle reads for 4,096 cells");
        lines.dedup();
        assert_eq!(lines.len() as u64, n, "a twiddle line read twice");
        assert!(lines.iter().all(|&l| l < 2048));
    }

    #[test]
    fn mg_levels_shrink_by_eight_and_fit() {
        let levels = mg_levels(seed_bytes(Kernel::Mg, Size::Large));
        assert_eq!(levels.len(), MG_LEVELS);
        assert!(levels.windows(2).all(|w| w[1] == w[0].div_ceil(8)));
        let lines = 3 * levels[0] + 2 * levels[1..].iter().sum::<u64>();
        assert!(lines <= seed_bytes(Kernel::Mg, Size::Large) / LINE);
    }

    /// When each line of `footprint` is first written, in accesses from the start (each line
    /// written once by the first touches, which come first).
    fn first_touches(g: &mut Generator, footprint: u64) -> Vec<u64> {
        let mut buf = Vec::new();
        let mut first = vec![u64::MAX; (footprint / LINE) as usize];
        let mut n = 0u64;
        while n < footprint / LINE {
            buf.clear();
            g.fill(&mut buf, 1 << 16);
            for a in buf.iter().take((footprint / LINE - n) as usize) {
                assert_eq!(a.kind, AccessKind::Write);
                let line = (a.addr / LINE) as usize;
                assert_eq!(first[line], u64::MAX, "line {line} written twice in the first touches");
                first[line] = n;
                n += 1;
            }
        }
        first
    }

    /// The first and last first touch of the lines in `[from, to)`.
    fn span(first: &[u64], from: u64, to: u64) -> (u64, u64) {
        let t = &first[(from / LINE) as usize..(to / LINE) as usize];
        (*t.iter().min().unwrap(), *t.iter().max().unwrap())
    }

    #[test]
    fn mg_first_touches_the_finest_u_then_v_then_r() {
        let mut g = build("npb-mg-large", Kernel::Mg, Size::Large, 1, 1, 1.0 / 16.0).unwrap();
        let footprint = g.info().footprint_bytes;
        let first = first_touches(&mut g, footprint);
        let cells = mg_levels(footprint);
        let (bases, _) = mg_bases(&cells);
        let u = span(&first, bases[0].0, bases[0].1);
        let v = span(&first, 0, cells[0] * LINE);
        let r = span(&first, bases[0].1, bases[1].0);
        let u_coarse = span(&first, bases[1].0, bases[1].1);
        assert!(u.1 < v.0 && v.1 < r.0 && r.1 < u_coarse.0, "{u:?} {v:?} {r:?} {u_coarse:?}");
    }

    #[test]
    fn cg_first_touches_the_workspace_before_the_matrix_and_the_vectors_last() {
        let g = build("npb-cg-large", Kernel::Cg, Size::Large, 1, 1, 1.0 / 16.0).unwrap();
        let footprint = g.info().footprint_bytes;
        let l = CgLayout::fitting(footprint);
        // Half the footprint is makea's workspace (NPB 3.4: v and iv one entry a nonzero, 12 of
        // CG's 24 bytes a nonzero).
        let workspace = (footprint - l.workspace) as f64 / footprint as f64;
        assert!((0.45..0.6).contains(&workspace), "workspace {workspace}");
        let mut g = g;
        let first = first_touches(&mut g, footprint);
        let when = |from: u64, to: u64| span(&first, from, to);
        let (rowstr, workspace, matrix, vectors) = (
            when(l.rowstr, l.values),
            when(l.workspace, l.aux),
            when(l.values, l.vectors),
            when(l.vectors, l.workspace),
        );
        assert!(rowstr.1 < workspace.0 && workspace.1 < matrix.0 && matrix.1 < vectors.0);
    }

    #[test]
    fn cg_gathers_are_spread_and_repeat_across_iterations() {
        let l = CgLayout::fitting(1 << 20);
        assert!(l.end() <= 1 << 20);
        let s = Spmv::new(l, 99);
        let cols: Vec<u64> = (0..1000).map(|k| s.column(k)).collect();
        assert!(cols.iter().all(|&c| c < 8 * l.blocks));
        assert_eq!(cols, (0..1000).map(|k| s.column(k)).collect::<Vec<_>>());
        let mean = cols.iter().sum::<u64>() as f64 / 1000.0 / (8 * l.blocks) as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
    }

    #[test]
    fn default_sizes_follow_table_5_1() {
        let g = build("npb", Kernel::Bt, Size::Small, Kernel::Bt.iterations(), 1, 1.0).unwrap();
        assert_eq!(g.info().footprint_bytes, 114 * (256 << 10));
        assert_eq!(g.info().suggested_fast_bytes, 27 << 20);
        assert_eq!(seed_bytes(Kernel::Cg, Size::Large), 150 << 20);
        assert_eq!(seed_bytes(Kernel::Mg, Size::Medium), 297 * (256 << 10));
    }
}
