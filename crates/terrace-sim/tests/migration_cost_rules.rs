//! What the migration model charges ([`terrace_sim::migration`]) and what the simulated bench grid
//! reports ([`terrace_sim::bench_grid`]): the kernel's copy rate, the saving of one TLB flush per
//! batch instead of per page, the batch size a cell runs with, and an exchange cell's plain copy
//! rate as the harmonic mean of the two directions.

use terrace_model::{MoveOptions, PageSize, TlbFlush};
use terrace_sim::bench_grid::{migration_grid, standard_cells, GridCell, GridFigure, GridOp};
use terrace_sim::migration::{copy_rate_gb_s, cost, MoveWork};
use terrace_sim::Profile;

/// A profile whose tiers never cap a copy.
fn uncapped() -> Profile {
    let mut p = Profile::load("remote-socket").unwrap();
    for t in &mut p.tiers {
        t.read_bandwidth_gb_s = vec![(1.0, 1000.0)];
        t.write_bandwidth_gb_s = vec![(1.0, 1000.0)];
    }
    p
}

#[test]
fn the_kernel_copies_at_its_rate_and_threads_speed_up_huge_pages_only() {
    let p = uncapped();
    let m = &p.migration;
    let (fast, slow) = (&p.tiers[0], &p.tiers[1]);
    let one = MoveOptions::default();
    let best = MoveOptions { copy_threads: m.huge_copy_threads_at_best as u32, ..one };
    let rate = |o: &MoveOptions, size| copy_rate_gb_s(m, o, size, slow, fast);
    assert!((rate(&one, PageSize::Base4K) - m.copy_gb_s).abs() < 1e-12);
    assert!((rate(&best, PageSize::Base4K) - m.copy_gb_s).abs() < 1e-12, "no gain on 4 KiB");
    assert!((rate(&one, PageSize::Huge2M) - m.copy_gb_s).abs() < 1e-12);
    let huge = rate(&best, PageSize::Huge2M);
    assert!((huge - m.copy_gb_s * m.huge_copy_speedup).abs() < 1e-9, "{huge}");
}

#[test]
fn a_flush_per_batch_saves_a_shootdown_per_page_but_one_per_call() {
    let p = Profile::load("optane-2019").unwrap();
    let m = &p.migration;
    let pages = 100u64;
    let work = MoveWork::one_way(1, 0, pages, 4096);
    let per_page = MoveOptions { batch_pages: 10, tlb_flush: TlbFlush::PerPage, ..MoveOptions::default() };
    let per_batch = MoveOptions { tlb_flush: TlbFlush::PerBatch, ..per_page };
    let a = cost(m, &p.tiers, &per_page, PageSize::Base4K, &work);
    let b = cost(m, &p.tiers, &per_batch, PageSize::Base4K, &work);
    assert_eq!((a.tlb_shootdowns, b.tlb_shootdowns), (100, 10));
    let saved = a.mover_ns - b.mover_ns;
    let expected = pages as f64 * m.tlb_shootdown_us * 1e3;
    assert!((saved - expected).abs() < 1e-6 * expected, "saved {saved} ns, expected {expected} ns");
}

const BYTES: u64 = 64 << 20;

fn find(fs: &[GridFigure], page_size: PageSize, batch_pages: u32, op: GridOp) -> GridFigure {
    *fs.iter().find(|f| f.cell == GridCell { page_size, threads: 1, batch_pages, op }).expect("cell present")
}

#[test]
fn smaller_batches_make_more_calls_and_move_slower() {
    for name in ["optane-2019", "remote-socket"] {
        let p = Profile::load(name).unwrap();
        let fs = migration_grid(&p, BYTES, &standard_cells(1, &[16, 512]));
        for op in GridOp::ALL {
            let small = find(&fs, PageSize::Base4K, 16, op);
            let large = find(&fs, PageSize::Base4K, 512, op);
            assert_eq!((small.effective_batch_pages, large.effective_batch_pages), (16, 512));
            assert!(
                small.gb_s < large.gb_s,
                "{name} {op:?}: batch 16 {} GB/s, batch 512 {} GB/s",
                small.gb_s,
                large.gb_s
            );
        }
    }
}

#[test]
fn an_exchange_copies_at_the_harmonic_mean_of_the_two_directions() {
    for name in ["optane-2019", "remote-socket"] {
        let p = Profile::load(name).unwrap();
        let fs = migration_grid(&p, BYTES, &standard_cells(2, &[512]));
        for size in [PageSize::Base4K, PageSize::Huge2M] {
            let (down, up, ex) = (
                find(&fs, size, 512, GridOp::Demote),
                find(&fs, size, 512, GridOp::Promote),
                find(&fs, size, 512, GridOp::Exchange),
            );
            let harmonic = |a: f64, b: f64| 2.0 / (1.0 / a + 1.0 / b);
            let copy = harmonic(down.copy_gb_s, up.copy_gb_s);
            let kernel = harmonic(down.kernel_copy_gb_s, up.kernel_copy_gb_s);
            assert!((ex.copy_gb_s - copy).abs() < 1e-9 * copy, "{name} {size}: {} vs {copy}", ex.copy_gb_s);
            assert!((ex.kernel_copy_gb_s - kernel).abs() < 1e-9 * kernel, "{name} {size}");
        }
    }
}
