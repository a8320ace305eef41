//! examples/terrace.toml, the config with every key, against the code and docs/live.md (issue 9
//! item 9): it parses as a valid config naming a known policy, every key in it is documented, and
//! every key the documentation's table lists is in it.
// The config is the live machine's (terrace-linux), which a `terrace` without it does not have.
#![cfg(all(feature = "live", target_os = "linux"))]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use terrace_linux::config::Config;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example() -> PathBuf {
    root().join("examples/terrace.toml")
}

fn live_md() -> String {
    std::fs::read_to_string(root().join("docs/live.md")).unwrap()
}

/// Every key of a TOML tree, tables as dotted prefixes: `tiers.fast_nodes`. The keys of a
/// `[policy.NAME]` table are the documentation's one row, `policy.NAME.KEY`.
fn keys(prefix: &str, table: &toml::Table, out: &mut BTreeSet<String>) {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(t) => keys(&key, t, out),
            _ if key.starts_with("policy.") => {
                out.insert("policy.NAME.KEY".into());
            }
            _ => {
                out.insert(key);
            }
        }
    }
}

/// The keys of docs/live.md's configuration table: the first cell of each row below the
/// `| key | default | meaning |` header, in backticks.
fn documented_keys(doc: &str) -> BTreeSet<String> {
    let start = doc.find("| key | default | meaning |").expect("docs/live.md has the configuration table");
    doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cell = l.split('|').nth(1).unwrap().trim();
            cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')).unwrap_or(cell).to_string()
        })
        .collect()
}

#[test]
fn the_example_config_is_a_valid_config() {
    let c = Config::load(&example()).unwrap_or_else(|e| panic!("{e}"));
    // It sets every key, so nothing in it is a default by accident.
    assert!(c.tiers.fast_nodes.is_some() && c.tiers.slow_nodes.is_some() && c.tiers.fast_limit_mib.is_some());
    assert!(c.daemon.metrics.is_some());
    assert!(!c.policy.is_empty());
    // Its [policy.NAME] tables name known policies, keys and values, and the daemon's policy
    // builds with them.
    let mut policies = terrace_policy::Overrides::default();
    for (name, table) in &c.policy {
        policies
            .insert(name, table.iter().map(|(k, v)| (k, v.to_string())))
            .unwrap_or_else(|e| panic!("[policy.{name}]: {e}"));
    }
    policies.build(&c.daemon.policy).unwrap_or_else(|e| panic!("daemon.policy: {e}"));
    // The same text through `parse`, as a config given inline would be.
    let text = std::fs::read_to_string(example()).unwrap();
    assert_eq!(Config::parse("examples/terrace.toml", &text).unwrap(), c);
}

#[test]
fn every_key_in_the_example_is_documented() {
    let text = std::fs::read_to_string(example()).unwrap();
    let mut found = BTreeSet::new();
    keys("", &toml::from_str(&text).unwrap(), &mut found);
    let doc = live_md();
    for key in &found {
        let last = key.rsplit('.').next().unwrap();
        let in_backticks = doc.contains(&format!("`{key}`")) || doc.contains(&format!("`{last}`"));
        let in_a_row = doc.lines().any(|l| l.starts_with('|') && l.contains(key.as_str()));
        assert!(in_backticks || in_a_row, "{key} is in examples/terrace.toml but not in docs/live.md");
    }
    assert_eq!(found.len(), 12, "{found:?}");
}

#[test]
fn every_documented_key_is_in_the_example() {
    let text = std::fs::read_to_string(example()).unwrap();
    let mut found = BTreeSet::new();
    keys("", &toml::from_str(&text).unwrap(), &mut found);
    let documented = documented_keys(&live_md());
    assert!(!documented.is_empty());
    let missing: Vec<&String> = documented.difference(&found).collect();
    assert!(missing.is_empty(), "docs/live.md documents {missing:?}, which examples/terrace.toml lacks");
    assert_eq!(documented, found, "the table and the example list the same keys");
}

/// docs/live.md points readers at the example.
#[test]
fn the_docs_name_the_example() {
    assert!(live_md().contains("examples/terrace.toml"));
}
