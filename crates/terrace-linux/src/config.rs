//! Terrace's configuration file for the live machine (TOML), validated on load.
//!
//! ```toml
//! [tiers]              # optional: which NUMA nodes are fast and slow (default: detected)
//! fast_nodes = [0]
//! slow_nodes = [1]
//! fast_limit_mib = 512   # optional: the most of the fast tier a managed program may use
//!
//! [trackers]
//! referenced = "auto"             # auto | idle-page | damon | soft-dirty: the referenced bit's source
//! fault_sample = 256              # pages (or 2 MiB ranges) the fault sampler protects per epoch
//!
//! [daemon]
//! socket = "/run/terrace.sock"    # where `terrace bind` finds the daemon
//! metrics = "127.0.0.1:9464"      # Prometheus text endpoint (localhost only)
//! dry_run = false                 # track and decide, move nothing
//! policy = "age"                  # the policy for processes bound without one
//! ```

use crate::topology::TierOverride;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub tiers: TierOverride,
    #[serde(default)]
    pub trackers: TrackerConfig,
    #[serde(default)]
    pub daemon: DaemonConfig,
}

/// Which kernel interfaces the trackers use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackerConfig {
    /// Where the page-table bits' *referenced* bit comes from.
    #[serde(default)]
    pub referenced: ReferencedSource,
    /// How many pages (2 MiB ranges for a 2 MiB policy) the fault sampler write-protects per
    /// epoch (one policy tick): each costs the program at most one fault per epoch.
    #[serde(default = "default_fault_sample")]
    pub fault_sample: usize,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig { referenced: ReferencedSource::default(), fault_sample: default_fault_sample() }
    }
}

/// 256 a tick: at hemem's 10 ms tick at most 25,600 faults a second, a few percent of one core
/// at the few microseconds a fault round trip costs natively.
fn default_fault_sample() -> usize {
    256
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReferencedSource {
    /// The idle-page bitmap where the kernel has it, else DAMON, else soft-dirty.
    #[default]
    Auto,
    /// The idle-page bitmap (CONFIG_IDLE_PAGE_TRACKING, root): the exact referenced bit.
    IdlePage,
    Damon,
    /// Soft-dirty only: written pages count as referenced, read-only pages look idle.
    SoftDirty,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    /// Address of the metrics endpoint; must be a loopback address.
    pub metrics: Option<String>,
    pub dry_run: bool,
    pub policy: String,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: PathBuf::from("/run/terrace.sock"),
            metrics: None,
            dry_run: false,
            policy: "age".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config {path} is invalid: {message}")]
    Invalid { path: String, message: String },
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: p.clone(), source })?;
        Config::parse(&p, &text)
    }

    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_string(), message };
        let c: Config = toml::from_str(text).map_err(|e| invalid(e.message().replace('\n', " ")))?;
        if let (Some(f), Some(s)) = (&c.tiers.fast_nodes, &c.tiers.slow_nodes) {
            if let Some(n) = f.iter().find(|n| s.contains(n)) {
                return Err(invalid(format!("node {n} is listed as both fast and slow")));
            }
        }
        if c.tiers.fast_limit_mib == Some(0) {
            return Err(invalid(
                "tiers.fast_limit_mib = 0 leaves no fast memory; give at least 1 (MiB)".into(),
            ));
        }
        if !(1..=1 << 20).contains(&c.trackers.fault_sample) {
            return Err(invalid(format!(
                "trackers.fault_sample = {} is out of range; give 1 to 1048576 pages per epoch",
                c.trackers.fault_sample
            )));
        }
        if let Some(addr) = &c.daemon.metrics {
            let sock: std::net::SocketAddr =
                addr.parse().map_err(|_| invalid(format!("metrics address '{addr}' is not IP:PORT")))?;
            if !sock.ip().is_loopback() {
                return Err(invalid(format!(
                    "metrics address '{addr}' is not on loopback; use 127.0.0.1:PORT"
                )));
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_config_parses() {
        let c = Config::parse(
            "t",
            "[tiers]\nfast_nodes = [0]\nslow_nodes = [1, 2]\n[daemon]\nsocket = \"/tmp/t.sock\"\nmetrics = \"127.0.0.1:9464\"\ndry_run = true\npolicy = \"age\"\n",
        )
        .unwrap();
        assert_eq!(c.tiers.slow_nodes, Some(vec![1, 2]));
        assert!(c.daemon.dry_run);
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let e = Config::parse("t", "[tiers]\nfast_nodes = [0]\nslow_nodes = [0]\n").unwrap_err().to_string();
        assert!(e.contains("both fast and slow"), "{e}");
        let e = Config::parse("t", "[tires]\n").unwrap_err().to_string();
        assert!(e.contains("tires"), "{e}");
        let e = Config::parse(
            "t",
            "[daemon]\nsocket=\"/x\"\nmetrics=\"0.0.0.0:1\"\ndry_run=false\npolicy=\"age\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("loopback"), "{e}");
        let e = Config::parse("t", "[trackers]\nfault_sample = 0\n").unwrap_err().to_string();
        assert!(e.contains("fault_sample"), "{e}");
        assert_eq!(Config::parse("t", "[trackers]\nfault_sample = 64\n").unwrap().trackers.fault_sample, 64);
        assert_eq!(Config::default().trackers.fault_sample, 256);
        let c = Config::parse("t", "[trackers]\nreferenced = \"idle-page\"\n").unwrap();
        assert_eq!(c.trackers.referenced, ReferencedSource::IdlePage);
        let e = Config::parse("t", "[tiers]\nfast_limit_mib = 0\n").unwrap_err().to_string();
        assert!(e.contains("fast_limit_mib"), "{e}");
        assert_eq!(
            Config::parse("t", "[tiers]\nfast_limit_mib = 6\n").unwrap().tiers.fast_limit_mib,
            Some(6)
        );
    }
}
