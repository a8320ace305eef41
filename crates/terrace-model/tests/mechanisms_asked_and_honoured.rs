//! Which mechanisms a plan asks for, how a machine honours them within its limits, how it says
//! what it lacks and why, and the huge-page mechanism a 2 MiB policy requires.

use terrace_model::{
    Exchange, Mechanism, Mechanisms, Move, MoveOptions, PageSize, Plan, Requirements, TierId, TlbFlush,
};

fn plan(exchanges: Vec<Exchange>, options: MoveOptions) -> Plan {
    Plan { moves: vec![Move { page: 0, to: TierId::FAST }], exchanges, options, ..Plan::none() }
}

#[test]
fn stock_options_ask_only_for_a_flush_per_page() {
    assert_eq!(Mechanisms::asked_by(&plan(vec![], MoveOptions::default())), vec![Mechanism::TlbFlushPerPage]);
}

#[test]
fn a_plan_asks_for_more_than_one_thread_or_batch_and_for_exchange_only_when_it_has_one() {
    let two = MoveOptions {
        copy_threads: 2,
        concurrent_batches: 2,
        tlb_flush: TlbFlush::PerBatch,
        ..MoveOptions::default()
    };
    assert_eq!(
        Mechanisms::asked_by(&plan(vec![Exchange { a: 1, b: 2 }], two)),
        vec![
            Mechanism::Exchange,
            Mechanism::CopyThreads,
            Mechanism::ConcurrentBatches,
            Mechanism::TlbFlushPerBatch
        ]
    );
    let one = MoveOptions { copy_threads: 1, concurrent_batches: 1, ..two };
    assert_eq!(Mechanisms::asked_by(&plan(vec![], one)), vec![Mechanism::TlbFlushPerBatch]);
}

#[test]
fn copy_threads_beyond_the_machine_s_limit_are_capped_and_said() {
    let m = Mechanisms::new([Mechanism::CopyThreads, Mechanism::TlbFlushPerPage], 2, 1);
    let asked = MoveOptions { copy_threads: 4, ..MoveOptions::default() };
    let (done, not) = m.honour(&plan(vec![], asked));
    assert_eq!(done.copy_threads, 2);
    assert_eq!(not, vec![Mechanism::CopyThreads]);
    // Within the limit: honoured as asked.
    let asked = MoveOptions { copy_threads: 2, ..MoveOptions::default() };
    let (done, not) = m.honour(&plan(vec![], asked));
    assert_eq!(done, asked);
    assert!(not.is_empty());
}

#[test]
fn concurrent_batches_beyond_the_machine_s_limit_are_capped_and_said() {
    let m = Mechanisms::new([Mechanism::ConcurrentBatches, Mechanism::TlbFlushPerPage], 1, 4);
    let asked = MoveOptions { concurrent_batches: 16, ..MoveOptions::default() };
    let (done, not) = m.honour(&plan(vec![], asked));
    assert_eq!(done.concurrent_batches, 4);
    assert_eq!(not, vec![Mechanism::ConcurrentBatches]);
}

#[test]
fn what_is_offered_is_listed_sorted_once() {
    let m = Mechanisms::new([Mechanism::RateLimit, Mechanism::Exchange, Mechanism::RateLimit], 1, 1);
    assert_eq!(m.offered(), &[Mechanism::Exchange, Mechanism::RateLimit]);
    assert_eq!(Mechanisms::default().offered(), &[Mechanism::TlbFlushPerPage]);
    assert_eq!(Mechanisms::all().offered(), &Mechanism::ALL);
}

#[test]
fn each_lacking_mechanism_keeps_its_own_reason() {
    let m = Mechanisms::all()
        .lacking(Mechanism::Exchange, "no paired batches")
        .lacking(Mechanism::CopyThreads, "one kernel thread")
        .lacking(Mechanism::Exchange, "still no paired batches");
    assert!(!m.offers(Mechanism::Exchange) && !m.offers(Mechanism::CopyThreads));
    assert!(m.offers(Mechanism::RateLimit));
    assert_eq!(m.why_not(Mechanism::Exchange), "still no paired batches");
    assert_eq!(m.why_not(Mechanism::CopyThreads), "one kernel thread");
    assert_eq!(m.why_not(Mechanism::RateLimit), "this machine does not offer it");
}

#[test]
fn a_huge_page_policy_requires_huge_page_moves_once() {
    let base = Requirements::default();
    assert!(base.required_mechanisms().is_empty());
    let huge = Requirements { page_size: PageSize::Huge2M, ..Requirements::default() };
    assert_eq!(huge.required_mechanisms(), vec![Mechanism::HugePageMoves]);
    let listed = Requirements {
        page_size: PageSize::Huge2M,
        mechanisms: vec![Mechanism::Exchange, Mechanism::HugePageMoves],
        ..Requirements::default()
    };
    assert_eq!(listed.required_mechanisms(), vec![Mechanism::Exchange, Mechanism::HugePageMoves]);
}

/// A plan that asks to split huge pages as they move, on a machine that moves them whole (the
/// live machine since Linux 4.14), is carried out with huge pages whole, and says so.
#[test]
fn a_split_not_offered_is_dropped_and_said() {
    let split = MoveOptions { split_huge: true, ..MoveOptions::default() };
    let asked = Mechanisms::asked_by(&plan(vec![], split));
    assert_eq!(asked, vec![Mechanism::TlbFlushPerPage, Mechanism::SplitHugePages]);
    let whole = Mechanisms::new([Mechanism::TlbFlushPerPage, Mechanism::HugePageMoves], 1, 1);
    let (o, not) = whole.honour(&plan(vec![], split));
    assert_eq!((o.split_huge, not), (false, vec![Mechanism::SplitHugePages]));
    let splits = Mechanisms::new([Mechanism::TlbFlushPerPage, Mechanism::SplitHugePages], 1, 1);
    let (o, not) = splits.honour(&plan(vec![], split));
    assert!(o.split_huge && not.is_empty());
}
