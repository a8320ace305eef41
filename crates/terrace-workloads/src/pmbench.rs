//! pmbench with a Gaussian access pattern, as Ambix evaluates it (Ambix thesis §5.4.1).
//!
//! Seed setup: one array of 32-240 GB initialised sequentially (so its low end sits in DRAM
//! under first touch), 32 threads (`OMP_NUM_THREADS=32`), page choice Gaussian around the
//! array's middle with sigma 12.5% or 25% of the array, 20/50/80% reads, ~27 GB usable DRAM.
//! Terrace runs the 64 GB size divided by 1024 (GB -> MB).

use crate::phases::{append_slots, Generator, Phase, PhaseFill, Step, Sweep, LINE};
use crate::registry::{scaled_bytes, seed_info};
use crate::rng::Rng;
use crate::WorkloadError;
use terrace_model::Access;

/// Ambix §5.4: `OMP_NUM_THREADS=32`.
const THREADS: u32 = 32;
/// Ambix §5.4.1: the 64 GB array size, scaled GB -> MB (the smallest size above DRAM).
const ARRAY: u64 = 64 << 20;
/// Ambix §5.2.1: ~27 GB usable DRAM per socket, scaled GB -> MB.
const FAST_BYTES: u64 = 27 << 20;
/// pmbench picks a page, then touches one line in it.
const PAGE: u64 = 4096;
/// The seed gives run length in time, not in accesses; 256 accesses per page is our choice:
/// enough that per-page counts separate the Gaussian's tail from its core (the tail page at 3
/// sigma still sees ~9 accesses at sigma 12.5%), while a run stays a few million accesses.
const ACCESSES_PER_PAGE: u64 = 256;
/// pmbench's loop between accesses (pick a page, a line, read or write) is ~8 instructions.
const INSTRUCTIONS: u32 = 8;

/// Ambix §5.4.1's array size for the default pmbench workloads (64 GB, scaled).
pub(crate) const DEFAULT_ARRAY: u64 = ARRAY;
/// Ambix §5.2.1's usable DRAM, scaled: the unit of the `-xN` footprint sweep.
pub(crate) const FAST_TIER: u64 = FAST_BYTES;

/// Builds pmbench over an array of `array_bytes` (before `size_scale`) with sigma `sigma_share`
/// of the array and reads with probability `read_share`.
pub(crate) fn build(
    name: &str,
    array_bytes: u64,
    sigma_share: f64,
    read_share: f64,
    seed: u64,
    size_scale: f64,
) -> Result<Generator, WorkloadError> {
    let footprint = scaled_bytes(name, array_bytes, size_scale, THREADS)?;
    let pages = footprint / PAGE;
    // The sampler's multiply-shift needs pages < 2^32; the registry caps size_scale far below.
    debug_assert!(pages < 1 << 32);
    let (prob, alias) = alias_table(&page_weights(pages, sigma_share));
    let table = prob.into_iter().zip(alias).collect();
    // Sequential initialisation in address order, each chunk by its owner thread: it is the
    // order, not the interleaving, that puts the array's low end in DRAM (Ambix §5.4.1).
    let init = Sweep::new(footprint / LINE, THREADS, vec![Step::write(0, INSTRUCTIONS)], 1, false);
    let gaussian = GaussianAccesses {
        rng: Rng::new(seed),
        table,
        read_threshold: (read_share * 4_294_967_296.0) as u64,
        threads: THREADS as usize,
        next_thread: 0,
        remaining: ACCESSES_PER_PAGE * pages,
    };
    let info = seed_info(
        name,
        format!(
            "pmbench (Ambix §5.4.1): {THREADS} threads, Gaussian pages with sigma {}% of the array, \
         {}% reads",
            sigma_share * 100.0,
            (read_share * 100.0).round()
        ),
        footprint,
        THREADS,
        FAST_BYTES,
        size_scale,
    );
    Ok(Generator::new(info, vec![Phase::Sweep(init), Phase::Custom(Box::new(gaussian))]))
}

/// Probability weight of each page: the Gaussian's mass over `[p, p + 1)` in page units, mean
/// at the array's middle. Restricting to the array and renormalising is exactly "redraw samples
/// that fall outside".
fn page_weights(pages: u64, sigma_share: f64) -> Vec<f64> {
    let mean = pages as f64 / 2.0;
    let sigma = sigma_share * pages as f64;
    let density = |x: f64| {
        let z = (x - mean) / sigma;
        (-0.5 * z * z).exp()
    };
    // Simpson's rule with 8 panels per page: the density is smooth on that scale.
    const PANELS: u32 = 8;
    let h = 1.0 / f64::from(PANELS);
    (0..pages)
        .map(|p| {
            let x0 = p as f64;
            let inner: f64 = (1..PANELS)
                .map(|k| {
                    let w = if k % 2 == 1 { 4.0 } else { 2.0 };
                    w * density(x0 + f64::from(k) * h)
                })
                .sum();
            (density(x0) + inner + density(x0 + 1.0)) * h / 3.0
        })
        .collect()
}

/// Vose's alias method: O(1) sampling of a discrete distribution with one random draw, which a
/// Box-Muller transform (a log, a sqrt and a sine per sample) could not match for speed.
/// Returns per-slot acceptance thresholds (out of 2^32) and alias slots.
pub(crate) fn alias_table(weights: &[f64]) -> (Vec<u32>, Vec<u32>) {
    let n = weights.len();
    let total: f64 = weights.iter().sum();
    let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
    let mut prob = vec![u32::MAX; n];
    let mut alias: Vec<u32> = (0..n as u32).collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| scaled[i] < 1.0);
    while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
        prob[s] = (scaled[s] * 4_294_967_296.0) as u32;
        alias[s] = l as u32;
        scaled[l] -= 1.0 - scaled[s];
        if scaled[l] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // Whatever is left has weight 1 up to rounding: it keeps `u32::MAX` and aliases itself.
    (prob, alias)
}

/// The measured phase: every access picks a page from the Gaussian, then a uniform line in it.
struct GaussianAccesses {
    rng: Rng,
    /// Per slot: acceptance threshold and alias, side by side so a draw touches one line.
    table: Vec<(u32, u32)>,
    /// Read probability, out of 2^32.
    read_threshold: u64,
    threads: usize,
    next_thread: usize,
    remaining: u64,
}

impl PhaseFill for GaussianAccesses {
    fn remaining(&self) -> u64 {
        self.remaining
    }

    fn fill(&mut self, buf: &mut Vec<Access>, max: usize) -> usize {
        let n = (max as u64).min(self.remaining) as usize;
        let start = buf.len();
        append_slots(buf, n);
        let pages = self.table.len() as u64;
        for out in &mut buf[start..] {
            // Two draws per access. First: the high half picks the slot, the low half decides
            // slot or alias. Second: the top 6 bits pick the line, the low half read or write.
            let x = self.rng.next_u64();
            let slot = (((x >> 32) * pages) >> 32) as usize;
            let (accept, alias) = self.table[slot];
            let page = if (x as u32) < accept { slot as u64 } else { u64::from(alias) };
            let y = self.rng.next_u64();
            let addr = page * PAGE + (y >> 58) * LINE;
            let t = self.next_thread as u8;
            *out = if (y & 0xffff_ffff) < self.read_threshold {
                Access::read(addr, LINE as u16, t, INSTRUCTIONS)
            } else {
                Access::write(addr, LINE as u16, t, INSTRUCTIONS)
            };
            crate::turns::pass(&mut self.next_thread, self.threads);
        }
        self.remaining -= n as u64;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AccessSource;
    use terrace_model::AccessKind;

    #[test]
    fn alias_table_reproduces_the_weights() {
        let weights = [1.0, 2.0, 3.0, 4.0, 0.0];
        let (prob, alias) = alias_table(&weights);
        // Exact probability of each outcome from the table.
        let mut p = [0.0f64; 5];
        for i in 0..5 {
            let accept = f64::from(prob[i]) / 4_294_967_296.0;
            p[i] += accept / 5.0;
            p[alias[i] as usize] += (1.0 - accept) / 5.0;
        }
        for (got, w) in p.iter().zip(weights) {
            assert!((got - w / 10.0).abs() < 1e-6, "{p:?}");
        }
    }

    #[test]
    fn page_weights_are_symmetric_and_peak_in_the_middle() {
        let w = page_weights(100, 0.125);
        assert!((w[0] - w[99]).abs() < 1e-12);
        assert!(w[49] > w[30] && w[50] > w[70]);
    }

    /// Post-init read share and the share of accesses within one sigma of the middle.
    fn measure(sigma: f64, reads: f64) -> (f64, f64) {
        let mut g = build("pmbench", ARRAY, sigma, reads, 9, 1.0 / 16.0).unwrap();
        let footprint = g.info().footprint_bytes;
        let init = footprint / LINE;
        let (mid, sd) = (footprint as f64 / 2.0, sigma * footprint as f64);
        let mut buf = Vec::new();
        let (mut seen, mut n, mut r, mut inside) = (0u64, 0u64, 0u64, 0u64);
        loop {
            buf.clear();
            if g.fill(&mut buf, 1 << 16) == 0 {
                break;
            }
            for a in &buf {
                seen += 1;
                assert!(a.addr < footprint);
                if seen <= init {
                    continue;
                }
                n += 1;
                r += u64::from(a.kind == AccessKind::Read);
                inside += u64::from((a.addr as f64 - mid).abs() <= sd);
            }
        }
        (r as f64 / n as f64, inside as f64 / n as f64)
    }

    #[test]
    fn read_share_and_gaussian_shape_sigma_12() {
        for target in [0.2, 0.5, 0.8] {
            let (reads, inside) = measure(0.125, target);
            assert!((reads - target).abs() < 0.01, "read share {reads} vs {target}");
            // The array spans +-4 sigma: truncation changes nothing visible.
            assert!((inside - 0.6827).abs() < 0.02, "within 1 sigma: {inside}");
        }
    }

    #[test]
    fn read_share_and_gaussian_shape_sigma_25() {
        let (reads, inside) = measure(0.25, 0.2);
        assert!((reads - 0.2).abs() < 0.01, "read share {reads}");
        // The array spans only +-2 sigma, so redrawing outside raises the +-1 sigma share to
        // 0.6827 / 0.9545.
        assert!((inside - 0.7153).abs() < 0.02, "within 1 sigma: {inside}");
    }

    #[test]
    fn init_is_in_address_order() {
        let mut g = build("pmbench", ARRAY, 0.125, 0.5, 1, 1.0 / 64.0).unwrap();
        let lines = (g.info().footprint_bytes / LINE) as usize;
        let mut buf = Vec::new();
        while buf.len() < lines {
            let want = lines - buf.len();
            g.fill(&mut buf, want);
        }
        assert!(buf
            .iter()
            .enumerate()
            .all(|(i, a)| a.addr == i as u64 * LINE && a.kind == AccessKind::Write));
        assert_eq!(buf[0].thread, 0);
        assert_eq!(buf[lines - 1].thread, 31);
    }
}
