//! The machine contract ([`contract::check`]) passes a machine that keeps it and names the
//! check a machine breaks: a small reference machine built on [`Plan::check`] passes, and
//! copies of it with one deliberate fault each are flagged by the check that covers the fault.
//! Without these, a contract that could not fail would pass every machine's tests.

use terrace_model::{
    contract, Applied, Machine, MachineError, MachineInfo, Mechanism, Mechanisms, MoveFailure, Observations,
    PageSize, Plan, Progress, RateBudget, Requirements, Tier, TierId, TierKind, TierStatus,
};

const PAGE: u64 = 4096;

/// One deliberate fault.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    /// Counts a move to the tier the page is already in as a page moved.
    CountsSameTierMoves,
    /// Moves pages but reports none moved.
    NeverCountsPages,
    /// Swaps pairs but reports no pair exchanged.
    NeverCountsPairs,
    /// Counts an exchange of two pages in one tier as a pair exchanged (and still fails it).
    CountsPairsWithinOneTier,
    /// Adds the pages that failed to the pages moved.
    CountsFailedPagesAsMoved,
    /// Never says which asked-for mechanisms it did without.
    SaysNothingNotHonoured,
    /// Does not say it copied with one thread when asked for several.
    ForgetsCopyThreads,
    /// Does not say it ran fewer batches at once than asked.
    ForgetsConcurrentBatches,
    /// Loses an exchange's promotion when its two halves are separate batches in flight at once.
    LosesPromotionAcrossConcurrentBatches,
}

/// Two tiers; `fast` pages start in the fast tier (with room for one more), `slow` in the slow one.
struct Reference {
    info: MachineInfo,
    placement: Vec<TierId>,
    capacity: Vec<u64>,
    status: Vec<TierStatus>,
    fault: Fault,
}

impl Reference {
    fn new(fast: usize, slow: usize, fault: Fault) -> Self {
        let tier = |id: TierId, name: &str, kind, capacity_pages| Tier {
            id,
            name: name.into(),
            kind,
            capacity_pages,
            read_latency_ns: None,
            read_bandwidth_gb_s: None,
            write_bandwidth_gb_s: None,
        };
        let pages = fast + slow;
        let capacity = vec![fast as u64 + 1, pages as u64];
        let info = MachineInfo {
            name: "reference".into(),
            tiers: vec![
                tier(TierId::FAST, "dram", TierKind::Dram, Some(capacity[0])),
                tier(TierId::SLOW, "cxl", TierKind::Cxl, Some(capacity[1])),
            ],
            page_size: PageSize::Base4K,
            pages: pages as u64,
            threads: 1,
            scale: 1.0,
            mechanisms: Mechanisms::new(
                [
                    Mechanism::Exchange,
                    Mechanism::ConcurrentBatches,
                    Mechanism::TlbFlushPerPage,
                    Mechanism::RateLimit,
                ],
                1,
                8,
            ),
            programs: Vec::new(),
            move_unit_bytes: 0,
        };
        let mut placement = vec![TierId::FAST; fast];
        placement.extend(vec![TierId::SLOW; slow]);
        Reference { info, placement, capacity, status: Vec::new(), fault }
    }

    fn used(&self, t: TierId) -> u64 {
        self.placement.iter().filter(|&&p| p == t).count() as u64
    }
}

impl Machine for Reference {
    fn info(&self) -> &MachineInfo {
        &self.info
    }
    fn prepare(&mut self, _: &Requirements) -> Result<(), MachineError> {
        Ok(())
    }
    fn advance(&mut self, until_ns: u64) -> Progress {
        Progress::Finished { now_ns: until_ns }
    }
    fn observe(&mut self) -> Observations<'_> {
        self.status = (0..self.capacity.len())
            .map(|t| TierStatus {
                used_pages: self.used(TierId(t as u8)),
                capacity_pages: Some(self.capacity[t]),
                ..TierStatus::default()
            })
            .collect();
        Observations {
            now_ns: 0,
            previous_ns: 0,
            placement: &self.placement,
            tiers: &self.status,
            page_bits: None,
            samples: &[],
            future: None,
            hint_faults: &[],
            in_flight: &[],
        }
    }
    fn apply(&mut self, plan: &Plan) -> Applied {
        let (options, mut not_honoured) = self.info.mechanisms.honour(plan);
        match self.fault {
            Fault::SaysNothingNotHonoured => not_honoured.clear(),
            Fault::ForgetsCopyThreads => not_honoured.retain(|&m| m != Mechanism::CopyThreads),
            Fault::ForgetsConcurrentBatches => not_honoured.retain(|&m| m != Mechanism::ConcurrentBatches),
            _ => {}
        }
        let mut applied = Applied { not_honoured, ..Applied::default() };
        // One second since the previous plan.
        let mut budget = RateBudget::new(&options, 1e9);
        let checked = plan.check(&self.placement, self.capacity.len(), &mut budget, PAGE, &mut applied);
        let counts_pages = self.fault != Fault::NeverCountsPages;
        if self.fault == Fault::CountsSameTierMoves {
            let same = plan.moves.iter().filter(|m| self.placement.get(m.page as usize) == Some(&m.to));
            applied.pages_moved += same.count() as u64;
        }
        if self.fault == Fault::CountsPairsWithinOneTier {
            let tier = |p: u32| self.placement.get(p as usize).copied();
            let same = plan.exchanges.iter().filter(|e| tier(e.a).is_some() && tier(e.a) == tier(e.b));
            applied.pairs_exchanged += same.count() as u64;
        }
        for m in checked.moves {
            if self.used(m.to) >= self.capacity[m.to.index()] {
                applied.fail(MoveFailure::NoSpace);
                continue;
            }
            self.placement[m.page as usize] = m.to;
            applied.pages_moved += u64::from(counts_pages);
            applied.bytes_copied += PAGE;
        }
        for x in checked.exchanges {
            self.placement[x.down.page as usize] = x.down.to;
            let in_flight_apart = options.concurrent_batches > 1 && options.batch_pages == 1;
            if !(self.fault == Fault::LosesPromotionAcrossConcurrentBatches && in_flight_apart) {
                self.placement[x.up.page as usize] = x.up.to;
            }
            applied.pages_moved += 2 * u64::from(counts_pages);
            applied.pairs_exchanged += u64::from(self.fault != Fault::NeverCountsPairs);
            applied.bytes_copied += 2 * PAGE;
        }
        if self.fault == Fault::CountsFailedPagesAsMoved {
            applied.pages_moved += applied.failed_total();
        }
        applied
    }
}

fn failures(fast: usize, slow: usize, fault: Fault) -> Vec<String> {
    contract::check(&mut Reference::new(fast, slow, fault))
}

#[test]
fn a_machine_that_keeps_the_contract_passes_it() {
    for (fast, slow) in [(3, 3), (4, 4), (3, 9), (9, 3)] {
        assert_eq!(failures(fast, slow, Fault::None), Vec::<String>::new(), "{fast} fast, {slow} slow");
    }
}

#[test]
fn a_machine_with_fewer_than_three_pages_in_a_tier_is_refused_at_setup() {
    for (fast, slow) in [(2, 5), (5, 2), (2, 2), (0, 0)] {
        let f = failures(fast, slow, Fault::None);
        assert_eq!(f.len(), 1, "{fast} fast, {slow} slow: {f:?}");
        assert!(f[0].starts_with("setup:"), "{f:?}");
    }
}

/// Each fault is flagged by the check named for it.
#[test]
fn each_broken_machine_is_flagged_by_the_check_that_covers_its_fault() {
    let cases = [
        (Fault::CountsSameTierMoves, "same-tier move"),
        (Fault::NeverCountsPages, "one promotion"),
        (Fault::NeverCountsPages, "its demotion"),
        (Fault::NeverCountsPairs, "exchange"),
        (Fault::NeverCountsPairs, "exchange back"),
        (Fault::CountsPairsWithinOneTier, "exchange within one tier"),
        (Fault::CountsFailedPagesAsMoved, "invalid"),
        (Fault::CountsFailedPagesAsMoved, "rate limit"),
        (Fault::SaysNothingNotHonoured, "mechanisms not honoured"),
        (Fault::ForgetsCopyThreads, "mechanisms not honoured"),
        (Fault::ForgetsConcurrentBatches, "mechanisms not honoured"),
        (Fault::LosesPromotionAcrossConcurrentBatches, "exchange"),
        (Fault::LosesPromotionAcrossConcurrentBatches, "every page back where it was"),
    ];
    for (fault, check) in cases {
        let f = failures(4, 4, fault);
        assert!(
            f.iter().any(|line| line.starts_with(&format!("{check}:"))),
            "{fault:?} should fail \"{check}\"; the contract said {f:?}"
        );
    }
}
