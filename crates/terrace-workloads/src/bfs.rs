//! GAP BFS over a Kronecker graph, as Ambix evaluates it (Ambix thesis §5.4.2).
//!
//! Seed setup: GAP v1.3 BFS on Kronecker graphs of 2^27, 2^28, 2^29 vertices (35, 70, 140 GB),
//! 50 iterations from random roots, 2 reads per write, 32 threads, ~27 GB usable DRAM.
//! Terrace divides the sizes by 1024: 2^17..2^19 vertices in 35..140 MiB, which is 280 bytes a
//! vertex: GAP's CSR with 8-byte ids and 32 directed edges a vertex (degree 16, symmetrised)
//! = 8 (offset) + 256 (neighbours) + 8 (parent) + 8 (frontier queue).
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

use crate::phases::{append_slots, Generator, Phase, PhaseFill, Step, Sweep, LINE};
use crate::registry::{scaled_bytes, seed_info};
use crate::rng::Rng;
use crate::WorkloadError;
use std::sync::Arc;
use terrace_model::Access;

/// Ambix §5.4: `OMP_NUM_THREADS=32`.
const THREADS: u32 = 32;
/// Ambix §5.2.1: ~27 GB usable DRAM per socket, scaled GB -> MB.
const FAST_BYTES: u64 = 27 << 20;
/// Bytes per vertex: offset, 32 neighbour ids, parent, queue slot, all 8 bytes.
const VERTEX_BYTES: u64 = 280;
/// GAP's default Kronecker degree 16, stored in both directions.
const MEAN_DEGREE: u64 = 32;
/// Graph500's R-MAT quadrant probabilities; a destination id's bits are independently 1 with
/// probability b + d = 1 - a - c.
const RMAT_A: f64 = 0.57;
const RMAT_C: f64 = 0.19;
/// Ambix ran 50 BFS iterations from random roots. One BFS here makes about 34 accesses a page;
/// eight make 270 after initialisation, at least pmbench's 256 a page.
pub(crate) const ITERATIONS: u32 = 8;
/// GAP's `DOBFS` switch parameters: go bottom-up when the frontier's edges exceed the edges left
/// to check / alpha; return top-down when the frontier shrinks below vertices / beta.
const ALPHA: u64 = 15;
const BETA: u64 = 18;
/// A level no vertex has: not visited.
const UNVISITED: u16 = u16::MAX;
/// A visit's bookkeeping between memory accesses (loop, compare, CAS setup).
const INSTRUCTIONS: u32 = 6;
const ID: u16 = 8;

pub(crate) use crate::npb::{Size, SIZES};

/// Ambix §5.4.2: 35, 70, 140 GB for 2^27..2^29 vertices, scaled GB -> MB.
fn seed_bytes(size: Size) -> u64 {
    match size {
        Size::Small => 35 << 20,
        Size::Medium => 70 << 20,
        Size::Large => 140 << 20,
    }
}

fn log2_vertices(size: Size) -> u32 {
    match size {
        Size::Small => 27,
        Size::Medium => 28,
        Size::Large => 29,
    }
}

/// Which arrays are first touched first, so which of them first touch leaves in the fast tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TouchOrder {
    /// The per-BFS arrays (parent, queue), then the graph: GAP allocates parent and queue in each
    /// trial, after its builder has freed the edge list and the unsquished graph it touched first
    /// (`builder.h` `MakeGraph`), so first touch finds fast-tier room for them (docs/workloads.md).
    PerBfsFirst,
    /// The graph first: as if nothing the builder touched had been freed before the trials.
    GraphFirst,
}

pub(crate) fn summary(size: Size, order: TouchOrder) -> String {
    format!(
        "GAP direction-optimising BFS (Ambix §5.4.2), 32 threads, Kronecker graph of 2^{} vertices in {} MiB{}",
        log2_vertices(size) - 10,
        seed_bytes(size) >> 20,
        match order {
            TouchOrder::PerBfsFirst => "",
            TouchOrder::GraphFirst => ", the graph first-touched before parent and queue",
        }
    )
}

pub(crate) fn build(
    name: &str,
    size: Size,
    order: TouchOrder,
    seed: u64,
    size_scale: f64,
) -> Result<Generator, WorkloadError> {
    let footprint = scaled_bytes(name, seed_bytes(size), size_scale, THREADS)?;
    let n = footprint / VERTEX_BYTES;
    let mut rng = Rng::new(seed);
    let graph = Arc::new(Graph::new(Layout::new(n), &mut rng));
    let l = graph.layout;
    // First touch in `order` ([`TouchOrder`]).
    let per_bfs = Sweep::new(
        (footprint - l.parent) / LINE,
        THREADS,
        vec![Step::write(l.parent, INSTRUCTIONS)],
        1,
        true,
    );
    let graph_init = Sweep::new(l.parent / LINE, THREADS, vec![Step::write(0, INSTRUCTIONS)], 1, true);
    let mut phases = match order {
        TouchOrder::PerBfsFirst => vec![Phase::Sweep(per_bfs), Phase::Sweep(graph_init)],
        TouchOrder::GraphFirst => vec![Phase::Sweep(graph_init), Phase::Sweep(per_bfs)],
    };
    let parent_lines = (n * 8).div_ceil(LINE);
    for _ in 0..ITERATIONS {
        // GAP's InitParent: parent[v] = -degree(v), from the offsets, in a parallel loop.
        let reset = vec![Step::read(l.offsets, INSTRUCTIONS), Step::write(l.parent, INSTRUCTIONS)];
        phases.push(Phase::Sweep(Sweep::new(parent_lines, THREADS, reset, 1, true)));
        let source = rng.below(n);
        dobfs(&graph, source, &mut phases);
        // The closing loop reads every parent (its writes, to unreached vertices, are left out).
        let close = vec![Step::read(l.parent, INSTRUCTIONS)];
        phases.push(Phase::Sweep(Sweep::new(parent_lines, THREADS, close, 1, true)));
    }
    let info = seed_info(
        name,
        format!(
            "GAP BFS (Ambix §5.4.2): {THREADS} threads, {ITERATIONS} direction-optimising BFS over a \
             Kronecker graph of {n} vertices"
        ),
        footprint,
        THREADS,
        FAST_BYTES,
        size_scale,
    );
    Ok(Generator::new(info, phases))
}

/// A sweep over queue slots `[first, end)` (8 bytes each), one access per line: GAP's
/// conversions between the queue and the frontier bitmap (the bitmap itself, n bits, stays in
/// the cache).
fn queue_sweep(l: Layout, first: u64, end: u64, write: bool) -> Phase {
    let (a, b) = (first * 8 / LINE, (end * 8).div_ceil(LINE));
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
        self.layout.neighbours + 8 * (e % (MEAN_DEGREE * self.layout.n))
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
        // Emits `addr` unless it is in the line last touched in stream `s`.
        let new_line = |c: &mut BfsCursor, s: usize, addr: u64| {
            let line = addr / LINE;
            let new = c.last[s] != line;
            c.last[s] = line;
            new
        };
        loop {
            let (addr, write, emit) = match c.state {
                BfsState::Item if c.i >= c.end => {
                    c.state = BfsState::Done;
                    return None;
                }
                BfsState::Done => return None,
                BfsState::Item if step.top_down => {
                    c.u = u64::from(step.bfs.order[c.i as usize]);
                    c.state = BfsState::Offset;
                    let addr = l.queue + 8 * c.i;
                    (addr, false, new_line(c, SEQ, addr))
                }
                BfsState::Item => {
                    c.u = c.i;
                    c.state = if lv[c.u as usize] > k {
                        BfsState::Offset
                    } else {
                        c.i += 1;
                        BfsState::Item
                    };
                    let addr = l.parent + 8 * c.u;
                    (addr, false, new_line(c, SEQ, addr))
                }
                BfsState::Offset => {
                    (c.e, c.e_end) = (g.start[c.u as usize], g.start[c.u as usize + 1]);
                    c.state = BfsState::Neighbour;
                    let addr = l.offsets + 8 * c.u;
                    (addr, false, new_line(c, OFFSETS, addr))
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
                    (addr, false, new_line(c, NEIGHBOURS, addr))
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
                    (l.parent + 8 * c.v, false, true)
                }
                BfsState::Visit if step.top_down => {
                    // The compare-and-swap on the line just read: a write-back of that line.
                    c.state = BfsState::Append;
                    (l.parent + 8 * c.v, true, true)
                }
                BfsState::Visit => {
                    // The vertex's own parent, in a line this thread read in vertex order: one
                    // write-back per line it dirties.
                    c.i += 1;
                    c.state = BfsState::Item;
                    let addr = l.parent + 8 * c.u;
                    (addr, true, new_line(c, DIRTIED, addr))
                }
                BfsState::Append => {
                    // GAP's QueueBuffer flushes appends in blocks: one write per queue line.
                    let slot = *append;
                    *append += 1;
                    c.state = next_edge(c);
                    (l.queue + 8 * (slot % l.n), true, slot % (LINE / 8) == 0)
                }
            };
            if emit {
                return Some(if write {
                    Access::write(addr, ID, th, INSTRUCTIONS)
                } else {
                    Access::read(addr, ID, th, INSTRUCTIONS)
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

/// Byte offsets of the CSR arrays for `n` vertices.
#[derive(Clone, Copy, Debug)]
struct Layout {
    n: u64,
    /// `n` ids rounded up to a power of two, as R-MAT draws them.
    bits: u32,
    offsets: u64,
    neighbours: u64,
    parent: u64,
    queue: u64,
}

impl Layout {
    fn new(n: u64) -> Self {
        let offsets = 0;
        let neighbours = offsets + 8 * n;
        let parent = neighbours + 8 * MEAN_DEGREE * n;
        let queue = parent + 8 * n;
        Layout { n, bits: n.next_power_of_two().trailing_zeros(), offsets, neighbours, parent, queue }
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
    use crate::AccessSource;
    use terrace_model::AccessKind;

    #[test]
    fn sizes_follow_ambix() {
        for (size, log2) in [(Size::Small, 17), (Size::Medium, 18), (Size::Large, 19)] {
            let g = build("bfs", size, TouchOrder::PerBfsFirst, 1, 1.0).unwrap();
            assert_eq!(g.info().footprint_bytes / VERTEX_BYTES, 1 << log2);
            assert_eq!(g.info().suggested_fast_bytes, 27 << 20);
        }
    }

    #[test]
    fn a_real_bfs_writes_each_parent_once_and_never_the_graph() {
        let mut g = build("bfs", Size::Small, TouchOrder::PerBfsFirst, 5, 1.0 / 16.0).unwrap();
        let info = g.info().clone();
        let l = Layout::new(info.footprint_bytes / VERTEX_BYTES);
        let init = info.footprint_bytes / LINE;
        let (mut seen, mut reads, mut writes) = (0u64, 0u64, 0u64);
        let mut per_array = [0u64; 4];
        let mut parent_writes = vec![0u8; l.n as usize];
        let (mut visited, mut bfs_runs) = (Vec::new(), 0);
        let mut dirtied = vec![false; (l.n / 8) as usize];
        let mut buf = Vec::new();
        while {
            buf.clear();
            g.fill(&mut buf, 1 << 16) > 0
        } {
            for a in &buf {
                assert!(a.addr + u64::from(a.size) <= info.footprint_bytes);
                seen += 1;
                if seen <= init {
                    continue;
                }
                let i = [l.neighbours, l.parent, l.queue].iter().filter(|&&b| a.addr >= b).count();
                per_array[i] += 1;
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
                        } else if i == 2 && u64::from(a.size) == u64::from(ID) {
                            let v = ((a.addr - l.parent) / 8) as usize;
                            parent_writes[v] += 1;
                            assert_eq!(parent_writes[v], 1, "vertex {v}'s parent written twice in one BFS");
                            dirtied[v / 8] = true;
                        }
                    }
                }
            }
        }
        assert_eq!(seen, info.accesses);
        assert_eq!(bfs_runs, ITERATIONS);
        assert!(per_array.iter().all(|&c| c > 0), "{per_array:?}");
        visited.push(dirtied.iter().filter(|&&d| d).count() as u64);
        // Nearly every vertex is reached in each BFS (the graph's giant component): nearly every
        // parent line is written. (The first entry is before the first BFS.)
        assert_eq!(visited[0], 0);
        assert!(visited[1..].iter().all(|&v| v > l.n / 8 * 9 / 10), "{visited:?} of {}", l.n / 8);
        let ratio = reads as f64 / writes as f64;
        assert!(ratio > 3.0, "{ratio}");
    }

    #[test]
    fn the_arrays_are_first_touched_in_the_order_asked_for() {
        for order in [TouchOrder::PerBfsFirst, TouchOrder::GraphFirst] {
            let mut g = build("bfs", Size::Medium, order, 2, 1.0 / 16.0).unwrap();
            let info = g.info().clone();
            let l = Layout::new(info.footprint_bytes / VERTEX_BYTES);
            let (per_bfs, graph) = ((info.footprint_bytes - l.parent) / LINE, l.parent / LINE);
            let mut buf = Vec::new();
            g.fill(&mut buf, (info.footprint_bytes / LINE) as usize);
            let per_bfs_first = order == TouchOrder::PerBfsFirst;
            let (first, rest) = buf.split_at(if per_bfs_first { per_bfs } else { graph } as usize);
            // Every first touch is a write; those of the per-BFS arrays lie from `l.parent` on.
            let in_per_bfs = |a: &Access| {
                assert_eq!(a.kind, AccessKind::Write);
                a.addr >= l.parent
            };
            assert!(first.iter().all(|a| in_per_bfs(a) == per_bfs_first), "{order:?}");
            assert!(rest.iter().all(|a| in_per_bfs(a) != per_bfs_first), "{order:?}");
        }
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
