//! GAP BFS over a Kronecker graph, as Ambix evaluates it (Ambix thesis §5.4.2), with GAP's graph
//! builder before it.
//!
//! Seed setup: GAP v1.3 BFS on Kronecker graphs of 2^27, 2^28, 2^29 vertices (35, 70, 140 GB),
//! 50 iterations from random roots, 2 reads per write, 32 threads, ~27 GB usable DRAM. Terrace
//! divides the vertex counts and DRAM by 1024: 2^17..2^19 vertices, 27 MiB.
//!
//! GAP's ids are `int32_t` (`benchmark.h` `NodeID`) and its offsets 64-bit (`SGOffset`, and the
//! CSR's index of 8-byte pointers), so the running BFS holds 144 bytes a vertex: offset 8, 32
//! neighbour ids x 4 (degree 16, symmetrised), parent 4, queue slot 4. The seed's 35 GB is the
//! builder's peak, not the BFS's: `builder.h` `MakeGraph` generates the edge list (16 edges a
//! vertex, two 4-byte ids each: 128 bytes), builds the CSR from it (`MakeCSR`), frees it at the end
//! of its scope, and copies the CSR into new arrays (`SquishGraph`) before the old ones are freed.
//! The generator runs that builder first, one access per page per pass, with the allocations and
//! frees as object events (so the simulator frees those pages): which arrays first touch leaves
//! in DRAM follows from it. Then `bfs.cc` `DOBFS` trials, each allocating parent and queue afresh
//! and freeing them at its end (`BenchmarkKernel` drops each trial's result).
//!
//! The graph is not stored: degrees and neighbour ids are hashes of the vertex and edge index,
//! so the same graph is traversed in every iteration. The generator emits GAP's
//! direction-optimising BFS (`bfs.cc` `DOBFS`): `InitParent`, then top-down steps while the
//! frontier is small and bottom-up steps while it is large, switched by GAP's alpha = 15 and
//! beta = 18 rules. Top-down: a frontier vertex is read from the queue, its offset and its
//! neighbour list in order, and each neighbour's parent; a neighbour not yet visited has its
//! parent written (the compare-and-swap) and is appended to the queue. Bottom-up: every vertex's
//! parent is read in vertex order; an unvisited vertex reads its offset and its neighbour list in
//! order until it meets a frontier vertex, then writes its own parent. Every vertex's parent is
//! written once per BFS besides `InitParent`. Neighbours are R-MAT draws (a=0.57, b=0.19,
//! c=0.19), whose ids GAP permutes, so hubs are scattered over the arrays.

use crate::phases::{append_slots, Generator, Phase, PhaseFill, Step, Sweep, LINE, PAGE};
use crate::registry::{scaled_bytes, seed_info};
use crate::rng::Rng;
use crate::WorkloadError;
use std::sync::Arc;
use terrace_model::{Access, ObjectEvent};

/// Ambix §5.4: `OMP_NUM_THREADS=32`.
const THREADS: u32 = 32;
/// Ambix §5.2.1: ~27 GB usable DRAM per socket, scaled GB -> MB.
const FAST_BYTES: u64 = 27 << 20;
/// GAP's `NodeID` (`int32_t`): neighbour ids, parents and queue slots.
const ID: u16 = 4;
/// GAP's offsets (`SGOffset`, `int64_t`) and the CSR's index of pointers.
const OFFSET: u16 = 8;
/// GAP's default Kronecker degree 16, stored in both directions.
const MEAN_DEGREE: u64 = 32;
/// An edge-list entry: `EdgePair<NodeID, NodeID>`, two ids; the list holds degree 16 a vertex.
const EDGE_BYTES: u64 = 2 * ID as u64;
/// Bytes a vertex at the builder's peak (the layout's size, [`Layout`]): the old CSR (8 + 128),
/// the squished copy (8 + 128) and `SquishCSR`'s `diffs` and `sq_offsets` (4 + 8).
const PEAK_BYTES: u64 = 2 * (8 + 4 * MEAN_DEGREE) + 4 + 8;
/// Graph500's R-MAT quadrant probabilities; a destination id's bits are independently 1 with
/// probability b + d = 1 - a - c.
const RMAT_A: f64 = 0.57;
const RMAT_C: f64 = 0.19;
/// Ambix ran 50 BFS iterations from random roots. Eight make 257-347 accesses a page of the
/// footprint at the built-in sizes, builder included, at least pmbench's 256 a page.
pub(crate) const ITERATIONS: u32 = 8;
/// The most searches `bfs-SIZE:iterations=N` takes: graph500's 64 search keys (the reference
/// code's `NBFS_max`, graph500 2.1 `options.h`) twice over.
pub(crate) const MAX_ITERATIONS: u32 = 128;
/// GAP's `DOBFS` switch parameters: go bottom-up when the frontier's edges exceed the edges left
/// to check / alpha; return top-down when the frontier shrinks below vertices / beta.
const ALPHA: u64 = 15;
const BETA: u64 = 18;
/// A level no vertex has: not visited.
const UNVISITED: u16 = u16::MAX;
/// A visit's bookkeeping between memory accesses (loop, compare, CAS setup).
const INSTRUCTIONS: u32 = 6;

pub(crate) use crate::npb::{Size, SIZES};

fn log2_vertices(size: Size) -> u32 {
    match size {
        Size::Small => 27,
        Size::Medium => 28,
        Size::Large => 29,
    }
}

/// The builder's peak for the seed's vertex count scaled by 1024: 2^17..2^19 vertices.
fn seed_bytes(size: Size) -> u64 {
    (1 << (log2_vertices(size) - 10)) * PEAK_BYTES
}

pub(crate) fn summary(size: Size) -> String {
    format!(
        "GAP direction-optimising BFS (Ambix §5.4.2), 32 threads, Kronecker graph of 2^{} vertices, \
         its builder's peak {:.1} MiB",
        log2_vertices(size) - 10,
        seed_bytes(size) as f64 / f64::from(1 << 20)
    )
}

/// Allocation sites of the builder's and the trials' arrays (object events need one each).
mod site {
    pub const EDGES: u64 = 1;
    pub const PERMUTATION: u64 = 2;
    pub const DEGREES: u64 = 3;
    pub const OFFSETS: u64 = 4;
    pub const INDEX: u64 = 5;
    pub const NEIGHBOURS: u64 = 6;
    pub const DIFFS: u64 = 7;
    pub const SQ_OFFSETS: u64 = 8;
    pub const SQ_INDEX: u64 = 9;
    pub const SQ_NEIGHBOURS: u64 = 10;
    pub const PARENT: u64 = 11;
    pub const QUEUE: u64 = 12;
}

/// The generator of `bfs-SIZE`, with `iterations` searches ([`ITERATIONS`] when `None`).
pub(crate) fn build(
    name: &str,
    size: Size,
    iterations: Option<u32>,
    seed: u64,
    size_scale: f64,
) -> Result<Generator, WorkloadError> {
    let iterations = iterations.unwrap_or(ITERATIONS);
    let scaled = scaled_bytes(name, seed_bytes(size), size_scale, THREADS)?;
    let l = Layout::new(scaled / PEAK_BYTES);
    let n = l.n;
    let mut rng = Rng::new(seed);
    let graph = Arc::new(Graph::new(l, &mut rng));
    let mut phases = builder(l);
    let parent_lines = (n * u64::from(ID)).div_ceil(LINE);
    for _ in 0..iterations {
        // DOBFS allocates parent (InitParent) and the queue; the trial's result drops them.
        phases.push(events(
            ObjectEvent::alloc,
            &[(l.parent, l.id_bytes, site::PARENT), (l.queue, l.id_bytes, site::QUEUE)],
        ));
        // GAP's InitParent: parent[v] = -degree(v), from the offsets, in a parallel loop: a
        // parent line (16 vertices) for every two lines of 8-byte offsets.
        let reset = vec![
            Step::read(l.offsets, INSTRUCTIONS),
            Step::read(l.offsets + parent_lines * LINE, INSTRUCTIONS),
            Step::write(l.parent, INSTRUCTIONS),
        ];
        phases.push(Phase::Sweep(Sweep::new(parent_lines, THREADS, reset, 1, true)));
        let source = rng.below(n);
        dobfs(&graph, source, &mut phases);
        // The closing loop reads every parent (its writes, to unreached vertices, are left out).
        let close = vec![Step::read(l.parent, INSTRUCTIONS)];
        phases.push(Phase::Sweep(Sweep::new(parent_lines, THREADS, close, 1, true)));
        phases.push(events(
            ObjectEvent::free,
            &[(l.parent, l.id_bytes, site::PARENT), (l.queue, l.id_bytes, site::QUEUE)],
        ));
    }
    let info = seed_info(
        name,
        format!(
            "GAP BFS (Ambix §5.4.2): its graph builder, then {THREADS} threads, {iterations} \
             direction-optimising BFS over a Kronecker graph of {n} vertices"
        ),
        l.end,
        THREADS,
        FAST_BYTES,
        size_scale,
    );
    Ok(Generator::new(info, phases))
}

/// The allocations or frees (`make`) of `arrays` (address, bytes, site), between two accesses.
fn events(make: fn(u64, u64, u64) -> ObjectEvent, arrays: &[(u64, u64, u64)]) -> Phase {
    Phase::Events(arrays.iter().map(|&(addr, bytes, site)| make(addr, bytes, site)).collect())
}

/// GAP v1.3's `MakeGraph` for a generated graph, in its order of allocation, first touch and free,
/// one access per page per pass (the seed's metric, iterations per second, is GAP's trial time,
/// which leaves the build out; what the trials inherit from it is where first touch put the
/// arrays they use, and that depends on the order of first touches and frees, not on how often a
/// pass touches each page):
/// 1. `Generator::MakeRMatEL`: the edge list is written; `PermuteIDs` writes a permutation and
///    rewrites every edge (read and write), then frees the permutation.
/// 2. `MakeGraphFromEL`: `FindMaxNodeID` reads the edge list; `MakeCSR` counts degrees (a new
///    array, reading the edge list), prefix-sums them into offsets, allocates the neighbour array
///    and writes its index (`GenIndex`), then reads the edge list again and writes every id into
///    the neighbour array; its degrees and offsets are freed when it returns.
/// 3. The end of `MakeGraph`'s scope frees the edge list.
/// 4. `SquishCSR` sorts each neighbour list in place (read and write), writes `diffs`, their
///    prefix sum `sq_offsets`, the new index, and copies each list into the new neighbour array;
///    its `diffs` and `sq_offsets` are freed when it returns, the old CSR when `MakeGraph` does.
fn builder(l: Layout) -> Vec<Phase> {
    let pages = |bytes: u64| bytes.div_ceil(PAGE);
    let touch =
        |base: u64, bytes: u64| Phase::Sweep(Sweep::pages(pages(bytes), THREADS, vec![Step::write(base, 1)]));
    let read =
        |base: u64, bytes: u64| Phase::Sweep(Sweep::pages(pages(bytes), THREADS, vec![Step::read(base, 1)]));
    let read_write = |from: u64, to: u64, bytes: u64| {
        Phase::Sweep(Sweep::pages(pages(bytes), THREADS, vec![Step::read(from, 1), Step::write(to, 1)]))
    };
    let (edges, neighbours) = (l.edge_bytes, l.neighbour_bytes);
    vec![
        // 1. The edge list and its id permutation.
        events(ObjectEvent::alloc, &[(l.edges, edges, site::EDGES)]),
        touch(l.edges, edges),
        events(ObjectEvent::alloc, &[(l.old_index, l.id_bytes, site::PERMUTATION)]),
        touch(l.old_index, l.id_bytes),
        read_write(l.edges, l.edges, edges),
        events(ObjectEvent::free, &[(l.old_index, l.id_bytes, site::PERMUTATION)]),
        // 2. The CSR.
        read(l.edges, edges),
        events(ObjectEvent::alloc, &[(l.scratch, l.id_bytes, site::DEGREES)]),
        touch(l.scratch, l.id_bytes),
        read(l.edges, edges),
        events(ObjectEvent::alloc, &[(l.scratch_offsets, l.offset_bytes, site::OFFSETS)]),
        touch(l.scratch_offsets, l.offset_bytes),
        events(
            ObjectEvent::alloc,
            &[(l.old_neighbours, neighbours, site::NEIGHBOURS), (l.old_index, l.offset_bytes, site::INDEX)],
        ),
        touch(l.old_index, l.offset_bytes),
        read_write(l.edges, l.old_neighbours, edges.min(neighbours)),
        events(
            ObjectEvent::free,
            &[(l.scratch, l.id_bytes, site::DEGREES), (l.scratch_offsets, l.offset_bytes, site::OFFSETS)],
        ),
        // 3. The edge list's scope ends.
        events(ObjectEvent::free, &[(l.edges, edges, site::EDGES)]),
        // 4. The squished copy.
        read_write(l.old_neighbours, l.old_neighbours, neighbours),
        events(ObjectEvent::alloc, &[(l.scratch, l.id_bytes, site::DIFFS)]),
        touch(l.scratch, l.id_bytes),
        events(ObjectEvent::alloc, &[(l.scratch_offsets, l.offset_bytes, site::SQ_OFFSETS)]),
        touch(l.scratch_offsets, l.offset_bytes),
        events(
            ObjectEvent::alloc,
            &[(l.neighbours, neighbours, site::SQ_NEIGHBOURS), (l.offsets, l.offset_bytes, site::SQ_INDEX)],
        ),
        touch(l.offsets, l.offset_bytes),
        read_write(l.old_neighbours, l.neighbours, neighbours),
        events(
            ObjectEvent::free,
            &[(l.scratch, l.id_bytes, site::DIFFS), (l.scratch_offsets, l.offset_bytes, site::SQ_OFFSETS)],
        ),
        events(
            ObjectEvent::free,
            &[(l.old_index, l.offset_bytes, site::INDEX), (l.old_neighbours, neighbours, site::NEIGHBOURS)],
        ),
    ]
}

/// A sweep over queue slots `[first, end)` (4 bytes each), one access per line: GAP's
/// conversions between the queue and the frontier bitmap (the bitmap itself, n bits, stays in
/// the cache).
fn queue_sweep(l: Layout, first: u64, end: u64, write: bool) -> Phase {
    let id = u64::from(ID);
    let (a, b) = (first * id / LINE, (end * id).div_ceil(LINE));
    let base = l.queue + a * LINE;
    let step = if write { Step::write(base, INSTRUCTIONS) } else { Step::read(base, INSTRUCTIONS) };
    Phase::Sweep(Sweep::new((b - a).max(1), THREADS, vec![step], 1, true))
}

/// Runs GAP's `DOBFS` from `source` on the implicit graph, deciding each step's direction by
/// GAP's rules, and appends one phase per step (and per queue/bitmap conversion).
fn dobfs(graph: &Arc<Graph>, source: u64, phases: &mut Vec<Phase>) {
    let g = graph.as_ref();
    let n = g.layout.n;
    let mut level = vec![UNVISITED; n as usize];
    let mut order: Vec<u32> = Vec::with_capacity(n as usize);
    level[source as usize] = 0;
    order.push(source as u32);
    // Each step as planned: (top-down?, level of the frontier or UNVISITED for a conversion,
    // queue slots: the frontier's (top-down, conversions) or the step's finds (bottom-up)).
    let mut steps: Vec<(bool, u16, std::ops::Range<usize>)> = Vec::new();
    let mut edges_to_check = g.edges();
    let mut scout = g.degree(source);
    let mut frontier = 0..1usize;
    let mut k: u16 = 0;
    while !frontier.is_empty() && k < UNVISITED - 1 {
        if scout > edges_to_check / ALPHA {
            let mut awake = frontier.len() as u64;
            steps.push((false, UNVISITED, frontier.clone())); // queue -> bitmap
            loop {
                let old = awake;
                let first = order.len();
                for u in 0..n as usize {
                    if level[u] <= k {
                        continue;
                    }
                    if g.edges_of(u as u64).any(|e| level[g.neighbour(e) as usize] == k) {
                        level[u] = k + 1;
                        order.push(u as u32);
                    }
                }
                steps.push((false, k, first..order.len()));
                frontier = first..order.len();
                awake = frontier.len() as u64;
                k += 1;
                if !((awake >= old || awake > n / BETA) && awake > 0) || k == UNVISITED - 1 {
                    break;
                }
            }
            steps.push((true, UNVISITED, frontier.clone())); // bitmap -> queue
            scout = 1;
        } else {
            edges_to_check = edges_to_check.saturating_sub(scout);
            let first = order.len();
            scout = 0;
            for i in frontier.clone() {
                for e in g.edges_of(u64::from(order[i])) {
                    let v = g.neighbour(e);
                    if level[v as usize] == UNVISITED {
                        level[v as usize] = k + 1;
                        order.push(v as u32);
                        scout += g.degree(v);
                    }
                }
            }
            steps.push((true, k, frontier.clone()));
            frontier = first..order.len();
            k += 1;
        }
    }
    let bfs = Arc::new(Levels { level, order });
    let l = g.layout;
    for (top_down, k, slots) in steps {
        if k == UNVISITED {
            // A conversion: top_down marks bitmap -> queue (writes), else queue -> bitmap (reads).
            if !slots.is_empty() {
                phases.push(queue_sweep(l, slots.start as u64, slots.end as u64, top_down));
            }
        } else {
            let plan = || PlannedStep {
                graph: graph.clone(),
                bfs: bfs.clone(),
                top_down,
                level: k,
                slots: slots.clone(),
                accesses: 0,
            };
            // The step's length: its accesses, thread by thread (the total does not depend on
            // how the threads interleave), then the step itself.
            let mut count = plan().start();
            let accesses: u64 =
                (0..THREADS as usize).map(|t| std::iter::from_fn(|| count.advance(t)).count() as u64).sum();
            if accesses > 0 {
                phases.push(Phase::Custom(Box::new(PlannedStep { accesses, ..plan() }.start())));
            }
        }
    }
}

/// The graph, not stored: vertex `u`'s list is edges `start[u]..start[u + 1]`, with degrees
/// uniform in 1..63 (mean 32), and edge `e`'s neighbour is an R-MAT id drawn from a hash of `e`.
struct Graph {
    layout: Layout,
    rmat: Vec<u8>,
    /// The id permutation: two odd multipliers and a xor, each a bijection on `bits` bits.
    mix: [u64; 3],
    salt: u64,
    start: Vec<u64>,
}

impl Graph {
    fn new(layout: Layout, rng: &mut Rng) -> Self {
        let mix = [rng.next_u64() | 1, rng.next_u64() | 1, rng.next_u64()];
        let salt = rng.next_u64();
        let mut start = Vec::with_capacity(layout.n as usize + 1);
        let mut e = 0;
        start.push(0);
        for u in 0..layout.n {
            e += 1 + hash(u ^ salt.rotate_left(17)) % (2 * MEAN_DEGREE - 1);
            start.push(e);
        }
        Graph { layout, rmat: rmat_byte_table(), mix, salt, start }
    }

    fn edges(&self) -> u64 {
        self.start[self.layout.n as usize]
    }

    fn degree(&self, u: u64) -> u64 {
        self.start[u as usize + 1] - self.start[u as usize]
    }

    fn edges_of(&self, u: u64) -> std::ops::Range<u64> {
        self.start[u as usize]..self.start[u as usize + 1]
    }

    #[inline(always)]
    fn neighbour(&self, e: u64) -> u64 {
        neighbour(hash(e ^ self.salt), &self.rmat, &self.mix, self.layout)
    }

    /// Where edge `e`'s id is stored: the neighbour array holds `MEAN_DEGREE` ids a vertex, and
    /// the few edges past its end (degrees are random) wrap to its start.
    #[inline(always)]
    fn edge_addr(&self, e: u64) -> u64 {
        self.layout.neighbours + u64::from(ID) * (e % (MEAN_DEGREE * self.layout.n))
    }
}

/// SplitMix64's finaliser: a bijective hash of 64 bits.
#[inline(always)]
fn hash(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One BFS's outcome: each vertex's level and the queue (vertices in the order found).
struct Levels {
    level: Vec<u16>,
    order: Vec<u32>,
}

/// One step as planned, before its threads' cursors are laid out.
struct PlannedStep {
    graph: Arc<Graph>,
    bfs: Arc<Levels>,
    top_down: bool,
    /// The frontier's level.
    level: u16,
    /// Top-down: the frontier's queue slots. Bottom-up: the slots its finds go to.
    slots: std::ops::Range<usize>,
    accesses: u64,
}

impl PlannedStep {
    fn start(self) -> BfsStep {
        let t = u64::from(THREADS);
        // OpenMP's static schedule: thread i takes the i-th contiguous share of the loop.
        let (items, base) = if self.top_down {
            (self.slots.len() as u64, self.slots.start as u64)
        } else {
            (self.graph.layout.n, 0)
        };
        let cursors = (0..t)
            .map(|i| {
                let (a, b) = (base + i * items / t, base + (i + 1) * items / t);
                BfsCursor {
                    i: a,
                    end: b,
                    state: BfsState::Item,
                    u: 0,
                    e: 0,
                    e_end: 0,
                    v: 0,
                    last: [NO_LINE; 4],
                }
            })
            .collect();
        let n = self.graph.layout.n as usize;
        BfsStep {
            claimed: if self.top_down { vec![0; n.div_ceil(64)] } else { Vec::new() },
            append: self.slots.end as u64,
            step: self,
            cursors,
            next_thread: 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BfsState {
    /// Top-down: read the frontier vertex from the queue. Bottom-up: read the vertex's parent.
    Item,
    Offset,
    Neighbour,
    /// Top-down: read the neighbour's parent.
    Parent,
    /// Write a parent: the neighbour's (top-down) or the vertex's own (bottom-up).
    Visit,
    /// Top-down: append the newly visited neighbour to the queue.
    Append,
    Done,
}

#[derive(Clone, Copy, Debug)]
struct BfsCursor {
    /// Queue slot (top-down) or vertex (bottom-up) being worked on, and the end of the share.
    i: u64,
    end: u64,
    state: BfsState,
    u: u64,
    e: u64,
    e_end: u64,
    v: u64,
    /// The line this thread last touched in each sequential stream: the queue (top-down) or the
    /// parent array in vertex order (bottom-up), the offsets, the neighbour lists, and the
    /// parent line it last dirtied (bottom-up). An access to the same line again hits in the
    /// cache and reaches memory only once (docs/model.md §1: streams are LLC misses).
    last: [u64; 4],
}

const NO_LINE: u64 = u64::MAX;
const SEQ: usize = 0;
const OFFSETS: usize = 1;
const NEIGHBOURS: usize = 2;
const DIRTIED: usize = 3;

/// One BFS step's accesses; threads take turns one access at a time, a thread that has finished
/// its share drops out (the step ends at a barrier, as in OpenMP).
pub(crate) struct BfsStep {
    step: PlannedStep,
    /// Top-down: neighbours already claimed in this step (first compare-and-swap wins).
    claimed: Vec<u64>,
    /// The next queue slot an append fills.
    append: u64,
    cursors: Vec<BfsCursor>,
    next_thread: usize,
}

impl BfsStep {
    /// The next access of thread `t`; `None` once its share is done.
    #[inline(always)]
    fn advance(&mut self, t: usize) -> Option<Access> {
        let BfsStep { step, claimed, append, cursors, .. } = self;
        let (g, l, lv) = (step.graph.as_ref(), step.graph.layout, &step.bfs.level);
        let k = step.level;
        let c = &mut cursors[t];
        let th = t as u8;
        let id = u64::from(ID);
        // Emits `addr` unless it is in the line last touched in stream `s`.
        let new_line = |c: &mut BfsCursor, s: usize, addr: u64| {
            let line = addr / LINE;
            let new = c.last[s] != line;
            c.last[s] = line;
            new
        };
        loop {
            let (addr, size, write, emit) = match c.state {
                BfsState::Item if c.i >= c.end => {
                    c.state = BfsState::Done;
                    return None;
                }
                BfsState::Done => return None,
                BfsState::Item if step.top_down => {
                    c.u = u64::from(step.bfs.order[c.i as usize]);
                    c.state = BfsState::Offset;
                    let addr = l.queue + id * c.i;
                    (addr, ID, false, new_line(c, SEQ, addr))
                }
                BfsState::Item => {
                    c.u = c.i;
                    c.state = if lv[c.u as usize] > k {
                        BfsState::Offset
                    } else {
                        c.i += 1;
                        BfsState::Item
                    };
                    let addr = l.parent + id * c.u;
                    (addr, ID, false, new_line(c, SEQ, addr))
                }
                BfsState::Offset => {
                    (c.e, c.e_end) = (g.start[c.u as usize], g.start[c.u as usize + 1]);
                    c.state = BfsState::Neighbour;
                    let addr = l.offsets + u64::from(OFFSET) * c.u;
                    (addr, OFFSET, false, new_line(c, OFFSETS, addr))
                }
                BfsState::Neighbour => {
                    let e = c.e;
                    c.v = g.neighbour(e);
                    c.e += 1;
                    c.state = if step.top_down {
                        BfsState::Parent
                    } else if lv[c.v as usize] == k {
                        BfsState::Visit
                    } else {
                        next_edge(c)
                    };
                    let addr = g.edge_addr(e);
                    (addr, ID, false, new_line(c, NEIGHBOURS, addr))
                }
                BfsState::Parent => {
                    // A random read: a miss.
                    let v = c.v as usize;
                    let mine = lv[v] == k + 1 && claimed[v / 64] & (1 << (v % 64)) == 0;
                    if mine {
                        claimed[v / 64] |= 1 << (v % 64);
                        c.state = BfsState::Visit;
                    } else {
                        c.state = next_edge(c);
                    }
                    (l.parent + id * c.v, ID, false, true)
                }
                BfsState::Visit if step.top_down => {
                    // The compare-and-swap on the line just read: a write-back of that line.
                    c.state = BfsState::Append;
                    (l.parent + id * c.v, ID, true, true)
                }
                BfsState::Visit => {
                    // The vertex's own parent, in a line this thread read in vertex order: one
                    // write-back per line it dirties.
                    c.i += 1;
                    c.state = BfsState::Item;
                    let addr = l.parent + id * c.u;
                    (addr, ID, true, new_line(c, DIRTIED, addr))
                }
                BfsState::Append => {
                    // GAP's QueueBuffer flushes appends in blocks: one write per queue line.
                    let slot = *append;
                    *append += 1;
                    c.state = next_edge(c);
                    (l.queue + id * (slot % l.n), ID, true, slot % (LINE / id) == 0)
                }
            };
            if emit {
                return Some(if write {
                    Access::write(addr, size, th, INSTRUCTIONS)
                } else {
                    Access::read(addr, size, th, INSTRUCTIONS)
                });
            }
        }
    }
}

/// After an edge: the next one, or the next item when the list is done.
fn next_edge(c: &mut BfsCursor) -> BfsState {
    if c.e < c.e_end {
        BfsState::Neighbour
    } else {
        c.i += 1;
        BfsState::Item
    }
}

/// Where the builder's and the run's arrays lie for `n` vertices, each page-aligned. The address
/// space is the builder's peak, `SquishCSR`'s: the old CSR, the squished one, `diffs` and
/// `sq_offsets`. An array allocated after another is freed reuses its addresses, as a new mapping
/// would take the physical pages the freed one gave back:
/// `[edge list, later the squished neighbour ids | old index (first the id permutation) | old
/// neighbour ids | degrees, later diffs, later parent | offsets, later sq_offsets, later queue |
/// squished index]`.
#[derive(Clone, Copy, Debug)]
struct Layout {
    n: u64,
    /// `n` ids rounded up to a power of two, as R-MAT draws them.
    bits: u32,
    /// Bytes of an array of `n` ids, of `n` offsets, of the edge list, of the neighbour ids.
    id_bytes: u64,
    offset_bytes: u64,
    edge_bytes: u64,
    neighbour_bytes: u64,
    edges: u64,
    old_index: u64,
    old_neighbours: u64,
    scratch: u64,
    scratch_offsets: u64,
    /// The run's arrays: the squished CSR, parent and queue.
    offsets: u64,
    neighbours: u64,
    parent: u64,
    queue: u64,
    end: u64,
}

impl Layout {
    fn new(n: u64) -> Self {
        let page = |bytes: u64| bytes.div_ceil(PAGE) * PAGE;
        let id_bytes = page(n * u64::from(ID));
        let offset_bytes = page(n * u64::from(OFFSET));
        let edge_bytes = page(n * MEAN_DEGREE / 2 * EDGE_BYTES);
        let neighbour_bytes = page(n * MEAN_DEGREE * u64::from(ID));
        let edges = 0;
        let old_index = edge_bytes.max(neighbour_bytes);
        let old_neighbours = old_index + offset_bytes;
        let scratch = old_neighbours + neighbour_bytes;
        let scratch_offsets = scratch + id_bytes;
        let offsets = scratch_offsets + offset_bytes;
        Layout {
            n,
            bits: n.next_power_of_two().trailing_zeros(),
            id_bytes,
            offset_bytes,
            edge_bytes,
            neighbour_bytes,
            edges,
            old_index,
            old_neighbours,
            scratch,
            scratch_offsets,
            offsets,
            neighbours: edges,
            parent: scratch,
            queue: scratch + id_bytes,
            end: offsets + offset_bytes,
        }
    }
}

/// Random bits per table lookup: 4 lookups (32 id bits) take 48 bits of an edge's hash.
const TABLE_BITS: u32 = 12;

/// For each 12-bit uniform value, 8 id bits each 1 with probability 1 - a - c: inverse-CDF
/// sampling of R-MAT's per-level choice, 8 levels per lookup (each outcome's probability is
/// rounded to 1/4096).
fn rmat_byte_table() -> Vec<u8> {
    let one = 1.0 - RMAT_A - RMAT_C;
    let size = 1usize << TABLE_BITS;
    let mut table = Vec::with_capacity(size);
    let mut cum = 0.0;
    for v in 0u32..256 {
        let ones = v.count_ones() as i32;
        cum += one.powi(ones) * (1.0 - one).powi(8 - ones);
        let upto = if v == 255 { size } else { (cum * size as f64).round() as usize };
        while table.len() < upto {
            table.push(v as u8);
        }
    }
    table
}

/// A neighbour from one draw's low 48 bits: an R-MAT destination id, permuted by GAP's id
/// shuffle (here two odd multiplies, two xor-shifts and a xor, each a bijection on `bits` bits),
/// then mapped onto the `n` vertices.
#[inline(always)]
fn neighbour(x: u64, rmat: &[u8], mix: &[u64; 3], l: Layout) -> u64 {
    let m = (1 << TABLE_BITS) - 1;
    let id = u64::from(rmat[(x & m) as usize])
        | u64::from(rmat[((x >> TABLE_BITS) & m) as usize]) << 8
        | u64::from(rmat[((x >> (2 * TABLE_BITS)) & m) as usize]) << 16
        | u64::from(rmat[((x >> (3 * TABLE_BITS)) & m) as usize]) << 24;
    let bits = l.bits;
    let mask = (1u64 << bits) - 1;
    let mut y = (id ^ mix[2]) & mask;
    y = y.wrapping_mul(mix[0]) & mask;
    y ^= y >> (bits / 2 + 1);
    y = y.wrapping_mul(mix[1]) & mask;
    y ^= y >> (bits / 3 + 1);
    (y * l.n) >> bits
}

impl PhaseFill for BfsStep {
    fn remaining(&self) -> u64 {
        self.step.accesses
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.step.accesses) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let threads = self.cursors.len();
        for out in &mut buf[start..] {
            // Some thread has an access left, since `accesses` > 0.
            *out = loop {
                let t = self.next_thread;
                self.next_thread = if t + 1 == threads { 0 } else { t + 1 };
                if let Some(a) = self.advance(t) {
                    break a;
                }
            };
        }
        self.step.accesses -= n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AccessSource, ObjectEventAt};
    use terrace_model::AccessKind;
    use terrace_model::ObjectEventKind::{Alloc, Free};

    /// The whole stream of `g`, and its object events by position.
    fn stream(g: &mut Generator) -> (Vec<Access>, Vec<ObjectEventAt>) {
        let (mut all, mut events, mut buf) = (Vec::new(), Vec::new(), Vec::new());
        while {
            buf.clear();
            g.fill(&mut buf, 1 << 16) > 0
        } {
            all.extend_from_slice(&buf);
            g.take_object_events(&mut events);
        }
        g.take_object_events(&mut events);
        (all, events)
    }

    fn builder_accesses(l: Layout) -> u64 {
        builder(l).iter().map(Phase::remaining).sum()
    }

    #[test]
    fn sizes_follow_ambix_with_32_bit_ids() {
        for (size, log2) in [(Size::Small, 17), (Size::Medium, 18), (Size::Large, 19)] {
            let g = build("bfs", size, None, 1, 1.0).unwrap();
            let n = 1u64 << log2;
            // The builder's peak: the old CSR and its squished copy (8 + 128 each), diffs and
            // sq_offsets (4 + 8); 35.5, 71 and 142 MiB.
            assert_eq!(g.info().footprint_bytes, 284 * n);
            assert_eq!(g.info().suggested_fast_bytes, 27 << 20);
            let l = Layout::new(n);
            assert_eq!(l.n, n);
            // The running BFS: offsets 8, 32 neighbour ids x 4, parent 4, queue 4.
            assert_eq!(l.offset_bytes + l.neighbour_bytes + 2 * l.id_bytes, 144 * n);
            // The edge list beside the CSR built from it: 16 edges x 8 + 8 + 32 x 4 = 264.
            assert_eq!(l.edge_bytes + l.offset_bytes + l.neighbour_bytes, 264 * n);
        }
    }

    #[test]
    fn the_builder_frees_the_edge_list_and_old_csr_before_the_trials_and_each_trial_its_arrays() {
        let mut g = build("bfs", Size::Medium, None, 3, 1.0 / 16.0).unwrap();
        let info = g.info().clone();
        let l = Layout::new(info.footprint_bytes / PEAK_BYTES);
        let (accesses, events) = stream(&mut g);
        assert_eq!(accesses.len() as u64, info.accesses);
        let built = builder_accesses(l);
        let freed_at = |addr: u64, site: u64| {
            let e =
                events.iter().find(|e| e.event.kind == Free && e.event.addr == addr && e.event.site == site);
            e.unwrap_or_else(|| panic!("no free of site {site}")).at
        };
        // The edge list is freed before the squished copy is written, everything the builder
        // made but the squished CSR by its end.
        let edges_freed = freed_at(l.edges, site::EDGES);
        let first_squished_write = (built as usize - 2 * (l.neighbour_bytes / PAGE) as usize..built as usize)
            .find(|&i| accesses[i].kind == AccessKind::Write)
            .unwrap() as u64;
        assert!(edges_freed < first_squished_write, "{edges_freed} {first_squished_write}");
        for (addr, s) in
            [(l.old_neighbours, site::NEIGHBOURS), (l.old_index, site::INDEX), (l.scratch, site::DIFFS)]
        {
            assert!(freed_at(addr, s) <= built, "site {s}");
        }
        // Live bytes peak at the layout's size, in SquishCSR; the squished CSR stays.
        let (mut live, mut peak) = (0i64, 0i64);
        for e in &events {
            let b = e.event.bytes as i64;
            live += if e.event.kind == Alloc { b } else { -b };
            peak = peak.max(live);
        }
        assert_eq!(peak as u64, l.end);
        assert_eq!(live as u64, l.offset_bytes + l.neighbour_bytes);
        // Every trial allocates parent and queue and frees them.
        let parent_allocs =
            events.iter().filter(|e| e.event.site == site::PARENT && e.event.kind == Alloc).count();
        let parent_frees =
            events.iter().filter(|e| e.event.site == site::PARENT && e.event.kind == Free).count();
        assert_eq!((parent_allocs, parent_frees), (ITERATIONS as usize, ITERATIONS as usize));
        // No trial touches the freed arrays; the builder never reaches past the layout.
        for a in &accesses[built as usize..] {
            assert!(
                a.addr < l.old_index || a.addr >= l.scratch,
                "trial access to a freed array at {}",
                a.addr
            );
        }
        assert!(accesses.iter().all(|a| a.addr < l.end));
    }

    #[test]
    fn first_touch_after_the_builder_leaves_parent_queue_and_offsets_in_the_fast_tier() {
        // First touch with frees, page by page, with the seed's DRAM scaled alike: which of the
        // run's arrays are in the fast tier when the first trial starts.
        for (size, neighbours_fast) in
            [(Size::Small, 0.9..1.0), (Size::Medium, 0.6..0.75), (Size::Large, 0.2..0.3)]
        {
            let mut g = build("bfs", size, None, 1, 1.0 / 16.0).unwrap();
            let info = g.info().clone();
            let l = Layout::new(info.footprint_bytes / PEAK_BYTES);
            let (accesses, events) = stream(&mut g);
            let pages = (l.end / PAGE) as usize;
            let (mut live, mut fast, mut placed) =
                (vec![0u32; pages], vec![false; pages], vec![false; pages]);
            let (capacity, mut used) = (info.suggested_fast_bytes / PAGE, 0u64);
            let mut next_event = 0;
            let end = builder_accesses(l) as usize + 1;
            for (i, a) in accesses[..end].iter().enumerate() {
                while next_event < events.len() && events[next_event].at <= i as u64 {
                    let e = events[next_event].event;
                    for p in e.pages(PAGE) {
                        let p = p as usize;
                        if e.kind == Alloc {
                            live[p] += 1;
                        } else {
                            live[p] -= 1;
                            if live[p] == 0 && placed[p] {
                                used -= u64::from(fast[p]);
                                (placed[p], fast[p]) = (false, false);
                            }
                        }
                    }
                    next_event += 1;
                }
                let p = (a.addr / PAGE) as usize;
                if !placed[p] {
                    placed[p] = true;
                    fast[p] = used < capacity;
                    used += u64::from(fast[p]);
                }
            }
            // The first trial's parent and queue are touched in it: the room they find.
            let room = capacity - used;
            let share = |base: u64, bytes: u64| {
                let r = (base / PAGE) as usize..((base + bytes) / PAGE) as usize;
                fast[r.clone()].iter().filter(|&&f| f).count() as f64 / r.len() as f64
            };
            assert!(room >= 2 * l.id_bytes / PAGE, "{size:?}: {room} pages free");
            assert_eq!(share(l.offsets, l.offset_bytes), 1.0, "{size:?}");
            let got = share(l.neighbours, l.neighbour_bytes);
            assert!(neighbours_fast.contains(&got), "{size:?}: {got}");
        }
    }

    #[test]
    fn a_real_bfs_writes_each_parent_once_and_never_the_graph_with_4_byte_ids() {
        let mut g = build("bfs", Size::Small, None, 5, 1.0 / 16.0).unwrap();
        let info = g.info().clone();
        let l = Layout::new(info.footprint_bytes / PEAK_BYTES);
        let init = builder_accesses(l);
        let (mut seen, mut reads, mut writes) = (0u64, 0u64, 0u64);
        // Accesses to the offsets, neighbour ids, parent and queue.
        let mut per_array = [0u64; 4];
        let array = |addr: u64| {
            if addr >= l.offsets {
                0
            } else if addr < l.neighbours + l.neighbour_bytes {
                1
            } else if (l.parent..l.parent + l.id_bytes).contains(&addr) {
                2
            } else {
                assert!((l.queue..l.queue + l.id_bytes).contains(&addr), "{addr} in no array of the run");
                3
            }
        };
        let mut parent_writes = vec![0u8; l.n as usize];
        let (mut visited, mut bfs_runs) = (Vec::new(), 0);
        let ids_a_line = (LINE / u64::from(ID)) as usize;
        let mut dirtied = vec![false; l.n.div_ceil(ids_a_line as u64) as usize];
        let (accesses, _) = stream(&mut g);
        for a in &accesses {
            assert!(a.addr + u64::from(a.size) <= info.footprint_bytes);
            seen += 1;
            if seen <= init {
                continue;
            }
            let i = array(a.addr);
            per_array[i] += 1;
            // One id, one offset, or a sweep's line.
            let want = if i == 0 { OFFSET } else { ID };
            assert!(a.size == want || u64::from(a.size) == LINE, "{} bytes at {}", a.size, a.addr);
            assert_eq!(a.addr % u64::from(a.size.min(want)), 0);
            match a.kind {
                AccessKind::Read => reads += 1,
                AccessKind::Write => {
                    writes += 1;
                    // The graph (offsets and neighbour lists) is read-only.
                    assert!(i >= 2, "write to the graph at {}", a.addr);
                    if i == 2 && u64::from(a.size) == LINE && a.addr == l.parent {
                        // InitParent starts a BFS.
                        bfs_runs += 1;
                        visited.push(dirtied.iter().filter(|&&d| d).count() as u64);
                        parent_writes.fill(0);
                        dirtied.fill(false);
                    } else if i == 2 && a.size == ID {
                        let v = ((a.addr - l.parent) / u64::from(ID)) as usize;
                        parent_writes[v] += 1;
                        assert_eq!(parent_writes[v], 1, "vertex {v}'s parent written twice in one BFS");
                        dirtied[v / ids_a_line] = true;
                    }
                }
            }
        }
        assert_eq!(seen, info.accesses);
        assert_eq!(bfs_runs, ITERATIONS);
        assert!(per_array.iter().all(|&c| c > 0), "{per_array:?}");
        visited.push(dirtied.iter().filter(|&&d| d).count() as u64);
        // Nearly every vertex is reached in each BFS (the graph's giant component): nearly every
        // parent line (16 parents) is written. (The first entry is before the first BFS.)
        let lines = dirtied.len() as u64;
        assert_eq!(visited[0], 0);
        assert!(visited[1..].iter().all(|&v| v > lines * 9 / 10), "{visited:?} of {lines}");
        let ratio = reads as f64 / writes as f64;
        assert!(ratio > 3.0, "{ratio}");
    }

    #[test]
    fn rmat_ids_are_skewed_before_permutation_and_in_range_after() {
        let table = rmat_byte_table();
        assert_eq!(table.len(), 1 << TABLE_BITS);
        let ones: u32 = table.iter().map(|b| b.count_ones()).sum();
        let share = f64::from(ones) / (8.0 * table.len() as f64);
        assert!((share - 0.24).abs() < 0.001, "{share}");
        let g = Graph::new(Layout::new(1000), &mut Rng::new(3));
        let ids: Vec<u64> = (0..10_000).map(|e| g.neighbour(e)).collect();
        assert!(ids.iter().all(|&v| v < 1000));
        // Skewed: some vertices are far more popular than uniform's 10.
        let mut counts = vec![0u32; 1000];
        for v in ids {
            counts[v as usize] += 1;
        }
        assert!(*counts.iter().max().unwrap() > 100);
    }
}
