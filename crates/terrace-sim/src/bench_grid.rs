//! The migration grid of `terrace bench migrate --simulated`: what the cost model of
//! [`crate::migration`] charges for moving a region between the two tiers, per page size, thread
//! count, batch size and kind of move, as GB/s. It asks the model and changes nothing in it.
//!
//! The grid mirrors the live benchmark (terrace-linux `bench_migrate`): `threads` workers each
//! move a contiguous share of the region in batches of `batch_pages` pages, so a batch never
//! exceeds one worker's share. The model reads `threads` as Nimble's `threads` copy threads with
//! `threads` batches in flight (`MoveOptions::copy_threads` and `concurrent_batches`).

use crate::migration::{copy_rate_gb_s, cost, MoveWork};
use crate::profile::{interpolate, Profile};
use serde::Serialize;
use terrace_model::{MoveOptions, PageSize};

/// What a cell moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GridOp {
    /// The whole region from the fast tier (0) to the slow tier (1).
    Demote,
    /// The whole region from the slow tier back to the fast tier.
    Promote,
    /// Half the region on each tier, swapped pairwise (Nimble's exchange, §3.1.4).
    Exchange,
}

impl GridOp {
    pub const ALL: [GridOp; 3] = [GridOp::Demote, GridOp::Promote, GridOp::Exchange];
}

/// One cell of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GridCell {
    pub page_size: PageSize,
    pub threads: u32,
    pub batch_pages: u32,
    pub op: GridOp,
}

/// The cells for page sizes 4 KiB and 2 MiB, threads `1..=max_threads` and each batch size, in
/// the order the tables print them (page size, threads, batch, op).
pub fn standard_cells(max_threads: u32, batches: &[u32]) -> Vec<GridCell> {
    let mut cells = Vec::new();
    for page_size in [PageSize::Base4K, PageSize::Huge2M] {
        for threads in 1..=max_threads.max(1) {
            for &batch_pages in batches {
                for op in GridOp::ALL {
                    cells.push(GridCell { page_size, threads, batch_pages, op });
                }
            }
        }
    }
    cells
}

/// The model's figure for one cell.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GridFigure {
    pub cell: GridCell,
    /// Bytes moved (both directions for an exchange).
    pub bytes: u64,
    /// Pages per move_pages call after splitting the region between the threads.
    pub effective_batch_pages: u32,
    pub seconds: f64,
    pub gb_s: f64,
    /// What `threads` threads of plain copying between the tiers reach by the profile's
    /// bandwidth curves (the model's counterpart of the live benchmark's memcpy), GB/s.
    pub copy_gb_s: f64,
    /// The model's kernel page-copy rate for this page size and thread count (`r_copy`), GB/s.
    pub kernel_copy_gb_s: f64,
}

impl GridFigure {
    /// Migration throughput as a share of plain copying.
    pub fn ratio(&self) -> f64 {
        self.gb_s / self.copy_gb_s
    }
}

/// Pages per call when `threads` workers split `units` units (pages, or pairs for an exchange)
/// and move their share in batches of `batch` pages.
pub fn effective_batch(batch: u32, units: u64, threads: u32) -> u32 {
    let share = units.div_ceil(threads.max(1) as u64).max(1);
    (batch.max(1) as u64).min(share) as u32
}

/// Plain copy bandwidth from tier `from` to tier `to` with `threads` threads, GB/s: the lower of
/// the source's read and the destination's write bandwidth at that thread count.
pub fn copy_bandwidth_gb_s(profile: &Profile, from: usize, to: usize, threads: u32) -> f64 {
    let t = threads.max(1) as f64;
    interpolate(&profile.tiers[from].read_bandwidth_gb_s, t)
        .min(interpolate(&profile.tiers[to].write_bandwidth_gb_s, t))
}

/// Both directions of a swap of equal halves: the rate of copying half one way and half the other.
fn both_ways(a: f64, b: f64) -> f64 {
    2.0 / (1.0 / a + 1.0 / b)
}

/// The model's figure for each of `cells`, moving a region of `bytes` (a multiple of 4 MiB, so
/// that both page sizes split it into two equal halves).
pub fn migration_grid(profile: &Profile, bytes: u64, cells: &[GridCell]) -> Vec<GridFigure> {
    cells
        .iter()
        .map(|&cell| {
            let page = cell.page_size.bytes();
            let pages = bytes / page;
            let (work, units) = match cell.op {
                GridOp::Demote => (MoveWork::one_way(0, 1, pages, page), pages),
                GridOp::Promote => (MoveWork::one_way(1, 0, pages, page), pages),
                GridOp::Exchange => {
                    let pairs = pages / 2;
                    (MoveWork::exchange(0, 1, pairs, page), pairs)
                }
            };
            let batch = effective_batch(cell.batch_pages, units, cell.threads);
            let opts = MoveOptions {
                batch_pages: batch,
                copy_threads: cell.threads,
                concurrent_batches: cell.threads,
                ..MoveOptions::default()
            };
            let c = cost(&profile.migration, &profile.tiers, &opts, cell.page_size, &work);
            let moved = work.total_bytes();
            let seconds = c.mover_ns / 1e9;
            let (fast, slow) = (&profile.tiers[0], &profile.tiers[1]);
            let m = &profile.migration;
            let (copy_gb_s, kernel_copy_gb_s) = match cell.op {
                GridOp::Demote => (
                    copy_bandwidth_gb_s(profile, 0, 1, cell.threads),
                    copy_rate_gb_s(m, &opts, cell.page_size, fast, slow),
                ),
                GridOp::Promote => (
                    copy_bandwidth_gb_s(profile, 1, 0, cell.threads),
                    copy_rate_gb_s(m, &opts, cell.page_size, slow, fast),
                ),
                GridOp::Exchange => (
                    both_ways(
                        copy_bandwidth_gb_s(profile, 0, 1, cell.threads),
                        copy_bandwidth_gb_s(profile, 1, 0, cell.threads),
                    ),
                    both_ways(
                        copy_rate_gb_s(m, &opts, cell.page_size, fast, slow),
                        copy_rate_gb_s(m, &opts, cell.page_size, slow, fast),
                    ),
                ),
            };
            GridFigure {
                cell,
                bytes: moved,
                effective_batch_pages: batch,
                seconds,
                gb_s: moved as f64 / c.mover_ns,
                copy_gb_s,
                kernel_copy_gb_s,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::BUILT_IN;

    const BYTES: u64 = 64 << 20;

    fn find(fs: &[GridFigure], page_size: PageSize, threads: u32, batch_pages: u32, op: GridOp) -> f64 {
        fs.iter()
            .find(|f| f.cell == GridCell { page_size, threads, batch_pages, op })
            .map(|f| f.gb_s)
            .expect("cell present")
    }

    #[test]
    fn every_cell_of_every_profile_has_a_figure() {
        let cells = standard_cells(4, &[64, 512]);
        assert_eq!(cells.len(), 2 * 4 * 2 * 3);
        for (name, _) in BUILT_IN {
            let p = Profile::load(name).unwrap();
            let fs = migration_grid(&p, BYTES, &cells);
            assert_eq!(fs.len(), cells.len());
            for f in &fs {
                assert!(f.gb_s.is_finite() && f.gb_s > 0.0, "{name} {:?}: {}", f.cell, f.gb_s);
                assert!(f.copy_gb_s > 0.0 && f.kernel_copy_gb_s > 0.0, "{name} {:?}", f.cell);
                assert_eq!(f.bytes, BYTES, "{name} {:?}", f.cell);
                assert!((f.seconds * 1e9 * f.gb_s - BYTES as f64).abs() < 1.0);
            }
        }
    }

    #[test]
    fn huge_pages_beat_base_pages_per_byte_in_every_cell() {
        let cells = standard_cells(4, &[64, 512]);
        for (name, _) in BUILT_IN {
            let fs = migration_grid(&Profile::load(name).unwrap(), BYTES, &cells);
            for c in cells.iter().filter(|c| c.page_size == PageSize::Base4K) {
                let base = find(&fs, PageSize::Base4K, c.threads, c.batch_pages, c.op);
                let huge = find(&fs, PageSize::Huge2M, c.threads, c.batch_pages, c.op);
                assert!(huge > 2.0 * base, "{name} {c:?}: 2 MiB {huge} GB/s vs 4 KiB {base} GB/s");
            }
        }
    }

    /// Nimble (§4.2.2): copy threads give 2.8x on 2 MB pages and nothing on 4 KB. The model speeds
    /// the copy up on huge pages only, but its tier-bandwidth cap is read at the thread count for
    /// both sizes: where one thread's write bandwidth is below the kernel's copy rate (in all three
    /// profiles) a second thread lifts the cap, and 4 KiB pages gain a little (up to 21% on cxl).
    /// With tiers fast enough never to cap the copy, 4 KiB pages gain nothing.
    #[test]
    fn threads_help_huge_pages_and_base_pages_only_through_the_tier_cap() {
        let cells = standard_cells(2, &[64, 512]);
        let mut uncapped = Profile::load("remote-socket").unwrap();
        for t in &mut uncapped.tiers {
            t.read_bandwidth_gb_s = vec![(1.0, 1000.0)];
            t.write_bandwidth_gb_s = vec![(1.0, 1000.0)];
        }
        let mut profiles: Vec<(String, Profile)> =
            BUILT_IN.iter().map(|(n, _)| (n.to_string(), Profile::load(n).unwrap())).collect();
        profiles.push(("uncapped".into(), uncapped));
        for (name, p) in &profiles {
            let fs = migration_grid(p, BYTES, &cells);
            for &batch in &[64, 512] {
                for op in GridOp::ALL {
                    let b =
                        find(&fs, PageSize::Base4K, 2, batch, op) / find(&fs, PageSize::Base4K, 1, batch, op);
                    let h =
                        find(&fs, PageSize::Huge2M, 2, batch, op) / find(&fs, PageSize::Huge2M, 1, batch, op);
                    assert!(h > 1.3 && h > b, "{name} {op:?} {batch}: 2 MiB x{h}, 4 KiB x{b}");
                    assert!((1.0..1.25).contains(&b), "{name} 4 KiB {op:?} {batch}: x{b}");
                    if name == "uncapped" {
                        assert!((b - 1.0).abs() < 1e-9, "{op:?} {batch}: x{b}");
                    }
                }
            }
        }
    }

    #[test]
    fn exchange_gains_on_huge_pages_only_and_batches_are_split_between_threads() {
        let p = Profile::load("remote-socket").unwrap();
        let fs = migration_grid(&p, BYTES, &standard_cells(1, &[512]));
        let (b_mv, b_ex) = (
            find(&fs, PageSize::Base4K, 1, 512, GridOp::Demote),
            find(&fs, PageSize::Base4K, 1, 512, GridOp::Exchange),
        );
        let (h_mv, h_ex) = (
            find(&fs, PageSize::Huge2M, 1, 512, GridOp::Demote),
            find(&fs, PageSize::Huge2M, 1, 512, GridOp::Exchange),
        );
        // Nimble §4.2.4: exchange +10-50% on THP; the hardware copy floor holds it near the low end.
        assert!(h_ex > 1.1 * h_mv, "{h_ex} vs {h_mv}");
        assert!(b_ex < 1.1 * b_mv, "{b_ex} vs {b_mv}");
        assert_eq!(effective_batch(512, 32, 2), 16);
        assert_eq!(effective_batch(64, 16384, 4), 64);
        assert_eq!(effective_batch(0, 0, 0), 1);
    }
}
