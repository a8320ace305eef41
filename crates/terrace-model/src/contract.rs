//! The machine contract as checks: the same plans sent to any [`Machine`], with the same
//! expected accounting ([`Applied`]), placement afterwards and refusals. The simulated machine's
//! tests run them on a simulated program; the live machine's run them in the two-node guest on
//! a real one (tests/vm). A machine that passes them means by a plan what every other does.
//!
//! The checks need a prepared machine whose program has touched at least three pages in each
//! of the two fastest tiers, with room for one more page in the fastest; they read where pages
//! are from [`Machine::observe`] and put every page back where it was.
//!
//! A machine may carry a move out after `apply` returns (the simulated one: a copy takes machine
//! time, docs/model.md §4). Then `apply` says how many pages are still in flight, the
//! observations list them, a move of one of them fails `Busy`, and the checks let the program
//! run on for the mover's time before they look where pages are; such a machine's program must
//! still be running. On a machine whose moves are done when `apply` returns (the live one), no
//! page is ever in flight and nothing waits.

use crate::{Applied, Exchange, Machine, Mechanism, Move, MoveFailure, MoveOptions, PageIdx, Plan, TierId};

/// One check's failure: which check, and what it saw.
pub type Failure = String;

fn placement(m: &mut dyn Machine) -> Vec<TierId> {
    m.observe().placement.to_vec()
}

fn failed(a: &Applied, why: MoveFailure) -> u64 {
    a.failed.iter().filter(|(w, _)| *w == why).map(|(_, n)| n).sum()
}

fn plan(moves: Vec<Move>, exchanges: Vec<Exchange>, options: MoveOptions) -> Plan {
    Plan { moves, exchanges, options, reason: "contract".into(), ..Plan::none() }
}

/// Applies `p` and waits for what the mover took on to land: nothing to wait for where moves
/// are done when `apply` returns; elsewhere the program runs on for the mover's time.
fn apply(m: &mut dyn Machine, p: &Plan) -> Applied {
    let a = m.apply(p);
    if a.pages_in_flight > 0 {
        let now = m.observe().now_ns;
        m.advance(now.saturating_add(a.time_ns).saturating_add(1));
    }
    a
}

/// Runs every check; returns the failures (empty: the machine keeps the contract).
pub fn check(m: &mut dyn Machine) -> Vec<Failure> {
    let mut out = Vec::new();
    let where_ = placement(m);
    let fast: Vec<PageIdx> =
        (0..where_.len() as PageIdx).filter(|&p| where_[p as usize] == TierId::FAST).collect();
    let slow: Vec<PageIdx> =
        (0..where_.len() as PageIdx).filter(|&p| where_[p as usize] == TierId::SLOW).collect();
    if fast.len() < 3 || slow.len() < 3 {
        return vec![format!(
            "setup: the contract needs 3 pages in each tier; the machine has {} fast and {} slow",
            fast.len(),
            slow.len()
        )];
    }
    let pages = where_.len() as PageIdx;
    let mut expect = |what: &str, ok: bool, detail: String| {
        if !ok {
            out.push(format!("{what}: {detail}"));
        }
    };

    // 1. A move to the tier a page is in is nothing to do: not a move, not a failure.
    let a = apply(m, &plan(vec![Move { page: fast[0], to: TierId::FAST }], vec![], MoveOptions::default()));
    expect("same-tier move", a.pages_moved == 0 && a.failed_total() == 0, format!("{a:?}"));

    // 2. One promotion and its demotion back: counted, and placed. Where the copy outlasts
    //    `apply`, the page is meanwhile in its old tier, listed in flight, and cannot be moved.
    let up = Move { page: slow[0], to: TierId::FAST };
    let a = m.apply(&plan(vec![up], vec![], MoveOptions::default()));
    if a.pages_in_flight > 0 {
        let (listed, old_tier) = {
            let o = m.observe();
            (o.in_flight.contains(&up), o.placement[slow[0] as usize])
        };
        let again =
            m.apply(&plan(vec![Move { page: slow[0], to: TierId::SLOW }], vec![], MoveOptions::default()));
        expect(
            "a page in flight",
            a.pages_in_flight == 1
                && listed
                && old_tier == TierId::SLOW
                && again.pages_moved == 0
                && failed(&again, MoveFailure::Busy) == 1,
            format!(
                "{a:?}; listed in flight: {listed}; in {old_tier:?} meanwhile; moving it again: {again:?}"
            ),
        );
        let now = m.observe().now_ns;
        m.advance(now.saturating_add(a.time_ns).saturating_add(1));
    }
    let after = placement(m);
    expect(
        "one promotion",
        a.pages_moved == 1 && a.failed_total() == 0 && after[slow[0] as usize] == TierId::FAST,
        format!("{a:?}, page now in {:?}", after[slow[0] as usize]),
    );
    let a = apply(m, &plan(vec![Move { page: slow[0], to: TierId::SLOW }], vec![], MoveOptions::default()));
    let after = placement(m);
    expect(
        "its demotion",
        a.pages_moved == 1 && after[slow[0] as usize] == TierId::SLOW,
        format!("{a:?}, page now in {:?}", after[slow[0] as usize]),
    );

    // 3. Exchange: counted only where both halves happened; a pair with a page that does not
    //    exist is Invalid and moves nothing; the good pair swaps, with several batches in flight
    //    (its demotion still before its promotion).
    let options = MoveOptions { concurrent_batches: 4, batch_pages: 1, ..MoveOptions::default() };
    let a = apply(
        m,
        &plan(
            vec![],
            vec![Exchange { a: fast[1], b: slow[1] }, Exchange { a: fast[2], b: pages + 5 }],
            options,
        ),
    );
    let after = placement(m);
    expect(
        "exchange",
        a.pairs_exchanged == 1
            && a.pages_moved == 2
            && failed(&a, MoveFailure::Invalid) == 1
            && after[fast[1] as usize] == TierId::SLOW
            && after[slow[1] as usize] == TierId::FAST
            && after[fast[2] as usize] == TierId::FAST,
        format!("{a:?}"),
    );
    // And back, so every page is where it started.
    let a = apply(m, &plan(vec![], vec![Exchange { a: fast[1], b: slow[1] }], MoveOptions::default()));
    expect("exchange back", a.pairs_exchanged == 1, format!("{a:?}"));
    let a = apply(m, &plan(vec![], vec![Exchange { a: fast[0], b: fast[2] }], MoveOptions::default()));
    expect(
        "exchange within one tier",
        a.pairs_exchanged == 0 && a.pages_moved == 0 && failed(&a, MoveFailure::Invalid) == 1,
        format!("{a:?}"),
    );

    // 4. Pages and tiers that do not exist are Invalid.
    let a = apply(
        m,
        &plan(
            vec![Move { page: slow[2], to: TierId(7) }, Move { page: pages + 3, to: TierId::FAST }],
            vec![],
            MoveOptions::default(),
        ),
    );
    expect("invalid", a.pages_moved == 0 && failed(&a, MoveFailure::Invalid) == 2, format!("{a:?}"));

    // 5. A rate limit drops what exceeds it, as RateLimited, and moves nothing of it.
    let tiny = MoveOptions { rate_limit_mb_s: Some(1e-9), ..MoveOptions::default() };
    let a = apply(
        m,
        &plan(
            vec![Move { page: slow[2], to: TierId::FAST }],
            vec![Exchange { a: fast[1], b: slow[1] }],
            tiny,
        ),
    );
    let after = placement(m);
    expect(
        "rate limit",
        a.pages_moved == 0
            && failed(&a, MoveFailure::RateLimited) == 2
            && after[slow[2] as usize] == TierId::SLOW
            && after[fast[1] as usize] == TierId::FAST,
        format!("{a:?}"),
    );

    // 6. What the plan asks and the machine does not offer is carried out without, and said:
    //    expected from the machine's declaration by the rule itself (4 copy threads need the
    //    mechanism and a limit of at least 4; 64 batches in flight a limit of 64; the default
    //    flush per page the mechanism), not from `Mechanisms::honour`, which the machine uses.
    let asked = plan(
        vec![Move { page: slow[2], to: TierId::FAST }],
        vec![],
        MoveOptions { copy_threads: 4, concurrent_batches: 64, ..MoveOptions::default() },
    );
    let declared = m.info().mechanisms.clone();
    let mut expected = Vec::new();
    if !(declared.offers(Mechanism::CopyThreads) && declared.max_copy_threads >= 4) {
        expected.push(Mechanism::CopyThreads);
    }
    if !(declared.offers(Mechanism::ConcurrentBatches) && declared.max_concurrent_batches >= 64) {
        expected.push(Mechanism::ConcurrentBatches);
    }
    if !declared.offers(Mechanism::TlbFlushPerPage) {
        expected.push(Mechanism::TlbFlushPerPage);
    }
    let a = apply(m, &asked);
    let mut said = a.not_honoured.clone();
    said.sort();
    expected.sort();
    expect(
        "mechanisms not honoured",
        said == expected && a.pages_moved == 1,
        format!("said {:?}, declared {declared:?}, expected {expected:?}", a.not_honoured),
    );
    apply(m, &plan(vec![Move { page: slow[2], to: TierId::SLOW }], vec![], MoveOptions::default()));

    let end = placement(m);
    expect("every page back where it was", end == where_, "placement differs from the start".into());
    out
}
