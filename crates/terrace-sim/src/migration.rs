//! Cost of carrying a plan out: the mechanisms of Linux move_pages and of Nimble (§3.1), charged
//! from the profile's migration row (docs/model.md §Migration).

pub use crate::profile::MigrationProfile;
use crate::profile::{interpolate, TierProfile, MAX_TIERS};
use terrace_model::{MoveOptions, PageSize, TlbFlush, BASE_PAGES_PER_HUGE};

/// The work a plan turned into, after validation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MoveWork {
    /// Pages moved one way by kernel migration.
    pub pages: u64,
    /// Pairs swapped (two pages each).
    pub pairs: u64,
    /// Bytes copied by kernel migration from tier `from` to tier `to`, indexed `[from][to]`.
    pub bytes: [[u64; MAX_TIERS]; MAX_TIERS],
    /// Promotions that keep their old frame as a shadow: a copy into a free frame and a mapping
    /// switch (mtier §3.1, Table 5.2 "heavy copy": copy, no flush, no allocation).
    pub shadow_copies: u64,
    /// Their bytes, indexed like `bytes`.
    pub shadow_bytes: [[u64; MAX_TIERS]; MAX_TIERS],
    /// Demotions back to a shadow: a mapping switch only (mtier Table 5.2 "swap": no copy, a
    /// flush, no allocation).
    pub switched: u64,
}

impl MoveWork {
    /// `pages` pages of `page_bytes` moved one way, from tier `from` to tier `to`.
    pub fn one_way(from: usize, to: usize, pages: u64, page_bytes: u64) -> Self {
        let mut w = MoveWork { pages, ..Default::default() };
        w.bytes[from][to] = pages * page_bytes;
        w
    }
    /// `pairs` pages of tier `a` swapped with as many of tier `b`.
    pub fn exchange(a: usize, b: usize, pairs: u64, page_bytes: u64) -> Self {
        let mut w = MoveWork { pairs, ..Default::default() };
        w.bytes[a][b] = pairs * page_bytes;
        w.bytes[b][a] = pairs * page_bytes;
        w
    }
    /// Every page the work moves, however it moves it.
    pub fn total_pages(&self) -> u64 {
        self.kernel_pages() + self.shadow_copies + self.switched
    }
    /// The pages kernel migration moves (one way, and both pages of each pair).
    pub fn kernel_pages(&self) -> u64 {
        self.pages + 2 * self.pairs
    }
    /// Bytes copied, by kernel migration and into shadowed promotions.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().flatten().chain(self.shadow_bytes.iter().flatten()).sum()
    }
}

/// What moving costs: the mover's time and the shootdowns that stall the program.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MoveCost {
    pub mover_ns: f64,
    pub tlb_shootdowns: u64,
    /// The mover's time per page of each kind, ns: a kernel migration (one way or half a pair),
    /// a shadowed promotion, a switch back to a shadow. They add up to `mover_ns`.
    pub per_page_ns: PerPage,
}

/// Mover time per page, ns, by how the page moves ([`MoveCost::per_page_ns`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerPage {
    pub kernel: f64,
    pub shadow_copy: f64,
    pub switch: f64,
}

/// Copy rate of one page copy, bytes per ns: the kernel's single-thread copy, sped up by
/// several copy threads on huge pages only (Nimble §4.2.2: 2.8x on 2 MB, none on 4 KB), and
/// never faster than the source can read or the destination can write with that many threads.
fn copy_bytes_per_ns(
    m: &MigrationProfile,
    opts: &MoveOptions,
    huge: bool,
    from: &TierProfile,
    to: &TierProfile,
) -> f64 {
    let threads = opts.copy_threads.max(1) as f64;
    let speedup = if huge {
        let best = m.huge_copy_threads_at_best.max(1.0);
        1.0 + (m.huge_copy_speedup - 1.0) * ((threads.min(best) - 1.0) / (best - 1.0).max(1.0))
    } else {
        1.0
    };
    (m.copy_gb_s * speedup)
        .min(interpolate(&from.read_bandwidth_gb_s, threads))
        .min(interpolate(&to.write_bandwidth_gb_s, threads))
}

/// The model's kernel page-copy rate, GB/s (bytes per ns), for one page of `page_size` copied
/// from tier `from` to tier `to` with `opts.copy_threads` threads: the `r_copy` of
/// docs/model.md §4, exposed for reports (`terrace bench migrate --simulated`).
pub fn copy_rate_gb_s(
    m: &MigrationProfile,
    opts: &MoveOptions,
    page_size: PageSize,
    from: &TierProfile,
    to: &TierProfile,
) -> f64 {
    copy_bytes_per_ns(m, opts, page_size == PageSize::Huge2M, from, to)
}

/// One mapping switch, ns: a store to the page's page-table entry, whose location the mover
/// keeps (mtier §3.4.1, `tier_struct.pte`), so one random access to the fast tier, where page
/// tables live (docs/model.md §4, "Shadow copies"). No shootdown: that is counted apart.
pub fn switch_ns(tiers: &[TierProfile]) -> f64 {
    tiers[0].read_latency_random_ns
}

/// Mover time and shootdowns for `work` done with `opts` on pages of `page_size`.
pub fn cost(
    m: &MigrationProfile,
    tiers: &[TierProfile],
    opts: &MoveOptions,
    page_size: PageSize,
    work: &MoveWork,
) -> MoveCost {
    let pages = work.total_pages();
    if pages == 0 {
        return MoveCost::default();
    }
    if opts.splits(page_size) {
        return split_cost(m, tiers, opts, work);
    }
    let huge = page_size == PageSize::Huge2M;
    let batch = opts.batch_pages.max(1) as u64;
    let calls = pages.div_ceil(batch);
    // The pages whose translation is flushed ([`crate::movers::CopyKind::flushes`]): kernel
    // migrations and switches back to a shadow, not shadowed promotions (mtier §3.1).
    let flushed = work.kernel_pages() + work.switched;
    let (fixed_page_us, shootdowns) = match opts.tlb_flush {
        TlbFlush::PerPage => (m.page_us, flushed),
        // One flush per batch instead of one per page (mtier §3.1; Linux 6.3 batched flushing).
        TlbFlush::PerBatch => (m.page_us - m.tlb_shootdown_us, flushed.div_ceil(batch)),
    };
    let threads = opts.copy_threads.max(1) as f64;
    let copy_time = |bytes: &[[u64; MAX_TIERS]; MAX_TIERS]| {
        let (mut copy_ns, mut hardware_ns) = (0.0, 0.0);
        for (from, row) in bytes.iter().enumerate().take(tiers.len()) {
            for (to, &b) in row.iter().enumerate().take(tiers.len()) {
                if b > 0 {
                    copy_ns += b as f64 / copy_bytes_per_ns(m, opts, huge, &tiers[from], &tiers[to]);
                    let tiers_bw = interpolate(&tiers[from].read_bandwidth_gb_s, threads)
                        .min(interpolate(&tiers[to].write_bandwidth_gb_s, threads));
                    hardware_ns += b as f64 / tiers_bw;
                }
            }
        }
        (copy_ns, hardware_ns)
    };
    let calls_ns = calls as f64 * m.call_us * 1e3;
    let kernel_pages = work.kernel_pages();
    let mut kernel_ns = 0.0;
    if kernel_pages > 0 {
        let (copy_ns, hardware_ns) = copy_time(&work.bytes);
        let one_way_pages = work.pages as f64;
        let exchanged_pages = 2.0 * work.pairs as f64;
        let per_page_ns = fixed_page_us * 1e3;
        let copy_per_page_ns = copy_ns / kernel_pages as f64;
        // Exchange swaps in place without allocating or freeing (Nimble §3.1.4): a gain on huge pages.
        let exchange_gain = if huge { m.huge_exchange_gain } else { 1.0 };
        kernel_ns = calls_ns
            + one_way_pages * (per_page_ns + copy_per_page_ns)
            + exchanged_pages * (per_page_ns + copy_per_page_ns) / exchange_gain;
        // Concurrent batches overlap copies (Nimble §4.2.3): a gain on huge pages only.
        if huge && opts.concurrent_batches > 1 {
            kernel_ns /= m.huge_concurrency_gain;
        }
        // The gains may beat the kernel's copy loop but never the tiers themselves: nothing moves
        // pages faster than the hardware can copy them (Nimble's best exchange reached 0.96x of copy
        // bandwidth).
        kernel_ns = kernel_ns.max(hardware_ns);
    }
    // Shadowed promotions and switches skip the kernel's migration path: the frame is the
    // mover's own, nothing is unmapped or allocated (mtier Table 5.2). A promotion copies and
    // switches; a demotion back to its shadow only switches.
    let switch = switch_ns(tiers);
    let shadow_copy_ns = copy_time(&work.shadow_bytes).0 + work.shadow_copies as f64 * switch;
    let switched_ns = work.switched as f64 * switch;
    // Without kernel migrations in the work, its calls are the other pages' share.
    let others = (work.shadow_copies + work.switched) as f64;
    let extra = if kernel_pages == 0 { calls_ns / others } else { 0.0 };
    let per_page_ns = PerPage {
        kernel: if kernel_pages > 0 { kernel_ns / kernel_pages as f64 } else { 0.0 },
        shadow_copy: if work.shadow_copies > 0 {
            shadow_copy_ns / work.shadow_copies as f64 + extra
        } else {
            0.0
        },
        switch: switch + extra,
    };
    let mover_ns = kernel_ns + shadow_copy_ns + switched_ns + if kernel_pages == 0 { calls_ns } else { 0.0 };
    MoveCost { mover_ns, tlb_shootdowns: shootdowns, per_page_ns }
}

/// Huge pages split to move (`MoveOptions::split_huge`): each is its 512 base pages migrated one
/// by one, so the work costs what as many 4 KiB pages cost, `batch_pages` counting base pages
/// (Nimble §4.3, "THPs are split before migration"; Fig. 2 measures a split THP's migration at
/// the rate of 512 base pages, so the split itself adds nothing here). Costs per page are per
/// huge page.
fn split_cost(m: &MigrationProfile, tiers: &[TierProfile], opts: &MoveOptions, work: &MoveWork) -> MoveCost {
    let n = BASE_PAGES_PER_HUGE;
    let base = MoveWork {
        pages: work.pages * n,
        pairs: work.pairs * n,
        shadow_copies: work.shadow_copies * n,
        switched: work.switched * n,
        ..*work
    };
    let opts = MoveOptions { split_huge: false, ..*opts };
    let c = cost(m, tiers, &opts, PageSize::Base4K, &base);
    let n = n as f64;
    MoveCost {
        per_page_ns: PerPage {
            kernel: c.per_page_ns.kernel * n,
            shadow_copy: c.per_page_ns.shadow_copy * n,
            switch: c.per_page_ns.switch * n,
        },
        ..c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    /// A promotion: slow to fast.
    fn one_way(pages: u64, page: PageSize) -> MoveWork {
        MoveWork::one_way(1, 0, pages, page.bytes())
    }

    #[test]
    fn stock_linux_costs_reproduce_their_source_row() {
        // The profile's constants were derived from these three measurements (docs/hardware.md §10,
        // Zi Yan's THP migration series); the model must give them back. The copy here is a
        // promotion from the remote socket, where neither tier caps the measured copy rate.
        let p = Profile::load("remote-socket").unwrap();
        let o = MoveOptions::default();
        let us = |w: &MoveWork, s| cost(&p.migration, &p.tiers, &o, s, w).mover_ns / 1e3;
        let one = us(&one_way(1, PageSize::Base4K), PageSize::Base4K);
        assert!((one - 62.47).abs() < 0.05, "{one}");
        assert!((us(&one_way(512, PageSize::Base4K), PageSize::Base4K) - 1987.38).abs() < 1.0);
        assert!((us(&one_way(1, PageSize::Huge2M), PageSize::Huge2M) - 658.54).abs() < 0.5);
    }

    #[test]
    fn huge_pages_move_faster_per_byte_than_base_pages() {
        let p = Profile::load("remote-socket").unwrap();
        let o = MoveOptions::default();
        let base = cost(&p.migration, &p.tiers, &o, PageSize::Base4K, &one_way(512, PageSize::Base4K));
        let huge = cost(&p.migration, &p.tiers, &o, PageSize::Huge2M, &one_way(1, PageSize::Huge2M));
        let ratio = base.mover_ns / huge.mover_ns;
        assert!(ratio > 2.5 && ratio < 3.5, "THP gain {ratio} (Nimble: 2.9x)");
    }

    /// A huge page split to move costs what its 512 base pages cost moved one by one, calls
    /// counted in base pages, a shootdown each (Nimble §4.3; Fig. 2: a split THP migrates at the
    /// rate of 512 base pages), so 2.9x what moving it whole costs.
    #[test]
    fn a_split_huge_page_costs_its_base_pages() {
        let p = Profile::load("nimble-xeon").unwrap();
        for options in [
            MoveOptions::default(),
            MoveOptions { batch_pages: 128, concurrent_batches: 4, ..Default::default() },
        ] {
            let split = MoveOptions { split_huge: true, ..options };
            for work in [one_way(3, PageSize::Huge2M), MoveWork::exchange(0, 1, 2, PageSize::Huge2M.bytes())]
            {
                let huge = cost(&p.migration, &p.tiers, &split, PageSize::Huge2M, &work);
                let base_work = MoveWork { pages: work.pages * 512, pairs: work.pairs * 512, ..work };
                let base = cost(&p.migration, &p.tiers, &options, PageSize::Base4K, &base_work);
                assert_eq!((huge.mover_ns, huge.tlb_shootdowns), (base.mover_ns, base.tlb_shootdowns));
                assert_eq!(huge.per_page_ns.kernel, 512.0 * base.per_page_ns.kernel);
                assert_eq!(huge.tlb_shootdowns, 512 * work.kernel_pages());
            }
            let base_pages = MoveOptions { split_huge: true, ..options };
            let small =
                cost(&p.migration, &p.tiers, &base_pages, PageSize::Base4K, &one_way(5, PageSize::Base4K));
            let plain =
                cost(&p.migration, &p.tiers, &options, PageSize::Base4K, &one_way(5, PageSize::Base4K));
            assert_eq!(small, plain, "no effect on 4 KiB pages");
        }
        let o = MoveOptions::default();
        let whole =
            cost(&p.migration, &p.tiers, &o, PageSize::Huge2M, &one_way(1, PageSize::Huge2M)).mover_ns;
        let split = MoveOptions { split_huge: true, ..o };
        let split =
            cost(&p.migration, &p.tiers, &split, PageSize::Huge2M, &one_way(1, PageSize::Huge2M)).mover_ns;
        assert!(split / whole > 2.5 && split / whole < 3.5, "split {split} ns, whole {whole} ns");
    }

    #[test]
    fn copy_threads_help_huge_pages_only() {
        let p = Profile::load("remote-socket").unwrap();
        let one = MoveOptions::default();
        let four = MoveOptions { copy_threads: 4, ..one };
        for (size, helps) in [(PageSize::Huge2M, true), (PageSize::Base4K, false)] {
            let w = one_way(16, size);
            let a = cost(&p.migration, &p.tiers, &one, size, &w).mover_ns;
            let b = cost(&p.migration, &p.tiers, &four, size, &w).mover_ns;
            assert_eq!(b < a, helps, "{size}: {a} vs {b}");
        }
    }

    #[test]
    fn batched_flush_needs_one_shootdown_per_call() {
        let p = Profile::load("optane-2019").unwrap();
        let o = MoveOptions { batch_pages: 100, tlb_flush: TlbFlush::PerBatch, ..Default::default() };
        let c = cost(&p.migration, &p.tiers, &o, PageSize::Base4K, &one_way(1000, PageSize::Base4K));
        assert_eq!(c.tlb_shootdowns, 10);
        let per_page = cost(
            &p.migration,
            &p.tiers,
            &MoveOptions::default(),
            PageSize::Base4K,
            &one_way(1000, PageSize::Base4K),
        );
        assert_eq!(per_page.tlb_shootdowns, 1000);
    }

    #[test]
    fn copies_into_optane_are_capped_by_its_write_bandwidth() {
        let p = Profile::load("optane-2019").unwrap();
        let o = MoveOptions { copy_threads: 4, ..Default::default() };
        let r = copy_bytes_per_ns(&p.migration, &o, true, &p.tiers[0], &p.tiers[1]);
        assert!(r <= 12.5 + 1e-9);
        let r1 = copy_bytes_per_ns(&p.migration, &MoveOptions::default(), true, &p.tiers[0], &p.tiers[1]);
        assert!(
            (r1 - 2.78).abs() < 1e-9,
            "one-thread copy into Optane runs at its one-thread write bandwidth, got {r1}"
        );
    }

    /// Nimble's optimised exchange of one pair of 2 MiB pages, by hand from docs/model.md §4 and
    /// the remote-socket profile: 4 copy threads copy at 3.511 x 2.8 = 9.831 GB/s (neither tier's
    /// 4-thread bandwidth, 12.098 GB/s out of the fast tier and 13.767 GB/s into it, is lower);
    /// a page costs t_page 2.600 us + 2097152 B / 9.831 GB/s = 215.92 us; the pair 2 x 215.92 /
    /// 1.30 (the exchange gain) = 332.18 us; one call 58.70 us; over 1.175 (pages in flight):
    /// 332.67 us, above the tiers' own copy time (2097152 B each way: 173.35 + 152.33 = 325.68 us).
    #[test]
    fn one_optimised_exchange_of_huge_pages_costs_what_the_hand_computation_gives() {
        let p = Profile::load("remote-socket").unwrap();
        let o = MoveOptions { batch_pages: 2, copy_threads: 4, concurrent_batches: 4, ..Default::default() };
        let w = MoveWork::exchange(0, 1, 1, PageSize::Huge2M.bytes());
        let c = cost(&p.migration, &p.tiers, &o, PageSize::Huge2M, &w);
        let us = c.mover_ns / 1e3;
        assert!((us - 332.67).abs() < 0.5, "{us} us");
        assert_eq!(c.tlb_shootdowns, 2, "a flush per page, both pages of the pair");
        // The same two pages moved one way each, one call, no exchange gain.
        let mut two = MoveWork::one_way(0, 1, 1, 2 << 20);
        two.pages = 2;
        two.bytes[1][0] = 2 << 20;
        let one_way_us = cost(&p.migration, &p.tiers, &o, PageSize::Huge2M, &two).mover_ns / 1e3;
        assert!((one_way_us - (58.70 + 2.0 * 215.92) / 1.175).abs() < 0.5, "{one_way_us} us");
    }
}
