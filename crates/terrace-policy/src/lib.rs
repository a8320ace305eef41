//! Terrace's placement policies.
//!
//! Each policy is one module behind [`terrace_model::Policy`] and never knows which machine it
//! runs on. [`registry`] builds any of them from a spec (`NAME` or `NAME:key=value,...`) for the
//! command line; [`params`] declares what each one's parameters are. The baselines the seeds
//! compare against live in [`baselines`]; the seed systems get a module each, named after the
//! seed, as they are implemented. docs/policies.md maps every rule to its seed section.
#![forbid(unsafe_code)]

pub mod age;
pub mod ambix;
pub mod baselines;
pub mod hemem;
pub mod hpwp;
pub mod kernel_tiering;
pub mod mtier;
pub mod nimble;
pub mod object_tiering;
pub mod params;
pub mod ping_pong;
pub mod registry;
pub mod sampled_heat;

pub use params::{Kind, Param, Params, Value};
pub use registry::{
    build, canonical, find, list, split_list, sweep, Overrides, PolicyError, PolicySpec, Preset, Spec,
};
