//! GAP BFS over a Kronecker graph, as Ambix evaluates it (notes ambix.md §4).
//!
//! Seed setup: GAP v1.3 BFS on Kronecker graphs of 2^27, 2^28, 2^29 vertices (35, 70, 140 GB),
//! 50 iterations from random roots, 2 reads per write, 32 threads, ~27 GB usable DRAM.
//! Terrace divides the sizes by 1024: 2^17..2^19 vertices in 35..140 MiB, which is 280 bytes a
//! vertex: GAP's CSR with 8-byte ids and 32 directed edges a vertex (degree 16, symmetrised)
//! = 8 (offset) + 256 (neighbours) + 8 (parent) + 8 (frontier queue).
//!
//! The graph is not built: the generator emits a top-down BFS's accesses, which need only the
//! vertices. A frontier vertex is read from the queue, its offset and then its neighbour list
//! read in order, and each neighbour's parent read; a neighbour found unvisited has its parent
//! written and is appended to the queue. Neighbours are R-MAT draws (a=0.57, b=0.19, c=0.19),
//! whose ids GAP permutes, so hubs are scattered over the arrays.

use crate::phases::{append_slots, Generator, Phase, PhaseFill, Step, Sweep, LINE};
use crate::registry::{scaled_bytes, seed_info};
use crate::rng::Rng;
use crate::WorkloadError;
use terrace_model::Access;

/// Ambix §4: `OMP_NUM_THREADS=32`.
const THREADS: u32 = 32;
/// Ambix §4: ~27 GB usable DRAM per socket, scaled GB -> MB.
const FAST_BYTES: u64 = 27 << 20;
/// Bytes per vertex: offset, 32 neighbour ids, parent, queue slot, all 8 bytes.
const VERTEX_BYTES: u64 = 280;
/// GAP's default Kronecker degree 16, stored in both directions.
const MEAN_DEGREE: u64 = 32;
/// Graph500's R-MAT quadrant probabilities; a destination id's bits are independently 1 with
/// probability b + d = 1 - a - c.
const RMAT_A: f64 = 0.57;
const RMAT_C: f64 = 0.19;
/// Ambix ran 50 BFS iterations. One top-down BFS here already makes ~99 accesses a vertex,
/// ~1,450 a page (5.7x pmbench's 256); two give a policy a repeat to exploit at ~11x.
pub(crate) const ITERATIONS: u32 = 2;
/// Ambix §4: 2 reads per write.
pub(crate) const READS_PER_WRITE: f64 = 2.0;
/// A visit's bookkeeping between memory accesses (loop, compare, CAS setup).
const INSTRUCTIONS: u32 = 6;
const ID: u16 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Size {
    Small,
    Medium,
    Large,
}

pub(crate) const SIZES: [Size; 3] = [Size::Small, Size::Medium, Size::Large];

impl Size {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }
    /// Ambix §4: 35, 70, 140 GB for 2^27..2^29 vertices, scaled GB -> MB.
    pub(crate) fn seed_bytes(self) -> u64 {
        match self {
            Size::Small => 35 << 20,
            Size::Medium => 70 << 20,
            Size::Large => 140 << 20,
        }
    }
    fn log2_vertices(self) -> u32 {
        match self {
            Size::Small => 27,
            Size::Medium => 28,
            Size::Large => 29,
        }
    }
}

pub(crate) fn summary(size: Size) -> String {
    format!(
        "GAP BFS (Ambix §4), 32 threads, Kronecker graph of 2^{} vertices in {} MiB, 2 reads per write",
        size.log2_vertices() - 10,
        size.seed_bytes() >> 20
    )
}

/// Probability that an examined neighbour is written as newly visited, chosen so the run has
/// `READS_PER_WRITE`: per frontier vertex 2 + 2d reads (queue, offset, d neighbour ids and d
/// parents) against 2pd writes (parent, queue) plus the parent array's reset, 1/8 line write
/// per vertex per BFS.
pub(crate) fn visit_probability() -> f64 {
    let d = MEAN_DEGREE as f64;
    ((2.0 + 2.0 * d) / READS_PER_WRITE - 1.0 / 8.0) / (2.0 * d)
}

/// Accesses of one BFS traversal per vertex (expected): reads plus writes as above.
fn traversal_per_vertex() -> f64 {
    let d = MEAN_DEGREE as f64;
    2.0 + 2.0 * d + 2.0 * visit_probability() * d
}

pub(crate) fn build(name: &str, size: Size, seed: u64, size_scale: f64) -> Result<Generator, WorkloadError> {
    let footprint = scaled_bytes(name, size.seed_bytes(), size_scale, THREADS)?;
    let n = footprint / VERTEX_BYTES;
    let layout = Layout::new(n);
    let init = Sweep::new(footprint / LINE, THREADS, vec![Step::write(0, INSTRUCTIONS)], 1, true);
    let mut phases = vec![Phase::Sweep(init)];
    let mut rng = Rng::new(seed);
    let rmat = rmat_byte_table();
    let per_thread = (traversal_per_vertex() * n as f64 / f64::from(THREADS)).round() as u64;
    for _ in 0..ITERATIONS {
        // GAP's InitParent: every parent set to -1 in a parallel loop.
        let reset =
            Sweep::new(n * 8 / LINE, THREADS, vec![Step::write(layout.parent, INSTRUCTIONS)], 1, true);
        phases.push(Phase::Sweep(reset));
        let traversal = Traversal::new(layout, &rmat, per_thread, Rng::new(rng.next_u64()));
        phases.push(Phase::Custom(Box::new(traversal)));
    }
    let info = seed_info(
        name,
        format!(
            "GAP BFS (Ambix §4): {THREADS} threads, {ITERATIONS} top-down BFS over a Kronecker graph \
         of {n} vertices, 2 reads per write"
        ),
        footprint,
        THREADS,
        FAST_BYTES,
        size_scale,
    );
    Ok(Generator::new(info, phases))
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

/// Random bits per table lookup: 4 lookups (32 id bits) take 48 bits of a draw, leaving 16 for
/// the visit decision, so a neighbour costs one draw.
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BfsState {
    Frontier,
    Offset,
    Neighbour,
    Parent,
    Visit,
    Append,
}

#[derive(Clone, Copy, Debug)]
struct BfsCursor {
    left: u64,
    state: BfsState,
    /// The frontier vertex, how many of its neighbours are done and how many it has.
    u: u64,
    j: u64,
    degree: u64,
    /// The neighbour being examined, and whether it is found unvisited.
    v: u64,
    visit: bool,
    /// Queue slots this thread reads and appends to, within its share of the queue.
    read: u64,
    write: u64,
    first: u64,
    end: u64,
}

/// One top-down BFS: each thread expands frontier vertices until its share of accesses is done.
pub(crate) struct Traversal {
    layout: Layout,
    rng: Rng,
    rmat: Vec<u8>,
    /// The id permutation: two odd multipliers and a xor, each a bijection on `bits` bits.
    mix: [u64; 3],
    /// Visit probability out of 2^16 (the top 16 bits of a neighbour's draw).
    visit_threshold: u64,
    cursors: Vec<BfsCursor>,
    next_thread: usize,
    remaining: u64,
}

impl Traversal {
    fn new(layout: Layout, rmat: &[u8], per_thread: u64, mut rng: Rng) -> Self {
        let t = u64::from(THREADS);
        let cursors = (0..t)
            .map(|i| {
                let (first, end) = (i * layout.n / t, ((i + 1) * layout.n / t).max(i * layout.n / t + 1));
                BfsCursor {
                    left: per_thread,
                    state: BfsState::Frontier,
                    u: 0,
                    j: 0,
                    degree: 0,
                    v: 0,
                    visit: false,
                    read: first,
                    write: first,
                    first,
                    end: end.min(layout.n),
                }
            })
            .collect();
        let mix = [rng.next_u64() | 1, rng.next_u64() | 1, rng.next_u64()];
        Traversal {
            layout,
            rng,
            rmat: rmat.to_vec(),
            mix,
            visit_threshold: (visit_probability() * 65536.0).round() as u64,
            cursors,
            next_thread: 0,
            remaining: per_thread * t,
        }
    }

    #[cfg(test)]
    fn neighbour(&mut self) -> u64 {
        let x = self.rng.next_u64();
        neighbour(x, &self.rmat, &self.mix, self.layout)
    }
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

impl PhaseFill for Traversal {
    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.remaining) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let threads = self.cursors.len();
        let Traversal { layout: l, rng, rmat, mix, visit_threshold, cursors, next_thread, .. } = self;
        let (l, visit_threshold) = (*l, *visit_threshold);
        let edges = MEAN_DEGREE * l.n;
        for out in &mut buf[start..] {
            // Every thread has the same share, so all finish in the same round.
            let t = *next_thread;
            let c = &mut cursors[t];
            let th = t as u8;
            *out = match c.state {
                BfsState::Frontier => {
                    let slot = c.read;
                    c.read = if c.read + 1 == c.end { c.first } else { c.read + 1 };
                    c.u = rng.below(l.n);
                    c.degree = 1 + rng.below(2 * MEAN_DEGREE - 1);
                    c.j = 0;
                    c.state = BfsState::Offset;
                    Access::read(l.queue + 8 * slot, ID, th, INSTRUCTIONS)
                }
                BfsState::Offset => {
                    c.state = BfsState::Neighbour;
                    Access::read(l.offsets + 8 * c.u, ID, th, INSTRUCTIONS)
                }
                BfsState::Neighbour => {
                    let mut e = c.u * MEAN_DEGREE + c.j;
                    if e >= edges {
                        e -= edges;
                    }
                    let x = rng.next_u64();
                    c.v = neighbour(x, rmat, mix, l);
                    c.visit = x >> 48 < visit_threshold;
                    c.state = BfsState::Parent;
                    Access::read(l.neighbours + 8 * e, ID, th, INSTRUCTIONS)
                }
                BfsState::Parent => {
                    c.state = if c.visit { BfsState::Visit } else { next_neighbour(c) };
                    Access::read(l.parent + 8 * c.v, ID, th, INSTRUCTIONS)
                }
                BfsState::Visit => {
                    c.state = BfsState::Append;
                    Access::write(l.parent + 8 * c.v, ID, th, INSTRUCTIONS)
                }
                BfsState::Append => {
                    let slot = c.write;
                    c.write = if c.write + 1 == c.end { c.first } else { c.write + 1 };
                    c.state = next_neighbour(c);
                    Access::write(l.queue + 8 * slot, ID, th, INSTRUCTIONS)
                }
            };
            c.left -= 1;
            *next_thread += 1;
            if *next_thread == threads {
                *next_thread = 0;
            }
        }
        self.remaining -= n as u64;
        n
    }
}

fn next_neighbour(c: &mut BfsCursor) -> BfsState {
    c.j += 1;
    if c.j == c.degree {
        BfsState::Frontier
    } else {
        BfsState::Neighbour
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
            let g = build("bfs", size, 1, 1.0).unwrap();
            assert_eq!(g.info().footprint_bytes / VERTEX_BYTES, 1 << log2);
            assert_eq!(g.info().suggested_fast_bytes, 27 << 20);
        }
    }

    #[test]
    fn two_reads_per_write_and_every_array_is_used() {
        let mut g = build("bfs", Size::Small, 5, 1.0 / 16.0).unwrap();
        let info = g.info().clone();
        let l = Layout::new(info.footprint_bytes / VERTEX_BYTES);
        let init = info.footprint_bytes / LINE;
        let (mut seen, mut reads, mut writes) = (0u64, 0u64, 0u64);
        let mut per_array = [0u64; 4];
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
                match a.kind {
                    AccessKind::Read => reads += 1,
                    AccessKind::Write => writes += 1,
                }
                let i = [l.neighbours, l.parent, l.queue].iter().filter(|&&b| a.addr >= b).count();
                per_array[i] += 1;
            }
        }
        assert_eq!(seen, info.accesses);
        let ratio = reads as f64 / writes as f64;
        assert!((ratio / 2.0 - 1.0).abs() < 0.02, "{ratio}");
        assert!(per_array.iter().all(|&c| c > 0), "{per_array:?}");
    }

    #[test]
    fn rmat_ids_are_skewed_before_permutation_and_in_range_after() {
        let table = rmat_byte_table();
        assert_eq!(table.len(), 1 << TABLE_BITS);
        let ones: u32 = table.iter().map(|b| b.count_ones()).sum();
        let share = f64::from(ones) / (8.0 * table.len() as f64);
        assert!((share - 0.24).abs() < 0.001, "{share}");
        let mut t = Traversal::new(Layout::new(1000), &table, 1, Rng::new(3));
        let ids: Vec<u64> = (0..10_000).map(|_| t.neighbour()).collect();
        assert!(ids.iter().all(|&v| v < 1000));
        // Skewed: some vertices are far more popular than uniform's 10.
        let mut counts = vec![0u32; 1000];
        for v in ids {
            counts[v as usize] += 1;
        }
        assert!(*counts.iter().max().unwrap() > 100);
    }
}
