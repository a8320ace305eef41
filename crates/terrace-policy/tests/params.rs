//! Parameters on the simulator: a parameter given at its default, or a preset spelt out as its
//! values, runs exactly as the plain policy; a changed parameter changes what the policy does.

use terrace_sim::{Profile, RunReport, SimOptions};

/// GUPS at an eighth of its size: 16 MiB, a 6 MiB fast tier, three huge pages of hot set, so the
/// 2 MiB policies have pages to move.
fn run(spec: &str) -> RunReport {
    let mut policy = terrace_policy::build(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let source = terrace_workloads::build("gups", 1, 1.0 / 8.0).unwrap();
    let profile = Profile::load(terrace_sim::DEFAULT_PROFILE).unwrap();
    terrace_sim::simulate(source, policy.as_mut(), &profile, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{spec}: {e}"))
}

#[test]
fn every_parameter_at_its_default_runs_exactly_as_the_plain_policy() {
    for entry in terrace_policy::list() {
        let plain = run(entry.name);
        assert_eq!(plain.policy, entry.name);
        let values = entry.defaults();
        for (param, value) in values.iter() {
            let spec = format!("{}:{}={value}", entry.name, param.name);
            assert_eq!(run(&spec), plain, "{spec}");
        }
        // All of them at once, written as a user might (the default text, not the canonical one).
        if entry.preset.is_none() && !entry.params.is_empty() {
            let all: Vec<String> = entry.params.iter().map(|p| format!("{}={}", p.name, p.default)).collect();
            assert_eq!(run(&format!("{}:{}", entry.name, all.join(","))), plain, "{}", entry.name);
        }
    }
}

#[test]
fn a_preset_runs_exactly_as_its_policy_with_the_presets_values() {
    for entry in terrace_policy::list() {
        let Some(preset) = entry.preset else { continue };
        let values: Vec<String> = preset.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let explicit = format!("{}:{}", preset.of, values.join(","));
        let report = run(&explicit);
        assert_eq!(report.policy, entry.name, "{explicit} is named as the preset");
        assert_eq!(report, run(entry.name), "{explicit}");
        assert_ne!(report, run(preset.of), "{} differs from {}", entry.name, preset.of);
    }
    // A preset takes further parameters.
    assert_eq!(run("ambix-noswitch:period=4s"), run("ambix:switch=false,period=4s"));
    assert_eq!(run("ambix-noswitch:period=4s").policy, "ambix-noswitch:period=4s");
}

#[test]
fn a_changed_parameter_changes_behaviour_and_the_rows_name() {
    let plain = run("hpwp");
    // A hot threshold four times as high finds fewer hot pages, so fewer move.
    let strict = run("hpwp:hot_threshold=12");
    assert_eq!(strict.policy, "hpwp:hot_threshold=12");
    assert!(
        strict.pages_migrated < plain.pages_migrated,
        "hot_threshold=12 moved {} pages, the default {}",
        strict.pages_migrated,
        plain.pages_migrated
    );
    // HeMem with one sampled read enough to make a page hot moves cold pages too; with one
    // sample in a million accesses it finds the hot pages later, and runs slower.
    let hemem = run("hemem");
    assert!(run("hemem:hot_reads=1").pages_migrated > hemem.pages_migrated);
    assert!(run("hemem:sample_period=1000000").runtime_ns > hemem.runtime_ns);
    // kernel-tiering with no promotions at all.
    let none = run("kernel-tiering:rate_limit=0");
    let kt = run("kernel-tiering");
    assert!(none.bytes_migrated < kt.bytes_migrated);
}
