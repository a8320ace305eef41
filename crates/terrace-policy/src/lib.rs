//! Terrace's placement policies.
//!
//! Each policy is one module behind [`terrace_model::Policy`] and never knows which machine it
//! runs on. [`registry`] builds any of them by name for the command line. The baselines the seeds
//! compare against live in [`baselines`]; the seed systems get a module each, named after the
//! seed, as they are implemented. docs/policies.md maps every rule to its seed section.

pub mod age;
pub mod ambix;
pub mod baselines;
pub mod hemem;
pub mod hpwp;
pub mod kernel_tiering;
pub mod ping_pong;
pub mod registry;
pub mod sampled_heat;

pub use registry::{build, list, PolicyError, PolicySpec};
