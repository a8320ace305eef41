//! What a policy answers: pages to move, pages to swap, and how to move them.

use crate::{PageIdx, TierId};
use serde::{Deserialize, Serialize};

/// Move one page to a tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub page: PageIdx,
    pub to: TierId,
}

/// Swap the tiers of two pages (Nimble's symmetric exchange, §3.1.4): neither tier's
/// occupancy changes, so a full fast tier can still take a hot page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub a: PageIdx,
    pub b: PageIdx,
}

/// When translations of moved pages are flushed from other cores' TLBs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlbFlush {
    /// One shootdown per page, as stock Linux migration does (mtier §5.2.1 "heavy").
    #[default]
    PerPage,
    /// One shootdown per batch (mtier's epoch flush; Linux 6.3's batched flushing).
    PerBatch,
}

/// How the machine should carry a plan out (the mechanisms of Nimble §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoveOptions {
    /// Pages per move_pages call.
    pub batch_pages: u32,
    /// Threads copying one batch (Nimble §3.1.2).
    pub copy_threads: u32,
    /// Batches in flight at once (Nimble §3.1.3).
    pub concurrent_batches: u32,
    /// Cap on bytes moved per second of machine time, in MB/s (10^6 bytes).
    pub rate_limit_mb_s: Option<f64>,
    pub tlb_flush: TlbFlush,
    /// Write-protect each page while it is copied, so writes wait for the copy instead of racing
    /// it (HeMem's and HPWP's migrator, HPWP thesis §5.3). The live machine does it with
    /// userfaultfd where it has the fault sampler's descriptor; the simulator does not model the
    /// wait (docs/model.md §4).
    #[serde(default)]
    pub write_protect_copies: bool,
}

impl Default for MoveOptions {
    /// Stock Linux move_pages: one thread, one batch at a time, a shootdown per page.
    fn default() -> Self {
        MoveOptions {
            batch_pages: 512,
            copy_threads: 1,
            concurrent_batches: 1,
            rate_limit_mb_s: None,
            tlb_flush: TlbFlush::PerPage,
            write_protect_copies: false,
        }
    }
}

/// A policy's answer at one tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub moves: Vec<Move>,
    pub exchanges: Vec<Exchange>,
    pub options: MoveOptions,
    /// Why these pages move, in a few words (logged once per batch on the live machine).
    pub reason: String,
}

impl Plan {
    pub fn none() -> Self {
        Plan::default()
    }
    pub fn is_empty(&self) -> bool {
        self.moves.is_empty() && self.exchanges.is_empty()
    }
}

/// Why a page did not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveFailure {
    /// The target tier is full (ENOMEM).
    NoSpace,
    /// The page is not present or was never touched (ENOENT / EFAULT).
    NotPresent,
    /// The page is locked or under writeback (EBUSY).
    Busy,
    /// The target tier does not exist, or the page index is out of range (EINVAL).
    Invalid,
    /// Not permitted (EACCES / EPERM).
    Permission,
    /// Cut by the plan's rate limit; the policy may ask again.
    RateLimited,
    /// Reported moved, but found on another node than asked when checked afterwards.
    Misplaced,
}

/// What a machine reports after carrying out a plan: what really moved and what it cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    pub pages_moved: u64,
    /// Pairs swapped by exchanges (each pair moves two pages).
    pub pairs_exchanged: u64,
    pub bytes_copied: u64,
    /// Machine time the mover spent, in nanoseconds.
    pub time_ns: u64,
    pub tlb_shootdowns: u64,
    /// Program time the moves cost, as far as the machine can tell (shootdowns stall every
    /// program thread); 0 where it cannot tell.
    pub program_stall_ns: u64,
    /// Pages that did not move, by reason.
    pub failed: Vec<(MoveFailure, u64)>,
}

impl Applied {
    pub fn failed_total(&self) -> u64 {
        self.failed.iter().map(|(_, n)| n).sum()
    }
    pub(crate) fn count_failure(&mut self, why: MoveFailure) {
        match self.failed.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => self.failed.push((why, 1)),
        }
    }
    /// Records one page that did not move.
    pub fn fail(&mut self, why: MoveFailure) {
        self.count_failure(why)
    }
}
