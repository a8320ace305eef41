//! Topology reading, classification and doctor findings against fake sysfs/procfs trees that
//! mirror the two-node guest of docs (node 0: CPUs and DRAM, node 1: memory only).

use std::path::{Path, PathBuf};

use terrace_linux::doctor::{examine, examine_with, Report, Severity, TrackerKind};
use terrace_linux::topology::{
    parse_list, ClassifiedBy, TierClass, TierOverride, Topology, TopologyError, PAGE_BYTES,
};
use terrace_model::{TierId, TierKind};

const GIB: u64 = 1 << 30;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn read(name: &str) -> Topology {
    let root = fixture(name);
    Topology::read(&root.join("sys"), &root.join("proc")).unwrap()
}

fn report(name: &str) -> Report {
    let root = fixture(name);
    examine(&root.join("sys"), &root.join("proc")).unwrap()
}

fn codes(r: &Report) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.code).collect()
}

#[test]
fn reads_the_two_node_hmat_guest() {
    let t = read("two-node-hmat");
    assert_eq!(t.nodes.len(), 2);
    let (n0, n1) = (&t.nodes[0], &t.nodes[1]);
    assert_eq!((n0.id, n0.cpus.clone(), n0.mem_total_bytes), (0, vec![0, 1], GIB));
    assert_eq!((n1.id, n1.cpus.clone(), n1.mem_total_bytes), (1, vec![], GIB));
    assert_eq!(n1.mem_free_bytes, 1_040_000 * 1024);
    assert_eq!(n0.distances, vec![10, 20]);
    assert_eq!(n1.distances, vec![20, 10]);
    assert_eq!(n0.hmat.unwrap().read_latency_ns, Some(100));
    assert_eq!(n1.hmat.unwrap().read_latency_ns, Some(300));
    assert_eq!(n1.hmat.unwrap().read_bandwidth_mb_s, Some(5120));
    assert_eq!(n1.initiators, vec![0]);
    assert_eq!(
        t.tiers.iter().map(|m| (m.id, m.nodes.clone())).collect::<Vec<_>>(),
        [(4, vec![0]), (54, vec![1])]
    );
    assert_eq!(t.demotion_enabled, Some(false));
    assert_eq!(t.numa_balancing, Some(0));
}

#[test]
fn classification_of_each_fixture() {
    let none = TierOverride::default();
    let c = read("two-node-hmat").classify(&none);
    assert_eq!(c.by, ClassifiedBy::MemoryTiers);
    assert_eq!(c.nodes, vec![(0, TierClass::Fast), (1, TierClass::Slow)]);

    let c = read("two-node-no-hmat").classify(&none);
    assert_eq!(c.by, ClassifiedBy::CpulessAndDistance);
    assert_eq!(c.nodes, vec![(0, TierClass::Fast), (1, TierClass::Slow)]);

    let c = read("single-node").classify(&none);
    assert_eq!(c.by, ClassifiedBy::SingleNode);
    assert_eq!(c.nodes, vec![(0, TierClass::Fast)]);
}

#[test]
fn hmat_decides_when_the_kernel_has_one_tier() {
    let mut t = read("two-node-hmat");
    t.tiers = vec![terrace_linux::topology::MemoryTier { id: 4, nodes: vec![0, 1] }];
    let c = t.classify(&TierOverride::default());
    assert_eq!(c.by, ClassifiedBy::Hmat);
    assert_eq!(c.nodes, vec![(0, TierClass::Fast), (1, TierClass::Slow)]);
}

#[test]
fn override_wins() {
    let t = read("two-node-hmat");
    let c = t.classify(&TierOverride { fast_nodes: None, slow_nodes: Some(vec![0]), ..Default::default() });
    assert_eq!(c.by, ClassifiedBy::Override);
    assert_eq!(c.nodes, vec![(0, TierClass::Slow), (1, TierClass::Fast)]);
    let c =
        t.classify(&TierOverride { fast_nodes: Some(vec![0, 1]), slow_nodes: None, ..Default::default() });
    assert_eq!(c.nodes, vec![(0, TierClass::Fast), (1, TierClass::Fast)]);
}

#[test]
fn override_naming_an_unknown_node_is_reported() {
    let root = fixture("two-node-hmat");
    let o = TierOverride { fast_nodes: None, slow_nodes: Some(vec![7]), ..Default::default() };
    let r = examine_with(&root.join("sys"), &root.join("proc"), &o).unwrap();
    assert!(codes(&r).contains(&"override-unknown-node"), "{:?}", r.findings);
}

#[test]
fn list_parser_edge_cases() {
    assert_eq!(parse_list("0-3,8,10-11").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
    assert_eq!(parse_list("").unwrap(), Vec::<u32>::new());
    assert_eq!(parse_list("0-1\n").unwrap(), vec![0, 1]);
    assert_eq!(parse_list("7").unwrap(), vec![7]);
    assert!(parse_list("0-x").is_err());
}

#[test]
fn model_tiers_carry_capacity_nodes_and_hmat() {
    let t = read("two-node-hmat");
    let tiers = t.model_tiers(&t.classify(&TierOverride::default()));
    assert_eq!(tiers.len(), 2);
    let (fast, slow) = (&tiers[0], &tiers[1]);
    assert_eq!((fast.tier.id, fast.nodes.clone()), (TierId::FAST, vec![0]));
    assert_eq!((slow.tier.id, slow.nodes.clone()), (TierId::SLOW, vec![1]));
    assert_eq!(fast.tier.capacity_pages, Some(GIB / PAGE_BYTES));
    assert_eq!(slow.tier.capacity_pages, Some(262_144));
    assert_eq!(fast.tier.kind, TierKind::Dram);
    assert_eq!(slow.tier.kind, TierKind::Cxl);
    assert_eq!(fast.tier.read_latency_ns, Some(100.0));
    assert_eq!(slow.tier.read_latency_ns, Some(300.0));
    // The kernel reports MB/s; the model counts GB/s (bytes per ns).
    assert_eq!(fast.tier.read_bandwidth_gb_s, Some(20.48));
    assert_eq!(slow.tier.read_bandwidth_gb_s, Some(5.12));
    assert_eq!(slow.tier.write_bandwidth_gb_s, Some(5.12));

    let t = read("two-node-no-hmat");
    let tiers = t.model_tiers(&t.classify(&TierOverride::default()));
    assert_eq!(tiers[1].nodes, vec![1]);
    assert_eq!(tiers[1].tier.read_latency_ns, None);
    assert_eq!(tiers[1].tier.read_bandwidth_gb_s, None);

    let t = read("single-node");
    let tiers = t.model_tiers(&t.classify(&TierOverride::default()));
    assert_eq!(tiers.len(), 1);
    assert_eq!(tiers[0].tier.capacity_pages, Some(4 * GIB / PAGE_BYTES));
}

#[test]
fn cpuless_node_in_the_dram_tier_is_found_only_without_hmat() {
    let r = report("two-node-no-hmat");
    let f = r.findings.iter().find(|f| f.code == "cpuless-same-tier").expect("finding");
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("node 1") && f.message.contains("memory_tier4"), "{}", f.message);
    assert!(f.fix.contains("hmat=on") && f.fix.contains("slow_nodes"), "{}", f.fix);
    assert!(codes(&r).contains(&"no-hmat"));
    // One kernel tier: enabling demotion would not help, so it is not advised.
    assert!(!codes(&r).contains(&"demotion-disabled"));

    let r = report("two-node-hmat");
    assert!(!codes(&r).contains(&"cpuless-same-tier"));
    assert!(!codes(&r).contains(&"no-hmat"));
}

#[test]
fn demotion_disabled_with_two_tiers() {
    let r = report("two-node-hmat");
    let f = r.findings.iter().find(|f| f.code == "demotion-disabled").expect("finding");
    assert!(f.fix.contains("/sys/kernel/mm/numa/demotion_enabled"));
    assert_eq!(codes(&r), vec!["demotion-disabled"]);
}

#[test]
fn single_node_has_nothing_to_tier() {
    let r = report("single-node");
    assert_eq!(codes(&r), vec!["single-node"]);
    assert!(r.findings[0].fix.contains("simulator"));
}

#[test]
fn trackers_and_permissions_from_files() {
    let r = report("two-node-hmat");
    let get = |r: &Report, k| r.trackers.iter().find(|c| c.kind == k).cloned().unwrap();
    assert!(get(&r, TrackerKind::IdlePage).available);
    assert!(get(&r, TrackerKind::DamonVaddr).available);
    let nb = get(&r, TrackerKind::NumaBalancingTiering);
    assert!(!nb.available);
    assert_eq!(nb.enable.as_deref(), Some("echo 2 > /proc/sys/kernel/numa_balancing"));
    assert!(!get(&r, TrackerKind::Demotion).available);
    assert!(r.permissions.root && r.permissions.cap_sys_nice == Some(true));

    let r = report("single-node");
    let idle = get(&r, TrackerKind::IdlePage);
    assert!(!idle.available && idle.detail.contains("CONFIG_IDLE_PAGE_TRACKING"));
    assert!(!get(&r, TrackerKind::DamonVaddr).available);
    assert!(get(&r, TrackerKind::NumaBalancingTiering).available);
    assert!(get(&r, TrackerKind::Demotion).available);
    assert_eq!(r.permissions.euid, 1000);
    assert!(!r.permissions.root);
    assert_eq!(r.permissions.cap_sys_admin, Some(false));
}

#[test]
fn render_shows_nodes_classes_and_fixes() {
    for name in ["two-node-hmat", "two-node-no-hmat", "single-node"] {
        let r = report(name);
        let text = r.render();
        for n in &r.topology.nodes {
            assert!(text.contains(&format!("node{}", n.id)), "{name}: {text}");
        }
        for f in &r.findings {
            assert!(text.contains(&f.fix), "{name}: fix missing in\n{text}");
            assert!(text.contains(&f.message), "{name}: message missing in\n{text}");
        }
        assert!(text.contains(&r.classification.by.to_string()));
    }
    let text = report("two-node-no-hmat").render();
    assert!(text.contains("1.0 GiB") && text.contains("20 10") && text.contains("slow"), "{text}");
}

#[test]
fn report_serialises_to_json() {
    let v = serde_json::to_value(report("two-node-hmat")).unwrap();
    assert_eq!(v["classification"]["by"], "memory-tiers");
    assert_eq!(v["topology"]["nodes"][1]["hmat"]["read_latency_ns"], 300);
    assert_eq!(v["findings"][0]["code"], "demotion-disabled");
}

#[test]
fn missing_node_directory_is_an_error_naming_the_path() {
    let root = fixture("missing-node");
    let err = Topology::read(&root.join("sys"), &root.join("proc")).unwrap_err();
    assert!(matches!(err, TopologyError::MissingNode { .. }));
    assert!(err.to_string().contains("devices/system/node/node1"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    let err = examine(empty.path(), empty.path()).unwrap_err();
    assert!(err.to_string().contains("devices/system/node"), "{err}");
}

#[test]
fn missing_optional_files_are_none() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("sys/devices/system/node/node0");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("cpulist"), "0\n").unwrap();
    std::fs::write(node.join("meminfo"), "Node 0 MemTotal: 4 kB\n").unwrap();
    std::fs::write(node.join("distance"), "10\n").unwrap();
    let t = Topology::read(&dir.path().join("sys"), &dir.path().join("proc")).unwrap();
    assert_eq!(t.nodes[0].mem_total_bytes, 4096);
    assert!(t.tiers.is_empty() && t.demotion_enabled.is_none() && t.numa_balancing.is_none());
    assert!(t.nodes[0].hmat.is_none() && t.nodes[0].initiators.is_empty());
}

#[test]
fn examines_this_real_host() {
    let r = examine(Path::new("/sys"), Path::new("/proc")).unwrap();
    assert!(!r.topology.nodes.is_empty());
    assert!(!r.render().is_empty());
}
