//! Policies by name: what `terrace list policies` shows and `--policy NAME` builds.

use crate::baselines::{all_fast, all_slow, first_touch, interleave, memory_mode, oracle};
use crate::{age, ambix, hemem, hpwp, kernel_tiering, ping_pong};
use terrace_model::Policy;

/// A registered policy.
pub struct PolicySpec {
    pub name: &'static str,
    pub summary: &'static str,
    build: fn() -> Box<dyn Policy>,
}

/// Every policy Terrace has, in the order `list` shows them.
const POLICIES: &[PolicySpec] = &[
    PolicySpec {
        name: first_touch::NAME,
        summary: first_touch::SUMMARY,
        build: || Box::new(first_touch::FirstTouch),
    },
    PolicySpec {
        name: interleave::NAME,
        summary: interleave::SUMMARY,
        build: || Box::new(interleave::Interleave::even()),
    },
    PolicySpec {
        name: interleave::WEIGHTED_NAME,
        summary: interleave::WEIGHTED_SUMMARY,
        build: || Box::new(interleave::Interleave::by_bandwidth()),
    },
    PolicySpec { name: all_fast::NAME, summary: all_fast::SUMMARY, build: || Box::new(all_fast::AllFast) },
    PolicySpec { name: all_slow::NAME, summary: all_slow::SUMMARY, build: || Box::new(all_slow::AllSlow) },
    PolicySpec {
        name: memory_mode::NAME,
        summary: memory_mode::SUMMARY,
        build: || Box::new(memory_mode::MemoryModeCache),
    },
    PolicySpec {
        name: oracle::NAME,
        summary: oracle::SUMMARY,
        build: || Box::new(oracle::Oracle::default()),
    },
    PolicySpec { name: ambix::NAME, summary: ambix::SUMMARY, build: || Box::new(ambix::Ambix::new(true)) },
    PolicySpec {
        name: ambix::NOSWITCH_NAME,
        summary: ambix::NOSWITCH_SUMMARY,
        build: || Box::new(ambix::Ambix::new(false)),
    },
    PolicySpec { name: hemem::NAME, summary: hemem::SUMMARY, build: || Box::new(hemem::Hemem::default()) },
    PolicySpec { name: hpwp::NAME, summary: hpwp::SUMMARY, build: || Box::new(hpwp::Hpwp::default()) },
    PolicySpec {
        name: kernel_tiering::NAME,
        summary: kernel_tiering::SUMMARY,
        build: || Box::new(kernel_tiering::KernelTiering::default()),
    },
    PolicySpec { name: age::NAME, summary: age::SUMMARY, build: || Box::new(age::Age::default()) },
    PolicySpec { name: age::HUGE_NAME, summary: age::HUGE_SUMMARY, build: || Box::new(age::Age::huge()) },
    PolicySpec {
        name: ping_pong::NAME,
        summary: ping_pong::SUMMARY,
        build: || Box::new(ping_pong::PingPong::default()),
    },
    PolicySpec {
        name: ping_pong::WP_NAME,
        summary: ping_pong::WP_SUMMARY,
        build: || Box::new(ping_pong::PingPong { protected: true }),
    },
];

/// The policies `terrace compare` runs when none are named.
pub const DEFAULT_COMPARISON: &[&str] = &[
    first_touch::NAME,
    interleave::WEIGHTED_NAME,
    all_fast::NAME,
    all_slow::NAME,
    memory_mode::NAME,
    oracle::NAME,
    age::NAME,
    ambix::NAME,
    hemem::NAME,
    hpwp::NAME,
    kernel_tiering::NAME,
];

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy '{0}'; known: {known} (see `terrace list policies`)", known = POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", "))]
    Unknown(String),
}

pub fn list() -> &'static [PolicySpec] {
    POLICIES
}

/// Builds a policy by name.
pub fn build(name: &str) -> Result<Box<dyn Policy>, PolicyError> {
    POLICIES
        .iter()
        .find(|p| p.name == name)
        .map(|p| (p.build)())
        .ok_or_else(|| PolicyError::Unknown(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_policy_builds_under_its_own_name() {
        for spec in list() {
            assert_eq!(build(spec.name).unwrap().name(), spec.name);
        }
        for name in DEFAULT_COMPARISON {
            assert!(build(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn unknown_policy_names_the_known_ones() {
        let e = build("ambix2").err().unwrap().to_string();
        assert!(e.contains("first-touch") && e.contains("terrace list policies"), "{e}");
    }
}
