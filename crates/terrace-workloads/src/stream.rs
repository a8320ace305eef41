//! McCalpin's STREAM kernels, as mtier runs them (mtier thesis §4.2.2).
//!
//! Seed setup: OpenMP STREAM on doubles with 6 threads, 48M-element arrays (768 MB of read-only
//! sources), fast tiers of 12.5/25/50% of the RSS = 98/196/392 MB, so an RSS of ~784 MB; the
//! epoch study uses 25% (§5.3). Terrace uses three 32 MiB arrays (96 MiB, the size of the
//! seed's smallest fast tier rather than of its RSS), about 1/8 of the seed: scale 8.
//! Ratios carry over: a fast tier of 25% of our footprint is 25% of the RSS, as in §5.3.

use crate::phases::{Generator, Phase, Step, Sweep, LINE};
use crate::registry::scaled_bytes;
use crate::{WorkloadError, WorkloadInfo};

/// mtier §4.1, Table 4.4: up to 6 threads (one socket, HT off); we run the largest configuration.
const THREADS: u32 = 6;
/// One of the three arrays; 3 x 32 MiB = 96 MiB.
const ARRAY: u64 = 32 << 20;
/// mtier's RSS (~784 MB) over our 96 MiB footprint, rounded.
const SEED_SCALE: f64 = 8.0;
/// STREAM repeats every kernel; 10 passes give a policy several epochs of steady state.
const ITERATIONS: u32 = 10;
/// A vectorised STREAM kernel retires about 2 instructions per double, 16 per 64-byte line;
/// they are spread over the line's accesses.
const INSTRUCTIONS_PER_LINE: u32 = 16;

/// The loop a STREAM workload runs after initialisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `c = a`
    Copy,
    /// `b = q * c`
    Scale,
    /// `c = a + b`
    Add,
    /// `a = b + q * c`
    Triad,
    /// `sum += a + b + c`: only reads, the data mtier shadows (its sources are `PROT_READ`).
    ReadOnly,
}

impl Kernel {
    /// The accesses the kernel makes on each line, given the arrays' offsets.
    fn steps(self, [a, b, c]: [u64; 3]) -> Vec<Step> {
        let per = |n: u32| INSTRUCTIONS_PER_LINE.div_ceil(n);
        match self {
            Kernel::Copy => vec![Step::read(a, per(2)), Step::write(c, per(2))],
            Kernel::Scale => vec![Step::read(c, per(2)), Step::write(b, per(2))],
            Kernel::Add => vec![Step::read(a, per(3)), Step::read(b, per(3)), Step::write(c, per(3))],
            Kernel::Triad => {
                vec![Step::read(b, per(3)), Step::read(c, per(3)), Step::write(a, per(3))]
            }
            Kernel::ReadOnly => {
                vec![Step::read(a, per(3)), Step::read(b, per(3)), Step::read(c, per(3))]
            }
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kernel::Copy => "copy (c = a)",
            Kernel::Scale => "scale (b = q*c)",
            Kernel::Add => "add (c = a + b)",
            Kernel::Triad => "triad (a = b + q*c)",
            Kernel::ReadOnly => "read-only sum of a, b, c",
        }
    }
}

/// Builds a STREAM workload. STREAM has no randomness, so it takes no seed.
pub(crate) fn build(name: &str, kernel: Kernel, size_scale: f64) -> Result<Generator, WorkloadError> {
    let array = scaled_bytes(name, ARRAY, size_scale, THREADS)?;
    let bases = [0, array, 2 * array];
    let lines = array / LINE;
    // STREAM's own initialisation sets a, b and c in one parallel loop: one write to each per line.
    let per = INSTRUCTIONS_PER_LINE.div_ceil(3);
    let init_steps = bases.iter().map(|&base| Step::write(base, per)).collect();
    let init = Sweep::new(lines, THREADS, init_steps, 1, true);
    let run = Sweep::new(lines, THREADS, kernel.steps(bases), ITERATIONS, true);
    let footprint = 3 * array;
    let info = WorkloadInfo {
        name: name.to_string(),
        description: format!(
            "STREAM (mtier §4.2.2): {THREADS} threads, {ITERATIONS} passes of {} over three {} MiB arrays",
            kernel.describe(),
            array >> 20
        ),
        footprint_bytes: footprint,
        threads: THREADS,
        scale: SEED_SCALE / size_scale,
        // mtier §5.3: fast tier at 25% of the RSS, rounded down to whole pages.
        suggested_fast_bytes: footprint / 4 / 4096 * 4096,
        accesses: 0,
        recording: None,
    };
    Ok(Generator::new(info, vec![Phase::Sweep(init), Phase::Sweep(run)]))
}

/// mtier's modified STREAM (§4.2.2): two read-only source arrays of 48M doubles (768 MB in
/// all), the four kernels with their destination writes removed (Table 4.5: `d = a[i]`,
/// `d = q*b[i]`, `d = a[i] + b[i]`, `d = a[i] + q*b[i]`), run again and again for at least 100 s.
/// Terrace's arrays are 4 MiB each (8 MiB, scale 91.6): small enough that a run lasts many of
/// the thesis's longest epochs (1 s) at little simulation cost, since a run's epoch count and
/// passes per epoch do not depend on its size (both shrink with the scale).
pub(crate) mod mtier {
    use super::*;

    /// One source array at the built-in size.
    const ARRAY: u64 = 4 << 20;
    /// The thesis's read-only sources: 2 x 48,000,000 doubles (§4.2.2).
    const SEED_SOURCES: f64 = 768_000_000.0;
    /// Rounds of the four kernels: each round is 6 passes over an array; 48 rounds are about
    /// 8 epochs of 1 s, the thesis's longest (§4.3).
    const ROUNDS: u32 = 48;
    /// Threads the thesis ran (§4.3, Figs. 5.9-5.10).
    pub(crate) const THREADS: [u32; 4] = [1, 2, 4, 6];

    pub(crate) fn build(name: &str, threads: u32, size_scale: f64) -> Result<Generator, WorkloadError> {
        let array = scaled_bytes(name, ARRAY, size_scale, threads)?;
        let (a, b) = (0, array);
        let lines = array / LINE;
        let per = |n: u32| INSTRUCTIONS_PER_LINE.div_ceil(n);
        // Initialised once (the writes before mprotect), then only read.
        let init = Sweep::new(lines, threads, vec![Step::write(a, per(2)), Step::write(b, per(2))], 1, true);
        let mut phases = vec![Phase::Sweep(init)];
        for _ in 0..ROUNDS {
            for steps in [
                vec![Step::read(a, per(1))],
                vec![Step::read(b, per(1))],
                vec![Step::read(a, per(2)), Step::read(b, per(2))],
                vec![Step::read(a, per(2)), Step::read(b, per(2))],
            ] {
                phases.push(Phase::Sweep(Sweep::new(lines, threads, steps, 1, true)));
            }
        }
        let footprint = 2 * array;
        let info = WorkloadInfo {
            name: name.to_string(),
            description: format!(
                "mtier's read-only STREAM (§4.2.2): {threads} thread{}, {ROUNDS} rounds of its four \
                 kernels over two read-only {} MiB arrays",
                if threads == 1 { "" } else { "s" },
                array >> 20
            ),
            footprint_bytes: footprint,
            threads,
            scale: SEED_SOURCES / (2 * ARRAY) as f64 / size_scale,
            // §5.5: the pool at 12.5% of the RSS.
            suggested_fast_bytes: footprint / 8 / 4096 * 4096,
            accesses: 0,
            recording: None,
        };
        Ok(Generator::new(info, phases))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccessSource;
    use terrace_model::AccessKind;

    fn run(kernel: Kernel) -> (Generator, Vec<terrace_model::Access>) {
        let mut g = build("stream", kernel, 1.0 / 64.0).unwrap();
        let mut all = Vec::new();
        while g.fill(&mut all, 4096) > 0 {}
        (g, all)
    }

    #[test]
    fn default_size() {
        let g = build("stream-triad", Kernel::Triad, 1.0).unwrap();
        let info = g.info();
        assert_eq!(info.footprint_bytes, 96 << 20);
        assert_eq!(info.suggested_fast_bytes, 24 << 20);
        assert_eq!(info.accesses, 3 * (512 << 10) + 10 * 3 * (512 << 10));
    }

    #[test]
    fn triad_reads_two_for_each_write_after_init() {
        let (g, all) = run(Kernel::Triad);
        let array = g.info().footprint_bytes / 3;
        let init = (3 * array / LINE) as usize;
        assert!(all[..init].iter().all(|a| a.kind == AccessKind::Write));
        let reads = all[init..].iter().filter(|a| a.kind == AccessKind::Read).count();
        let writes = all.len() - init - reads;
        assert_eq!(reads, 2 * writes);
        // Writes go to a, reads to b and c.
        assert!(all[init..].iter().all(|a| (a.kind == AccessKind::Write) == (a.addr < array)));
    }

    #[test]
    fn read_only_never_writes_after_init() {
        let (g, all) = run(Kernel::ReadOnly);
        let init = (g.info().footprint_bytes / LINE) as usize;
        assert!(all[init..].iter().all(|a| a.kind == AccessKind::Read));
        assert_eq!(all.len() - init, 10 * init);
    }

    #[test]
    fn every_kernel_touches_each_line_of_its_arrays_once_per_pass() {
        for kernel in [Kernel::Copy, Kernel::Scale, Kernel::Add] {
            let (g, all) = run(kernel);
            let init = (g.info().footprint_bytes / LINE) as usize;
            let per_line = kernel.steps([0, 1, 2]).len();
            assert_eq!(all.len() - init, 10 * per_line * init / 3);
        }
    }
}
