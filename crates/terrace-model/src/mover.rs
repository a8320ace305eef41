//! Who carries a plan's copies out, and whom they hold up: the mover a policy declares in
//! [`crate::Requirements::mover`].
//!
//! The seeds' machines move pages in different threads, and that decides who waits: Ambix's
//! Control calls move_pages once per process and waits for it (Ambix thesis §4.4), so its next
//! period starts late; the kernel's NUMA balancing promotes a page in the program thread that
//! took the hint fault, which waits for the copy; kswapd demotes in a kernel thread of its own;
//! HeMem's and HPWP's migrator copies beside the program with DMA or copy threads (HPWP thesis
//! §5.3). A page changes tier when its copy completes, and until then the program finds it in its
//! old tier (docs/model.md §4).
//!
//! The live machine's move_pages returns when the copies are done, whatever the declaration: on
//! it a page is in its new tier when `apply` returns (docs/live.md, "The migrator"). The
//! simulated machine carries each mover out as declared (docs/model.md §4, "Movers").

use serde::{Deserialize, Serialize};

/// A mover: the thread (or engine) that copies a plan's pages, and so who waits for the copies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mover {
    /// Synchronous, in the policy's own thread (Ambix's Control calling move_pages and waiting,
    /// Ambix thesis §4.4): the copies run beside the program, one after another, and the policy
    /// is not asked again until the last one is done. No queue bound: the policy waits instead.
    #[default]
    PolicyThread,
    /// Synchronous, in the program thread that faulted on the page (Linux NUMA balancing's
    /// promotion, `migrate_misplaced_folio` in the fault path): that thread copies its pages and
    /// the program waits for it; `n` faulting threads copy in parallel.
    FaultingThread,
    /// Asynchronous, a kernel thread with its own budget (kswapd's demotion): it copies its queue
    /// one page after another beside the program; a plan's pages beyond `queue_pages` queued are
    /// refused ([`crate::MoveFailure::QueueFull`]) and wait for the next round.
    KernelThread { queue_pages: u64 },
    /// Asynchronous, a copy engine or mover thread of the policy's own beside the program
    /// (HeMem's and HPWP's DMA or copy threads, HPWP thesis §5.3; memtierd's mover): as
    /// [`Mover::KernelThread`], a queue of at most `queue_pages` pages copied one after another.
    CopyEngine { queue_pages: u64 },
}

impl Mover {
    /// The most pages it holds queued or being copied; `None` for a synchronous mover, whose
    /// caller waits instead.
    pub fn queue_pages(self) -> Option<u64> {
        match self {
            Mover::PolicyThread | Mover::FaultingThread => None,
            Mover::KernelThread { queue_pages } | Mover::CopyEngine { queue_pages } => {
                Some(queue_pages.max(1))
            }
        }
    }

    /// A short description, for logs and tables.
    pub fn describe(self) -> String {
        match self {
            Mover::PolicyThread => "the policy's thread (synchronous)".into(),
            Mover::FaultingThread => "the faulting program thread (synchronous)".into(),
            Mover::KernelThread { queue_pages } => format!("a kernel thread, queue of {queue_pages} pages"),
            Mover::CopyEngine { queue_pages } => format!("a copy engine, queue of {queue_pages} pages"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asynchronous_movers_have_a_queue() {
        assert_eq!(Mover::PolicyThread.queue_pages(), None);
        assert_eq!(Mover::FaultingThread.queue_pages(), None);
        assert_eq!(Mover::KernelThread { queue_pages: 7 }.queue_pages(), Some(7));
        assert_eq!(
            Mover::CopyEngine { queue_pages: 0 }.queue_pages(),
            Some(1),
            "a queue holds one page at least"
        );
        assert_eq!(Mover::default(), Mover::PolicyThread);
    }
}
