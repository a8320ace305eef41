//! Terrace's configuration file for the live machine (TOML), validated on load. Every key is
//! listed, with its default, in docs/live.md ("Configuration"); examples/terrace.toml has them all.
//!
//! ```toml
//! [tiers]              # optional: which NUMA nodes are fast and slow (default: detected)
//! fast_nodes = [0]
//! slow_nodes = [1]
//! fast_limit_mib = 512   # optional: the most of the fast tier a managed program may use
//!
//! [trackers]
//! referenced = "auto"             # auto | idle-page | damon | soft-dirty: the referenced bit's source
//! sampling = "auto"               # auto | perf | faults: the access sampler
//! fault_sample = 256              # pages (or 2 MiB ranges) the fault sampler protects per epoch
//! fault_epoch_ms = 250            # how often it draws a new sample
//!
//! [daemon]                        # optional; when present, every key but metrics is required
//! socket = "/run/terrace.sock"    # where `terrace bind` finds the daemon
//! metrics = "127.0.0.1:9464"      # Prometheus text endpoint (localhost only)
//! dry_run = false                 # track and decide, move nothing
//! policy = "age"                  # the policy for processes bound without one
//!
//! [policy.hpwp]                   # optional, one per policy: its parameters wherever it is built
//! hot_threshold = 8
//! ```

use crate::topology::{format_list, TierOverride, Topology};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default, deserialize_with = "tiers_strictly")]
    pub tiers: TierOverride,
    #[serde(default)]
    pub trackers: TrackerConfig,
    /// Absent: the defaults (`terrace run` needs no daemon section, and `terrace daemon` without
    /// one says where it listens). Present: see [`DaemonConfig`].
    #[serde(default)]
    pub daemon: DaemonConfig,
    /// `[policy.NAME]` tables: parameters of policy (or preset) NAME, used wherever `terrace run`
    /// or the daemon builds it (`[policy.hpwp]` `hot_threshold = 8`). This crate knows no
    /// policy, so the names, keys and values are checked against the registry by the `terrace`
    /// command as it loads the config; here only their shape (scalars in tables).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy: BTreeMap<String, BTreeMap<String, ParamValue>>,
}

/// A policy parameter's value as TOML gives it: a number, `true`/`false`, or a string (`"10ms"`,
/// `"2m"`). It prints as a policy spec writes it (`8`, `0.5`, `true`, `10ms`).
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    Integer(i64),
    Float(f64),
    Boolean(bool),
    String(String),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Integer(n) => write!(f, "{n}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Boolean(b) => write!(f, "{b}"),
            ParamValue::String(s) => f.write_str(s),
        }
    }
}

impl Serialize for ParamValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ParamValue::Integer(n) => s.serialize_i64(*n),
            ParamValue::Float(x) => s.serialize_f64(*x),
            ParamValue::Boolean(b) => s.serialize_bool(*b),
            ParamValue::String(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ParamValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a policy parameter's value: a number, true or false, or a string such as \"10ms\"",
                )
            }
            fn visit_bool<E>(self, v: bool) -> Result<ParamValue, E> {
                Ok(ParamValue::Boolean(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<ParamValue, E> {
                Ok(ParamValue::Integer(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ParamValue, E> {
                i64::try_from(v).map(ParamValue::Integer).map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_f64<E>(self, v: f64) -> Result<ParamValue, E> {
                Ok(ParamValue::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<ParamValue, E> {
                Ok(ParamValue::String(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// The `[tiers]` keys as the config spells them, so that a misspelt key (`fast_node`) is refused:
/// [`TierOverride`] itself, shared with the topology code, accepts unknown keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TierKeys {
    fast_nodes: Option<Vec<u32>>,
    slow_nodes: Option<Vec<u32>>,
    fast_limit_mib: Option<u64>,
}

fn tiers_strictly<'de, D: Deserializer<'de>>(d: D) -> Result<TierOverride, D::Error> {
    let TierKeys { fast_nodes, slow_nodes, fast_limit_mib } = TierKeys::deserialize(d)?;
    Ok(TierOverride { fast_nodes, slow_nodes, fast_limit_mib })
}

/// Which kernel interfaces the trackers use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackerConfig {
    /// Where the page-table bits' *referenced* bit comes from.
    #[serde(default)]
    pub referenced: ReferencedSource,
    /// Which sampler serves a policy that samples accesses.
    #[serde(default)]
    pub sampling: SamplingSource,
    /// How many pages (2 MiB ranges for a 2 MiB policy) the fault sampler write-protects per
    /// epoch: each costs the program at most one fault per epoch.
    #[serde(default = "default_fault_sample")]
    pub fault_sample: usize,
    /// The fault sampler's epoch in milliseconds: how long a sample stays armed before a new one
    /// is drawn (at most one sampled write per unit per epoch).
    #[serde(default = "default_fault_epoch_ms")]
    pub fault_epoch_ms: u64,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            referenced: ReferencedSource::default(),
            sampling: SamplingSource::default(),
            fault_sample: default_fault_sample(),
            fault_epoch_ms: default_fault_epoch_ms(),
        }
    }
}

/// 256 an epoch: with the default 250 ms epoch at most 1,024 faults a second.
fn default_fault_sample() -> usize {
    256
}

/// [`crate::trackers::write_faults::DEFAULT_EPOCH`], where the choice is explained.
fn default_fault_epoch_ms() -> u64 {
    crate::trackers::write_faults::DEFAULT_EPOCH.as_millis() as u64
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

/// Which sampler a policy that samples accesses gets (docs/live.md, "Access sampling").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SamplingSource {
    /// The perf sampler where the CPU samples loads and stores (PEBS, IBS), else the fault sampler.
    #[default]
    Auto,
    /// The perf sampler only: a host without PEBS or IBS refuses the policy.
    Perf,
    /// The fault sampler (writes) with DAMON's regions (reads), even where the CPU has PEBS or
    /// IBS: only for a program Terrace starts.
    Faults,
}

/// The `[daemon]` section. When it is present, `socket`, `dry_run` and `policy` are required, as
/// docs/live.md has always said: a daemon section is written for the daemon, so one that leaves
/// out where `terrace bind` must look, or whether pages are to move at all, is a mistake better
/// caught than filled in (the section's defaults would make a daemon that moves pages on a socket
/// nobody chose). Only `metrics` is optional: leaving it out means no endpoint. A config with no
/// `[daemon]` section at all gets [`DaemonConfig::default`], and the daemon's startup log says
/// where it listens ("listening on /run/terrace.sock (the default socket)").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    /// Address of the metrics endpoint; must be a loopback address.
    #[serde(default)]
    pub metrics: Option<String>,
    pub dry_run: bool,
    pub policy: String,
}

/// Where the daemon listens, and `bind` looks, when nothing says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/terrace.sock";

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: PathBuf::from(DEFAULT_SOCKET),
            metrics: None,
            dry_run: false,
            policy: "age".into(),
        }
    }
}

/// Why a config cannot be used. Each message is one line that names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Missing, not a regular file, too large, not text: the input's own message says which and
    /// names the file (its cause is in that one line, not a separate source printed again).
    #[error(transparent)]
    Input(#[from] terrace_input::InputError),
    #[error("config '{path}' is invalid: {message}")]
    Invalid { path: String, message: String },
}

/// A TOML error in one line (`line L, column C: message (in `the line`)`), by the one rule
/// every input file's errors follow.
fn toml_error_line(text: &str, e: &toml::de::Error) -> String {
    terrace_input::parse_error_line(text, e.message(), e.span())
}

impl Config {
    /// Reads and validates the config at `path` (a small regular file: see terrace-input).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = terrace_input::read_text("config", path)?;
        Config::parse(&path.display().to_string(), &text)
    }

    /// Parses and validates a config; `path` names it in messages.
    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_string(), message };
        let c: Config = toml::from_str(text).map_err(|e| {
            let mut message = toml_error_line(text, &e);
            if e.message().starts_with("missing field") || e.message().starts_with("unknown field") {
                message.push_str("; docs/live.md lists every key, and examples/terrace.toml has them all");
            }
            invalid(message)
        })?;
        for (key, nodes) in [("fast_nodes", &c.tiers.fast_nodes), ("slow_nodes", &c.tiers.slow_nodes)] {
            if nodes.as_ref().is_some_and(|n| n.is_empty()) {
                return Err(invalid(format!(
                    "tiers.{key} is empty; list at least one NUMA node, or leave the key out to have \
                     Terrace detect them (`terrace doctor` shows this host's)"
                )));
            }
        }
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
        if !(1..=60_000).contains(&c.trackers.fault_epoch_ms) {
            return Err(invalid(format!(
                "trackers.fault_epoch_ms = {} is out of range; give 1 to 60000 milliseconds",
                c.trackers.fault_epoch_ms
            )));
        }
        if c.daemon.socket.as_os_str().is_empty() {
            return Err(invalid("daemon.socket is empty; give the path of the daemon's socket".into()));
        }
        if c.daemon.policy.is_empty() {
            return Err(invalid("daemon.policy is empty; name a policy (`terrace list policies`)".into()));
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

    /// Refuses `[tiers]` nodes this host does not have, in one line listing the ones it has.
    /// Checked when the daemon or `terrace run` starts: a config is written for one host, and a
    /// node that is not there would otherwise be left out of the classification without a word.
    pub fn check_nodes(&self, topology: &Topology) -> Result<(), String> {
        let missing: Vec<String> = self
            .tiers
            .unknown_nodes(topology)
            .into_iter()
            .map(|(key, absent)| {
                let s = if absent.len() == 1 { "" } else { "s" };
                format!("tiers.{key} names node{s} {}", format_list(&absent))
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let ids: Vec<u32> = topology.nodes.iter().map(|n| n.id).collect();
        Err(format!(
            "the config's {}, which this host does not have; its NUMA nodes are {} (`terrace doctor` \
             shows them): fix [tiers] in the config",
            missing.join(" and "),
            format_list(&ids)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAEMON: &str = "[daemon]\nsocket = \"/tmp/t.sock\"\ndry_run = false\npolicy = \"age\"\n";

    fn error(text: &str) -> String {
        let e = Config::parse("t.toml", text).unwrap_err().to_string();
        assert!(!e.contains('\n'), "not one line: {e}");
        assert!(e.starts_with("config 't.toml' is invalid: "), "{e}");
        e
    }

    fn fixture(name: &str) -> Topology {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
        Topology::read(&root.join("sys"), &root.join("proc")).unwrap()
    }

    #[test]
    fn a_full_config_parses() {
        let c = Config::parse(
            "t",
            "[tiers]\nfast_nodes = [0]\nslow_nodes = [1, 2]\n[daemon]\nsocket = \"/tmp/t.sock\"\nmetrics = \"127.0.0.1:9464\"\ndry_run = true\npolicy = \"age\"\n",
        )
        .unwrap();
        assert_eq!(c.tiers.slow_nodes, Some(vec![1, 2]));
        assert!(c.daemon.dry_run);
        // No [daemon] section: the documented defaults; metrics may be left out of one.
        assert_eq!(Config::parse("t", "").unwrap(), Config::default());
        assert_eq!(Config::parse("t", DAEMON).unwrap().daemon.metrics, None);
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let e = error("[tiers]\nfast_nodes = [0]\nslow_nodes = [0]\n");
        assert!(e.contains("both fast and slow"), "{e}");
        let e = error("[tires]\n");
        assert!(e.contains("tires"), "{e}");
        let e = error("[daemon]\nsocket=\"/x\"\nmetrics=\"0.0.0.0:1\"\ndry_run=false\npolicy=\"age\"\n");
        assert!(e.contains("loopback"), "{e}");
        let e = error("[trackers]\nfault_sample = 0\n");
        assert!(e.contains("fault_sample"), "{e}");
        assert_eq!(Config::parse("t", "[trackers]\nfault_sample = 64\n").unwrap().trackers.fault_sample, 64);
        assert_eq!(Config::default().trackers.fault_sample, 256);
        assert_eq!(Config::default().trackers.fault_epoch_ms, 250);
        assert!(error("[trackers]\nfault_epoch_ms = 0\n").contains("fault_epoch_ms"));
        assert_eq!(
            Config::parse("t", "[trackers]\nfault_epoch_ms = 250\n").unwrap().trackers.fault_epoch_ms,
            250
        );
        let c = Config::parse("t", "[trackers]\nreferenced = \"idle-page\"\n").unwrap();
        assert_eq!(c.trackers.referenced, ReferencedSource::IdlePage);
        let e = error("[trackers]\nreferenced = \"pebs\"\n");
        assert!(e.contains("line 2") && e.contains("unknown variant `pebs`"), "{e}");
        assert_eq!(Config::default().trackers.sampling, SamplingSource::Auto);
        for (value, source) in [
            ("auto", SamplingSource::Auto),
            ("perf", SamplingSource::Perf),
            ("faults", SamplingSource::Faults),
        ] {
            let c = Config::parse("t", &format!("[trackers]\nsampling = \"{value}\"\n")).unwrap();
            assert_eq!(c.trackers.sampling, source);
        }
        let e = error("[trackers]\nsampling = \"pebs\"\n");
        assert!(
            e.contains("line 2, column 12: unknown variant `pebs`, expected one of `auto`, `perf`, `faults`"),
            "{e}"
        );
        let e = error("[trackers]\nsampling = 1\n");
        assert!(e.contains("line 2, column 12: wanted string or table (in `sampling = 1`)"), "{e}");
        let e = error("[tiers]\nfast_limit_mib = 0\n");
        assert!(e.contains("fast_limit_mib"), "{e}");
        assert_eq!(
            Config::parse("t", "[tiers]\nfast_limit_mib = 6\n").unwrap().tiers.fast_limit_mib,
            Some(6)
        );
        let e = error("[tiers]\nslow_nodes = []\n");
        assert!(e.contains("tiers.slow_nodes is empty"), "{e}");
        let e = error(&DAEMON.replace("policy = \"age\"", "policy = \"\""));
        assert!(e.contains("daemon.policy is empty"), "{e}");
    }

    /// docs/live.md calls every [daemon] key but metrics required; a section without one is refused
    /// naming it and its line.
    #[test]
    fn the_daemon_section_needs_its_required_keys() {
        for key in ["socket", "dry_run", "policy"] {
            let text: String =
                DAEMON.lines().filter(|l| !l.starts_with(key)).map(|l| format!("{l}\n")).collect();
            let e = error(&text);
            assert!(e.contains(&format!("missing field `{key}`")) && e.contains("line 1, column 1"), "{e}");
        }
    }

    #[test]
    fn misspelt_keys_are_refused_by_name_in_every_section() {
        for (text, key) in [
            ("[tiers]\nfast_node = [0]\n", "fast_node"),
            ("[tiers]\nfast_limit_mb = 5\n", "fast_limit_mb"),
            ("[trackers]\nfault_samples = 5\n", "fault_samples"),
            ("[trackers]\nsampler = \"perf\"\n", "sampler"),
            (&format!("{DAEMON}dryrun = true\n"), "dryrun"),
            ("[daemon]\nsocket = \"/x\"\n[daemon]\n", "daemon"),
            ("colour = 1\n", "colour"),
        ] {
            let e = error(text);
            assert!(e.contains(&format!("`{key}`")) && e.contains("line "), "{key}: {e}");
        }
    }

    #[test]
    fn policy_tables_hold_scalars_that_print_as_a_spec_writes_them() {
        let c = Config::parse(
            "t",
            "[policy.hpwp]\nhot_threshold = 8\ninterval = \"20ms\"\n[policy.ambix]\nswitch = false\ndram_max = 92.5\n",
        )
        .unwrap();
        let table =
            |name: &str| -> Vec<String> { c.policy[name].iter().map(|(k, v)| format!("{k}={v}")).collect() };
        assert_eq!(table("hpwp"), ["hot_threshold=8", "interval=20ms"]);
        assert_eq!(table("ambix"), ["dram_max=92.5", "switch=false"]);
        // Back to TOML and in again, unchanged.
        assert_eq!(Config::parse("t", &toml::to_string(&c).unwrap()).unwrap(), c);
        assert!(Config::default().policy.is_empty());
        let e = error("[policy.hpwp]\nhot_threshold = [8]\n");
        assert!(e.contains("line 2") && e.contains("a policy parameter's value"), "{e}");
        let e = error("[policy]\nhpwp = 8\n");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn malformed_toml_gives_the_line_and_column_in_one_line() {
        let e = error("[tiers]\nfast_nodes = [0]\nfast_nodes = [1]\n");
        assert!(e.contains("line 3, column 1: duplicate key `fast_nodes` (in `fast_nodes = [1]`)"), "{e}");
        let e = error("[trackers]\nfault_sample = \"many\"\n");
        assert!(e.contains("line 2, column 16: invalid type"), "{e}");
        let e = error("[tiers\n");
        assert!(e.contains("line 1, column"), "{e}");
    }

    #[test]
    fn unreadable_files_are_refused_in_one_line_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        for (path, want) in [
            (dir.path().join("absent.toml"), "does not exist"),
            (dir.path().to_path_buf(), "a directory"),
            (Path::new("/dev/zero").to_path_buf(), "a character device"),
        ] {
            let e = Config::load(&path).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(want) && text.contains(&path.display().to_string()), "{text}");
            // The cause is in the message once, and not again as a source (anyhow's `{:#}`).
            assert!(std::error::Error::source(&e).is_none(), "{text}");
        }
        let ok = dir.path().join("ok.toml");
        std::fs::write(&ok, DAEMON).unwrap();
        assert_eq!(Config::load(&ok).unwrap().daemon.socket, Path::new("/tmp/t.sock"));
    }

    #[test]
    fn nodes_the_host_lacks_are_refused_listing_the_ones_it_has() {
        let two = fixture("two-node-hmat");
        let one = fixture("single-node");
        let c = Config::parse("t", "[tiers]\nfast_nodes = [0]\nslow_nodes = [1]\n").unwrap();
        assert_eq!(c.check_nodes(&two), Ok(()));
        let e = c.check_nodes(&one).unwrap_err();
        assert_eq!(
            e,
            "the config's tiers.slow_nodes names node 1, which this host does not have; its NUMA nodes \
             are 0 (`terrace doctor` shows them): fix [tiers] in the config"
        );
        let c = Config::parse("t", "[tiers]\nfast_nodes = [0, 7]\nslow_nodes = [1, 2, 3]\n").unwrap();
        let e = c.check_nodes(&two).unwrap_err();
        assert!(e.contains("tiers.fast_nodes names node 7 and tiers.slow_nodes names nodes 2-3,"), "{e}");
        assert!(e.contains("its NUMA nodes are 0-1"), "{e}");
        assert_eq!(Config::default().check_nodes(&one), Ok(()));
    }
}
