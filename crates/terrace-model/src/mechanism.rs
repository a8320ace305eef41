//! The mechanisms a machine offers for carrying moves out, and how a plan's asks are matched
//! against them.
//!
//! Several seeds contribute ways of moving pages rather than ways of choosing them: Nimble's
//! multi-threaded copy, concurrent batches and exchange (§3.1), mtier's one TLB flush per batch
//! (§5.2.1), HeMem's and HPWP's write-protected copies (HPWP thesis §5.3), huge-page moves. They
//! are words of the plan ([`crate::MoveOptions`], [`crate::Plan::exchanges`]), and each machine
//! declares which it can honour ([`crate::MachineInfo::mechanisms`]). A policy that cannot work
//! without one names it in [`crate::Requirements::mechanisms`] and is refused at start on a
//! machine that lacks it; a plan that merely asks for one is carried out without it, and
//! [`crate::Applied::not_honoured`] says so.

use crate::{MoveOptions, Plan, TlbFlush};
use serde::{Deserialize, Serialize};

/// One way of carrying moves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Swap two pages' tiers without a free page in either (Nimble §3.1.4).
    Exchange,
    /// Several threads copying one page (Nimble §3.1.2).
    CopyThreads,
    /// Several batches in flight at once (Nimble §3.1.3).
    ConcurrentBatches,
    /// One TLB shootdown per page moved (stock Linux before 6.3).
    TlbFlushPerPage,
    /// One TLB shootdown per batch (mtier §5.2.1; Linux 6.3's batched flushing).
    TlbFlushPerBatch,
    /// A cap on bytes moved per second, the excess dropped and reported ([`crate::MoveFailure::RateLimited`]).
    RateLimit,
    /// Pages write-protected while they are copied, so a write waits for the copy (HPWP §5.3).
    WriteProtectedCopies,
    /// 2 MiB pages moved whole.
    HugePageMoves,
    /// 2 MiB pages split into their 512 base pages as they move, each base page migrated on its
    /// own: stock Linux before 4.14, the base-page configurations of Nimble's Fig. 12 (§4.3:
    /// "THPs are split before migration"). [`crate::MoveOptions::split_huge`].
    SplitHugePages,
    /// A promoted clean page keeps its slow copy, and goes back to it by a mapping switch
    /// (mtier §3.1, §5.2.2).
    Shadowing,
    /// New objects of an allocation site placed in an advised tier at allocation (object
    /// tiering §3.5): [`crate::Plan::site_advice`].
    SiteAdvice,
}

impl Mechanism {
    /// Every mechanism, in a stable order.
    pub const ALL: [Mechanism; 11] = [
        Mechanism::Exchange,
        Mechanism::CopyThreads,
        Mechanism::ConcurrentBatches,
        Mechanism::TlbFlushPerPage,
        Mechanism::TlbFlushPerBatch,
        Mechanism::RateLimit,
        Mechanism::WriteProtectedCopies,
        Mechanism::HugePageMoves,
        Mechanism::SplitHugePages,
        Mechanism::Shadowing,
        Mechanism::SiteAdvice,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Exchange => "exchange",
            Mechanism::CopyThreads => "multi-threaded copy",
            Mechanism::ConcurrentBatches => "concurrent batches",
            Mechanism::TlbFlushPerPage => "a TLB flush per page",
            Mechanism::TlbFlushPerBatch => "a TLB flush per batch",
            Mechanism::RateLimit => "a rate limit",
            Mechanism::WriteProtectedCopies => "write-protected copies",
            Mechanism::HugePageMoves => "huge-page moves",
            Mechanism::SplitHugePages => "huge pages split to move",
            Mechanism::Shadowing => "shadow copies",
            Mechanism::SiteAdvice => "allocation-site placement",
        }
    }
}

/// What a machine can do when it carries a plan out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mechanisms {
    /// The mechanisms offered, sorted.
    offered: Vec<Mechanism>,
    /// For each mechanism not offered, why not and what would give it (shown when a policy that
    /// needs it is refused).
    why_not: Vec<(Mechanism, String)>,
    /// Most threads one page copy may use (1: the kernel's single-threaded copy).
    pub max_copy_threads: u32,
    /// Most batches in flight at once.
    pub max_concurrent_batches: u32,
}

impl Default for Mechanisms {
    /// Stock move_pages: one batch at a time, one copy thread, a flush per page; nothing else.
    fn default() -> Self {
        Mechanisms::new([Mechanism::TlbFlushPerPage], 1, 1)
    }
}

impl Mechanisms {
    /// A set of mechanisms, with the limits of the two that have one.
    pub fn new(
        offered: impl IntoIterator<Item = Mechanism>,
        max_copy_threads: u32,
        max_concurrent_batches: u32,
    ) -> Self {
        let mut offered: Vec<Mechanism> = offered.into_iter().collect();
        offered.sort();
        offered.dedup();
        Mechanisms {
            offered,
            why_not: Vec::new(),
            max_copy_threads: max_copy_threads.max(1),
            max_concurrent_batches: max_concurrent_batches.max(1),
        }
    }

    /// Everything, without limits: what a model can charge for.
    pub fn all() -> Self {
        Mechanisms::new(Mechanism::ALL, u32::MAX, u32::MAX)
    }

    /// Says why `m` is not offered (and stops offering it).
    pub fn lacking(mut self, m: Mechanism, why: impl Into<String>) -> Self {
        self.offered.retain(|&o| o != m);
        self.why_not.retain(|(w, _)| *w != m);
        self.why_not.push((m, why.into()));
        self
    }

    pub fn offers(&self, m: Mechanism) -> bool {
        self.offered.binary_search(&m).is_ok()
    }

    pub fn offered(&self) -> &[Mechanism] {
        &self.offered
    }

    /// Why `m` is not offered, as the machine put it.
    pub fn why_not(&self, m: Mechanism) -> String {
        self.why_not
            .iter()
            .find(|(w, _)| *w == m)
            .map_or_else(|| "this machine does not offer it".to_string(), |(_, why)| why.clone())
    }

    /// The first of `required` this machine lacks.
    pub fn first_missing(&self, required: &[Mechanism]) -> Option<Mechanism> {
        required.iter().copied().find(|&m| !self.offers(m))
    }

    /// The mechanisms `plan` asks for.
    pub fn asked_by(plan: &Plan) -> Vec<Mechanism> {
        let o = &plan.options;
        let mut asked = Vec::new();
        if !plan.exchanges.is_empty() {
            asked.push(Mechanism::Exchange);
        }
        if o.copy_threads > 1 {
            asked.push(Mechanism::CopyThreads);
        }
        if o.concurrent_batches > 1 {
            asked.push(Mechanism::ConcurrentBatches);
        }
        asked.push(match o.tlb_flush {
            TlbFlush::PerPage => Mechanism::TlbFlushPerPage,
            TlbFlush::PerBatch => Mechanism::TlbFlushPerBatch,
        });
        if o.rate_limit_mb_s.is_some() {
            asked.push(Mechanism::RateLimit);
        }
        if o.protected_copies {
            asked.push(Mechanism::WriteProtectedCopies);
        }
        if o.shadow {
            asked.push(Mechanism::Shadowing);
        }
        if o.split_huge {
            asked.push(Mechanism::SplitHugePages);
        }
        if !plan.site_advice.is_empty() {
            asked.push(Mechanism::SiteAdvice);
        }
        asked
    }

    /// The options this machine carries `plan` out with: what it cannot honour is dropped
    /// (copy threads and batches capped at its limits, the flush it does instead), and the
    /// mechanisms asked for but not honoured are listed. Exchanges are not rewritten here: a
    /// machine without exchange reports each pair as [`crate::MoveFailure::Invalid`].
    pub fn honour(&self, plan: &Plan) -> (MoveOptions, Vec<Mechanism>) {
        let mut o = plan.options;
        let mut not_honoured = Vec::new();
        for m in Self::asked_by(plan) {
            let ok = match m {
                Mechanism::CopyThreads => self.offers(m) && o.copy_threads <= self.max_copy_threads,
                Mechanism::ConcurrentBatches => {
                    self.offers(m) && o.concurrent_batches <= self.max_concurrent_batches
                }
                _ => self.offers(m),
            };
            if ok {
                continue;
            }
            not_honoured.push(m);
            match m {
                Mechanism::CopyThreads => {
                    o.copy_threads = if self.offers(m) { self.max_copy_threads } else { 1 }
                }
                Mechanism::ConcurrentBatches => {
                    o.concurrent_batches = if self.offers(m) { self.max_concurrent_batches } else { 1 }
                }
                Mechanism::TlbFlushPerPage => o.tlb_flush = TlbFlush::PerBatch,
                Mechanism::TlbFlushPerBatch => o.tlb_flush = TlbFlush::PerPage,
                Mechanism::RateLimit => o.rate_limit_mb_s = None,
                Mechanism::WriteProtectedCopies => o.protected_copies = false,
                Mechanism::Shadowing => o.shadow = false,
                // Huge pages then move whole, as the machine moves them.
                Mechanism::SplitHugePages => o.split_huge = false,
                // A machine without it leaves the advice unapplied (it is no move option).
                Mechanism::Exchange | Mechanism::HugePageMoves | Mechanism::SiteAdvice => {}
            }
        }
        (o, not_honoured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Exchange, Move, TierId};

    fn plan(options: MoveOptions) -> Plan {
        Plan {
            moves: vec![Move { page: 0, to: TierId::FAST }],
            exchanges: vec![Exchange { a: 1, b: 2 }],
            options,
            ..Plan::none()
        }
    }

    #[test]
    fn a_machine_honours_what_it_offers_and_says_what_it_did_not() {
        let live = Mechanisms::new(
            [
                Mechanism::Exchange,
                Mechanism::ConcurrentBatches,
                Mechanism::TlbFlushPerBatch,
                Mechanism::RateLimit,
            ],
            1,
            8,
        );
        let asked = MoveOptions {
            copy_threads: 4,
            concurrent_batches: 16,
            tlb_flush: TlbFlush::PerPage,
            rate_limit_mb_s: Some(100.0),
            protected_copies: true,
            ..MoveOptions::default()
        };
        let (done, not) = live.honour(&plan(asked));
        assert_eq!(
            not,
            vec![
                Mechanism::CopyThreads,
                Mechanism::ConcurrentBatches,
                Mechanism::TlbFlushPerPage,
                Mechanism::WriteProtectedCopies
            ]
        );
        assert_eq!(done.copy_threads, 1);
        assert_eq!(done.concurrent_batches, 8);
        assert_eq!(done.tlb_flush, TlbFlush::PerBatch);
        assert_eq!(done.rate_limit_mb_s, Some(100.0));
        assert!(!done.protected_copies);
        // Everything offered without limits: nothing dropped, options unchanged.
        let (done, not) = Mechanisms::all().honour(&plan(asked));
        assert!(not.is_empty());
        assert_eq!(done, asked);
    }

    #[test]
    fn a_required_mechanism_the_machine_lacks_is_named() {
        let m = Mechanisms::default().lacking(Mechanism::Exchange, "no paired batches here");
        assert_eq!(m.first_missing(&[Mechanism::TlbFlushPerPage]), None);
        assert_eq!(
            m.first_missing(&[Mechanism::TlbFlushPerPage, Mechanism::Exchange]),
            Some(Mechanism::Exchange)
        );
        assert_eq!(m.why_not(Mechanism::Exchange), "no paired batches here");
        let m = m.lacking(Mechanism::TlbFlushPerPage, "6.3 batches flushes");
        assert!(!m.offers(Mechanism::TlbFlushPerPage));
    }
}
