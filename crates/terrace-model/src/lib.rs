//! The vocabulary every other Terrace crate speaks.
//!
//! A *policy* decides where pages should live; a *machine* runs a program and carries the policy's
//! decisions out. Terrace has two machines (the simulated one in `terrace-sim`, the live Linux one)
//! and many policies (`terrace-policy`); this crate is the contract between them and nothing else:
//! tiers and pages ([`tier`], [`page`]), memory accesses ([`access`]), what a policy may observe
//! ([`observe`]), what it answers ([`plan`]), the two traits ([`Policy`], [`Machine`]) and the loop
//! that joins them ([`drive`]). Nothing here does I/O, owns a thread, or knows about a particular
//! policy or machine.
#![forbid(unsafe_code)]

pub mod access;
pub mod contract;
pub mod drive;
pub mod machine;
pub mod mechanism;
pub mod mover;
pub mod observe;
pub mod page;
pub mod plan;
pub mod policy;
pub mod tier;

pub use access::{Access, AccessKind, ObjectEvent, ObjectEventKind};
pub use drive::{drive, drive_checked, drive_within, DriveError};
pub use machine::{Machine, MachineError, MachineInfo, ProgramInfo, Progress};
pub use mechanism::{Mechanism, Mechanisms};
pub use mover::Mover;
pub use observe::{
    FreeRoom, HintFault, Observations, PageCounts, Sample, TierStatus, TrackerKind, TrackerRequest,
    PAGE_DIRTY, PAGE_READ_ONLY, PAGE_REFERENCED,
};
pub use page::{PageIdx, PageSize, BASE_PAGES_PER_HUGE};
pub use plan::{
    Applied, CheckedExchange, CheckedPlan, Exchange, Move, MoveFailure, MoveOptions, ObjectMove, Plan,
    RateBudget, SiteAdvice, TlbFlush,
};
pub use policy::{InitialPlacement, KernelTieringSettings, MemoryMode, Policy, Requirements};
pub use tier::{Tier, TierId, TierKind};
