//! The host's NUMA topology and which nodes are fast and which slow.
//!
//! Everything is read from a sysfs root and a procfs root passed in, so tests run against
//! fixture trees and real use passes "/sys" and "/proc".

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use terrace_model::{Tier, TierId, TierKind};

/// Page size the model's capacities are counted in.
pub const PAGE_BYTES: u64 = 4096;

/// What the live machine knows about the host's memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Online nodes in id order.
    pub nodes: Vec<Node>,
    /// The kernel's memory tiers in id order; empty on kernels without memory tiering.
    pub tiers: Vec<MemoryTier>,
    /// /sys/kernel/mm/numa/demotion_enabled; `None` where the kernel lacks it.
    pub demotion_enabled: Option<bool>,
    /// /proc/sys/kernel/numa_balancing (bit 1: normal, bit 2: memory tiering); `None` where absent.
    pub numa_balancing: Option<u32>,
}

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: u32,
    pub cpus: Vec<u32>,
    pub mem_total_bytes: u64,
    pub mem_free_bytes: u64,
    /// Distance to every online node, in the order of [`Topology::nodes`].
    pub distances: Vec<u32>,
    /// Firmware-reported performance (ACPI HMAT) seen from this node's nearest initiators.
    pub hmat: Option<Hmat>,
    /// Node ids linked under access0/initiators: the CPUs' nodes the HMAT figures are measured from.
    pub initiators: Vec<u32>,
}

/// HMAT attributes as the kernel reports them in nodeN/access0/initiators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hmat {
    pub read_latency_ns: Option<u64>,
    pub write_latency_ns: Option<u64>,
    /// MB/s, as the kernel reports it.
    pub read_bandwidth_mb_s: Option<u64>,
    pub write_bandwidth_mb_s: Option<u64>,
}

/// One of the kernel's memory tiers (memory_tierN); a lower N is faster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryTier {
    pub id: u32,
    pub nodes: Vec<u32>,
}

/// Which nodes the user says are fast or slow (from Terrace's config); beats every automatic rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierOverride {
    pub fast_nodes: Option<Vec<u32>>,
    pub slow_nodes: Option<Vec<u32>>,
    /// The most of the fast tier one managed program may use, MiB (default: the fast nodes'
    /// memory). A policy sees it as the fast tier's capacity, so it demotes to stay within it.
    #[serde(default)]
    pub fast_limit_mib: Option<u64>,
}

impl TierOverride {
    fn is_empty(&self) -> bool {
        self.fast_nodes.is_none() && self.slow_nodes.is_none()
    }

    /// The nodes named under each key (`fast_nodes`, `slow_nodes`) that `topology` lacks: the
    /// one rule behind doctor's finding and the refusal at start (`Config::check_nodes`).
    pub fn unknown_nodes(&self, topology: &Topology) -> Vec<(&'static str, Vec<u32>)> {
        [("fast_nodes", &self.fast_nodes), ("slow_nodes", &self.slow_nodes)]
            .into_iter()
            .map(|(key, nodes)| {
                (
                    key,
                    nodes
                        .iter()
                        .flatten()
                        .copied()
                        .filter(|&n| topology.node(n).is_none())
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|(_, absent)| !absent.is_empty())
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TierClass {
    Fast,
    Slow,
}

impl fmt::Display for TierClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TierClass::Fast => "fast",
            TierClass::Slow => "slow",
        })
    }
}

/// The rule that decided the classification, so `doctor` can say why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClassifiedBy {
    Override,
    MemoryTiers,
    Hmat,
    CpulessAndDistance,
    SingleNode,
}

impl fmt::Display for ClassifiedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClassifiedBy::Override => "the fast_nodes/slow_nodes set in Terrace's config",
            ClassifiedBy::MemoryTiers => "the kernel's memory tiers (the lowest tier id is fastest)",
            ClassifiedBy::Hmat => "HMAT read latency (the lowest-latency nodes are fast)",
            ClassifiedBy::CpulessAndDistance => {
                "CPUs and distance (nodes with CPUs are fast, CPU-less nodes slow), as no HMAT or tiers tell"
            }
            ClassifiedBy::SingleNode => "a single node (everything is fast)",
        })
    }
}

/// Every node's class and the rule that gave it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    pub by: ClassifiedBy,
    /// (node id, class) in node order.
    pub nodes: Vec<(u32, TierClass)>,
}

impl Classification {
    pub fn class_of(&self, node: u32) -> Option<TierClass> {
        self.nodes.iter().find(|(n, _)| *n == node).map(|&(_, c)| c)
    }
    pub fn nodes_in(&self, class: TierClass) -> Vec<u32> {
        self.nodes.iter().filter(|(_, c)| *c == class).map(|&(n, _)| n).collect()
    }
}

/// A model tier together with the nodes it stands for, which the migrator needs as targets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LiveTier {
    pub tier: Tier,
    pub nodes: Vec<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error(
        "no NUMA node directory at {path} (is sysfs mounted, and is this a Linux kernel with CONFIG_NUMA?)"
    )]
    MissingNode { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot parse {path}: {what}")]
    Parse { path: PathBuf, what: String },
}

/// The CPUs online now (/sys/devices/system/cpu/online); CPU 0 alone where that cannot be read.
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_list(s.trim()).ok())
        .filter(|v| !v.is_empty())
        .map_or(vec![0], |v| v.into_iter().map(|c| c as usize).collect())
}

/// Parses a kernel list such as "0-3,8,10-11" (cpulist, nodelist, online). Empty means none.
pub fn parse_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| format!("bad number {t:?} in list {s:?}"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return Err(format!("range {part:?} runs backwards in list {s:?}"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The inverse of [`parse_list`], for showing lists the way the kernel does.
pub fn format_list(ids: &[u32]) -> String {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

fn read_required(path: &Path) -> Result<String, TopologyError> {
    fs::read_to_string(path).map_err(|source| TopologyError::Read { path: path.to_owned(), source })
}

/// Reads a file that older or differently built kernels lack; any failure means "not there".
fn read_optional(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn parse_err(path: &Path, what: impl Into<String>) -> TopologyError {
    TopologyError::Parse { path: path.to_owned(), what: what.into() }
}

fn read_list(path: &Path) -> Result<Vec<u32>, TopologyError> {
    parse_list(&read_required(path)?).map_err(|e| parse_err(path, e))
}

/// Numeric suffix of names like "node12" or "memory_tier54".
fn suffix_id(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix).filter(|s| !s.is_empty()).and_then(|s| s.parse().ok())
}

/// Node ids of the `nodeN` entries (directories or symlinks) in a directory.
fn node_entries(dir: &Path) -> Vec<u32> {
    let mut ids: Vec<u32> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| suffix_id(e.file_name().to_str()?, "node"))
        .collect();
    ids.sort_unstable();
    ids
}

/// Returns (MemTotal, MemFree) in bytes from a node's meminfo.
fn parse_node_meminfo(path: &Path, text: &str) -> Result<(u64, u64), TopologyError> {
    let (mut total, mut free) = (None, None);
    for line in text.lines() {
        // "Node 0 MemTotal:        5597400 kB"
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || f[0] != "Node" {
            continue;
        }
        let slot = match f[2] {
            "MemTotal:" => &mut total,
            "MemFree:" => &mut free,
            _ => continue,
        };
        let kb: u64 = f[3].parse().map_err(|_| parse_err(path, format!("bad number in line {line:?}")))?;
        *slot = Some(kb * 1024);
    }
    let total = total.ok_or_else(|| parse_err(path, "no MemTotal line"))?;
    Ok((total, free.unwrap_or(0)))
}

fn read_hmat(node_dir: &Path) -> (Option<Hmat>, Vec<u32>) {
    let dir = node_dir.join("access0/initiators");
    if !dir.is_dir() {
        return (None, Vec::new());
    }
    let num = |name: &str| read_optional(&dir.join(name)).and_then(|s| s.trim().parse::<u64>().ok());
    let hmat = Hmat {
        read_latency_ns: num("read_latency"),
        write_latency_ns: num("write_latency"),
        read_bandwidth_mb_s: num("read_bandwidth"),
        write_bandwidth_mb_s: num("write_bandwidth"),
    };
    let any = hmat != Hmat::default();
    (any.then_some(hmat), node_entries(&dir))
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "true" | "1" | "Y" | "y" => Some(true),
        "false" | "0" | "N" | "n" => Some(false),
        _ => None,
    }
}

impl Topology {
    /// Reads the topology under a sysfs root and a procfs root.
    pub fn read(sys: &Path, proc_: &Path) -> Result<Topology, TopologyError> {
        let node_root = sys.join("devices/system/node");
        if !node_root.is_dir() {
            return Err(TopologyError::MissingNode { path: node_root });
        }
        let ids = ["online", "possible"]
            .iter()
            .map(|f| node_root.join(f))
            .find(|p| p.exists())
            .map(|p| read_list(&p))
            .transpose()?
            .unwrap_or_else(|| node_entries(&node_root));
        if ids.is_empty() {
            return Err(TopologyError::MissingNode { path: node_root.join("node0") });
        }
        let mut nodes = Vec::with_capacity(ids.len());
        for id in ids {
            let dir = node_root.join(format!("node{id}"));
            if !dir.is_dir() {
                return Err(TopologyError::MissingNode { path: dir });
            }
            let cpus = read_list(&dir.join("cpulist"))?;
            let meminfo = dir.join("meminfo");
            let (mem_total_bytes, mem_free_bytes) = parse_node_meminfo(&meminfo, &read_required(&meminfo)?)?;
            let dist_path = dir.join("distance");
            let distances = read_required(&dist_path)?
                .split_whitespace()
                .map(|d| d.parse::<u32>().map_err(|_| parse_err(&dist_path, format!("bad distance {d:?}"))))
                .collect::<Result<Vec<_>, _>>()?;
            let (hmat, initiators) = read_hmat(&dir);
            nodes.push(Node { id, cpus, mem_total_bytes, mem_free_bytes, distances, hmat, initiators });
        }

        let tier_root = sys.join("devices/virtual/memory_tiering");
        let mut tiers: Vec<MemoryTier> = fs::read_dir(&tier_root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let id = suffix_id(e.file_name().to_str()?, "memory_tier")?;
                let text = read_optional(&e.path().join("nodelist"))?;
                Some(parse_list(&text).map(|nodes| MemoryTier { id, nodes }).map_err(|w| (e.path(), w)))
            })
            .collect::<Result<_, _>>()
            .map_err(|(p, w)| parse_err(&p.join("nodelist"), w))?;
        tiers.sort_by_key(|t| t.id);

        let demotion_enabled =
            read_optional(&sys.join("kernel/mm/numa/demotion_enabled")).and_then(|s| parse_bool(&s));
        let numa_balancing =
            read_optional(&proc_.join("sys/kernel/numa_balancing")).and_then(|s| s.trim().parse().ok());
        Ok(Topology { nodes, tiers, demotion_enabled, numa_balancing })
    }

    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The kernel memory tier holding a node, if the kernel lists one.
    pub fn memory_tier_of(&self, node: u32) -> Option<u32> {
        self.tiers.iter().find(|t| t.nodes.contains(&node)).map(|t| t.id)
    }

    /// Decides which nodes are fast: config, else kernel tiers, else HMAT, else CPUs and distance.
    pub fn classify(&self, overrides: &TierOverride) -> Classification {
        let by_cpu = |n: &Node| if self.is_cpuless_far(n) { TierClass::Slow } else { TierClass::Fast };
        let all = |by: ClassifiedBy, f: &dyn Fn(&Node) -> TierClass| Classification {
            by,
            nodes: self.nodes.iter().map(|n| (n.id, f(n))).collect(),
        };

        if !overrides.is_empty() {
            let listed = |l: &Option<Vec<u32>>, id| l.as_ref().is_some_and(|v| v.contains(&id));
            let auto = self.classify(&TierOverride::default());
            return all(ClassifiedBy::Override, &|n| {
                if listed(&overrides.slow_nodes, n.id) {
                    TierClass::Slow
                } else if listed(&overrides.fast_nodes, n.id) {
                    TierClass::Fast
                } else if overrides.fast_nodes.is_some() && overrides.slow_nodes.is_none() {
                    // Only fast nodes named: the rest are slow.
                    TierClass::Slow
                } else if overrides.slow_nodes.is_some() && overrides.fast_nodes.is_none() {
                    TierClass::Fast
                } else {
                    auto.class_of(n.id).unwrap_or(TierClass::Fast)
                }
            });
        }
        if self.nodes.len() == 1 {
            return all(ClassifiedBy::SingleNode, &|_| TierClass::Fast);
        }
        let populated = self.tiers.iter().filter(|t| !t.nodes.is_empty()).count();
        if populated > 1 {
            let fastest = self.tiers.iter().find(|t| !t.nodes.is_empty()).map(|t| t.id);
            return all(ClassifiedBy::MemoryTiers, &|n| match self.memory_tier_of(n.id) {
                Some(t) if Some(t) == fastest => TierClass::Fast,
                Some(_) => TierClass::Slow,
                // Memoryless nodes are in no tier; they hold nothing to place.
                None => by_cpu(n),
            });
        }
        let latencies: Option<Vec<u64>> =
            self.nodes.iter().map(|n| n.hmat.and_then(|h| h.read_latency_ns)).collect();
        if let Some(lat) = latencies {
            let min = lat.iter().copied().min().unwrap_or(0);
            return all(ClassifiedBy::Hmat, &|n| {
                if n.hmat.and_then(|h| h.read_latency_ns) == Some(min) {
                    TierClass::Fast
                } else {
                    TierClass::Slow
                }
            });
        }
        all(ClassifiedBy::CpulessAndDistance, &by_cpu)
    }

    /// A node counts as slow by the fallback rule when it has no CPUs and is farther from every
    /// CPU node than that node is from itself (a memory-only node at local distance is not slower).
    fn is_cpuless_far(&self, n: &Node) -> bool {
        if !n.cpus.is_empty() {
            return false;
        }
        let idx = |id: u32| self.nodes.iter().position(|m| m.id == id);
        let Some(my_idx) = idx(n.id) else { return true };
        let cpu_nodes: Vec<&Node> = self.nodes.iter().filter(|m| !m.cpus.is_empty()).collect();
        if cpu_nodes.is_empty() {
            // No CPUs anywhere (a broken tree): nothing to compare with, so nothing is slow.
            return false;
        }
        cpu_nodes.iter().all(|c| {
            let local = idx(c.id).and_then(|i| c.distances.get(i)).copied();
            match (c.distances.get(my_idx).copied(), local) {
                (Some(d), Some(l)) => d > l,
                _ => true,
            }
        })
    }

    /// The machine's tiers for a policy: tier 0 the fast nodes together, then the slow nodes.
    pub fn model_tiers(&self, classification: &Classification) -> Vec<LiveTier> {
        let mut out = Vec::new();
        for class in [TierClass::Fast, TierClass::Slow] {
            let ids = classification.nodes_in(class);
            let nodes: Vec<&Node> = ids.iter().filter_map(|&id| self.node(id)).collect();
            if nodes.is_empty() {
                continue;
            }
            let bytes: u64 = nodes.iter().map(|n| n.mem_total_bytes).sum();
            // A tier of several nodes is described by its worst node, so plans never overpromise.
            let hmat_all = |f: fn(&Hmat) -> Option<u64>| -> Option<Vec<u64>> {
                nodes.iter().map(|n| n.hmat.as_ref().and_then(f)).collect()
            };
            let latency = hmat_all(|h| h.read_latency_ns).and_then(|v| v.into_iter().max());
            let gb_s = |f: fn(&Hmat) -> Option<u64>| {
                hmat_all(f).and_then(|v| v.into_iter().min()).map(|mb| mb as f64 / 1000.0)
            };
            let kind = match class {
                TierClass::Fast => TierKind::Dram,
                // The kernel does not say what the memory is: CPU-less slow memory is most
                // likely CXL today, slow memory with CPUs another socket's DRAM.
                TierClass::Slow if nodes.iter().all(|n| n.cpus.is_empty()) => TierKind::Cxl,
                TierClass::Slow => TierKind::RemoteDram,
            };
            out.push(LiveTier {
                tier: Tier {
                    id: TierId(out.len() as u8),
                    name: format!("{class} (node {})", format_list(&ids)),
                    kind,
                    capacity_pages: Some(bytes / PAGE_BYTES),
                    read_latency_ns: latency.map(|l| l as f64),
                    read_bandwidth_gb_s: gb_s(|h| h.read_bandwidth_mb_s),
                    write_bandwidth_gb_s: gb_s(|h| h.write_bandwidth_mb_s),
                },
                nodes: ids,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parser_edge_cases() {
        assert_eq!(parse_list("0-3,8,10-11").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_list("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_list("\n").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_list("0\n").unwrap(), vec![0]);
        assert_eq!(parse_list("5,1-2,2").unwrap(), vec![1, 2, 5]);
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("a").is_err());
        assert!(parse_list("1-").is_err());
    }

    #[test]
    fn list_formatter_round_trips() {
        for s in ["0-3,8,10-11", "", "0", "1,3,5", "0-63"] {
            assert_eq!(format_list(&parse_list(s).unwrap()), s);
        }
    }

    #[test]
    fn meminfo_lines() {
        let t =
            "Node 0 MemTotal:        1048576 kB\nNode 0 MemFree:          524288 kB\nNode 0 MemUsed: 1 kB\n";
        assert_eq!(parse_node_meminfo(Path::new("x"), t).unwrap(), (1 << 30, 1 << 29));
        assert!(parse_node_meminfo(Path::new("x"), "").is_err());
    }

    #[test]
    fn bools_as_the_kernel_writes_them() {
        assert_eq!(parse_bool("true\n"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }
}
