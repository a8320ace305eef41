//! The `terrace` command as a user meets it: listings, runs, outputs, and one clear line for
//! every kind of bad input.

mod support;
use std::path::Path;
use support::{fails, stdout, terrace};

const TINY: &str = "0.0625";

#[test]
fn lists_name_every_workload_policy_and_profile() {
    let w = stdout(&["list", "workloads"]);
    for name in ["gups", "pmbench-s12-r50", "stream-triad", "stream-ro"] {
        assert!(w.contains(name), "{name} missing");
    }
    let p = stdout(&["list", "policies"]);
    for name in
        ["first-touch", "interleave", "weighted-interleave", "all-fast", "all-slow", "memory-mode", "oracle"]
    {
        assert!(p.contains(name), "{name} missing");
    }
    let suite = stdout(&["list", "suite"]);
    assert_eq!(suite.lines().collect::<Vec<_>>(), terrace_workloads::DEFAULT_SUITE);
    let f = stdout(&["list", "profiles"]);
    for name in ["optane-2019", "cxl", "remote-socket"] {
        assert!(f.contains(name), "{name} missing");
    }
}

#[test]
fn sim_prints_a_report_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = stdout(&[
        "sim",
        "-w",
        "gups",
        "-p",
        "oracle",
        "--size-scale",
        TINY,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.contains("run time") && out.contains("fast-tier hits"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["policy"], "oracle");
    assert!(v["runtime_ns"].as_f64().unwrap() > 0.0);
    assert!(v["pages_migrated"].as_u64().unwrap() > 0, "the oracle moves pages on GUPS");
}

#[test]
fn compare_prints_one_row_per_pair_and_writes_csv_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, json) = (dir.path().join("c.csv"), dir.path().join("c.json"));
    let out = stdout(&[
        "compare",
        "--workloads",
        "gups,stream-ro",
        "--policies",
        "all-fast,all-slow",
        "--size-scale",
        TINY,
        "--csv",
        csv.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    // first-touch is always added as the reference: 2 workloads x 3 policies.
    let rows = out.lines().filter(|l| l.starts_with("gups") || l.starts_with("stream-ro")).count();
    assert_eq!(rows, 6, "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 7);
    assert!(text.starts_with(
        "workload,policy,profile,footprint_bytes,fast_capacity_bytes,fast_share_of_footprint,runtime_s,speedup_over_first_touch"
    ));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v.as_array().unwrap();
    let ft = rows.iter().find(|r| r["workload"] == "gups" && r["policy"] == "first-touch").unwrap();
    assert_eq!(ft["speedup_over_first_touch"], 1.0);
    let fast = rows.iter().find(|r| r["workload"] == "gups" && r["policy"] == "all-fast").unwrap();
    assert!(fast["speedup_over_first_touch"].as_f64().unwrap() > 1.0);
    // Every row says how large the fast tier was: the same for every policy of a workload,
    // the workload's suggested size (below its footprint), in the table too.
    for w in ["gups", "stream-ro"] {
        let mine: Vec<_> = rows.iter().filter(|r| r["workload"] == w).collect();
        let bytes = mine[0]["fast_capacity_bytes"].as_u64().unwrap();
        let footprint = mine[0]["footprint_bytes"].as_u64().unwrap();
        assert!(bytes > 0 && bytes < footprint, "{w}: {bytes} of {footprint}");
        let share = mine[0]["fast_share_of_footprint"].as_f64().unwrap();
        assert!((share - bytes as f64 / footprint as f64).abs() < 1e-9);
        assert!(mine.iter().all(|r| r["fast_capacity_bytes"].as_u64() == Some(bytes)));
        let cell = format!("{:.0}%", 100.0 * share);
        assert!(out.lines().any(|l| l.starts_with(w) && l.contains(&cell)), "{w}: no {cell} in {out}");
    }
    assert!(out.lines().next().unwrap().contains("fast tier"), "{out}");
}

/// `--workloads` splits a workload's parameters as `--policies` splits a policy's: an item
/// `key=value` continues the workload before it, which is then run with both parameters.
#[test]
fn compare_keeps_a_workloads_parameters_together() {
    let csv = |list: &str| {
        stdout(&[
            "compare",
            "--workloads",
            list,
            "--policies",
            "all-fast",
            "--size-scale",
            TINY,
            "--csv",
            "-",
        ])
    };
    // Each row's workload, policy and run time (after the profile, footprint, fast tier and its
    // share).
    let rows = |list: &str| -> Vec<(String, String, f64)> {
        csv(list)
            .lines()
            .skip(1)
            .map(|l| {
                let (workload, rest) = l.split_once(",first-touch,").or(l.split_once(",all-fast,")).unwrap();
                let policy = if l.contains(",all-fast,") { "all-fast" } else { "first-touch" };
                (workload.to_string(), policy.to_string(), rest.split(',').nth(4).unwrap().parse().unwrap())
            })
            .collect()
    };
    let both = rows("objects:instructions=41,run=64,gups");
    let workloads: std::collections::BTreeSet<&str> = both.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(workloads.into_iter().collect::<Vec<_>>(), ["\"objects:instructions=41,run=64\"", "gups"]);
    // Both parameters took effect: the pace is 41 instructions an access, not the default 20.
    let all_fast = |rows: &[(String, String, f64)]| rows.iter().find(|r| r.1 == "all-fast").unwrap().2;
    assert!(
        all_fast(&both) > all_fast(&rows("objects:run=64")) * 1.2,
        "41 instructions an access slow the run"
    );
    assert!(fails(&["compare", "--workloads", "objects:instructions=41,runs=64", "--size-scale", TINY])
        .contains("runs"));
}

/// `--csv -` and `--json -` write the copy to standard output and the table to standard error,
/// so the copy can be piped; both at once is refused before any run, as is a shard's file there.
/// Until 2026-11-30 `--csv -` wrote a file named "-".
#[test]
fn a_dash_sends_the_copy_to_standard_output_and_the_table_to_standard_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = |flag: &str| {
        terrace()
            .current_dir(dir.path())
            .args([
                "compare",
                "--workloads",
                "gups",
                "--policies",
                "all-slow",
                "--size-scale",
                TINY,
                flag,
                "-",
            ])
            .output()
            .unwrap()
    };
    let out = run("--csv");
    assert!(out.status.success());
    let (copy, table) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert!(copy.starts_with("workload,policy,profile,"), "{copy}");
    assert_eq!(copy.lines().count(), 3, "{copy}");
    assert!(table.contains("run time") && table.lines().any(|l| l.starts_with("gups")), "{table}");
    let out = run("--json");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert!(String::from_utf8(out.stderr).unwrap().contains("run time"));
    assert!(!dir.path().join("-").exists());
    assert!(fails(&["compare", "--workloads", "gups", "--csv", "-", "--json", "-"])
        .contains("both go to standard output"));
    assert!(fails(&["compare", "--workloads", "gups", "--shard", "1/2", "--json", "-"])
        .contains("--shard needs --json FILE"));
}

#[test]
fn energy_implies_a_plausible_memory_power() {
    // 0.1 to 100 W: the bounds of docs/model.md §7 (one socket's memory). The implied power was
    // 3.2 kW when the Ambix thesis' printed unit was taken literally.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    stdout(&[
        "compare",
        "--workloads",
        "gups,stream-triad",
        "--size-scale",
        TINY,
        "--policies",
        "all-fast,all-slow,hpwp",
        "--json",
        json.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for r in v.as_array().unwrap() {
        let watts = r["energy_j"].as_f64().unwrap() / (r["runtime_ns"].as_f64().unwrap() * 1e-9);
        assert!((0.1..=100.0).contains(&watts), "{} under {}: {watts} W", r["workload"], r["policy"]);
    }
}

#[test]
fn traces_round_trip_through_generate_info_and_sim() {
    let dir = tempfile::tempdir().unwrap();
    let exact = dir.path().join("g.trc");
    let out =
        stdout(&["trace", "generate", "-w", "gups", "--size-scale", TINY, "-o", exact.to_str().unwrap()]);
    assert!(out.contains("wrote"), "{out}");
    let info = stdout(&["trace", "info", exact.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(v["info"]["name"], "gups");
    assert_eq!(v["threads"], 16);
    // Replaying the trace gives exactly what the generator gives.
    let from_trace = stdout(&["sim", "-w", exact.to_str().unwrap(), "-p", "oracle"]);
    let from_generator = stdout(&["sim", "-w", "gups", "-p", "oracle", "--size-scale", TINY]);
    assert_eq!(from_trace, from_generator);

    let agg = dir.path().join("a.trc");
    stdout(&[
        "trace",
        "generate",
        "-w",
        "gups",
        "--size-scale",
        TINY,
        "--aggregate-epoch",
        "10000",
        "-o",
        agg.to_str().unwrap(),
    ]);
    let info = stdout(&["trace", "info", agg.to_str().unwrap()]);
    assert!(info.contains("per-page counts"), "{info}");
    // Page counts replay with the same traffic per tier when placement does not depend on order.
    let tiers = |out: &str| out.lines().find(|l| l.starts_with("accesses")).unwrap().to_string();
    let from_counts = stdout(&["sim", "-w", agg.to_str().unwrap(), "-p", "all-slow"]);
    let from_events = stdout(&["sim", "-w", exact.to_str().unwrap(), "-p", "all-slow"]);
    assert_eq!(tiers(&from_counts), tiers(&from_events));
    // memory-mode's run of page counts is flagged, once per workload, and not that of events.
    let stderr = |args: &[&str]| {
        let out = terrace().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let note = "memory-mode's figures on it are not to be trusted";
    let agg = agg.to_str().unwrap();
    assert!(stderr(&["sim", "-w", agg, "-p", "memory-mode"]).contains(note));
    assert!(!stderr(&["sim", "-w", agg, "-p", "ambix"]).contains(note));
    assert!(!stderr(&["sim", "-w", exact.to_str().unwrap(), "-p", "memory-mode"]).contains(note));
    let both = format!("{agg},{}", exact.to_str().unwrap());
    let err =
        stderr(&["compare", "--workloads", &both, "--policies", "memory-mode", "--fast-capacity", "10%,20%"]);
    assert_eq!(err.matches(note).count(), 1, "{err}");
    // Two traces recorded as "gups", and the built-in gups: each row says which it is, and each
    // speedup is over its own first-touch run (the exact trace's is the generator's).
    let exact = exact.to_str().unwrap();
    let three = format!("{exact},{agg},gups");
    let csv = dir.path().join("c.csv");
    let csv = csv.to_str().unwrap();
    stdout(&["compare", "--workloads", &three, "--policies", "ambix", "--size-scale", TINY, "--csv", csv]);
    let out = std::fs::read_to_string(csv).unwrap();
    let speedup = |label: &str| -> f64 {
        let row = out.lines().find(|l| l.starts_with(&format!("{label},")) && l.contains(",ambix,"));
        let row = row.unwrap_or_else(|| panic!("no ambix row labelled {label}: {out}"));
        row.split(',').nth(7).unwrap().parse().unwrap()
    };
    assert_eq!(speedup(exact), speedup("gups"));
    assert_ne!(speedup(agg), speedup(exact), "the aggregated trace's speedup is its own");
    // Alone, a trace keeps the name it was recorded with.
    stdout(&["compare", "--workloads", exact, "--policies", "ambix", "--csv", csv]);
    let alone = std::fs::read_to_string(csv).unwrap();
    assert!(alone.lines().any(|l| l.starts_with("gups,") && l.contains(",ambix,")), "{alone}");
}

/// A trace keeps the object events of the stream it records (a wrapper once kept them back), so
/// an object policy replays it as it runs the generator; a stream of several programs is no one
/// program's trace, and is refused before a file is made.
#[test]
fn traces_keep_object_events_and_refuse_several_programs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.trc");
    let small = "0.03125";
    stdout(&["trace", "generate", "-w", "objects", "--size-scale", small, "-o", path.to_str().unwrap()]);
    let info = stdout(&["trace", "info", path.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert!(v["object_events"].as_u64().unwrap() > 1000, "{info}");
    let from_trace = stdout(&["sim", "-w", path.to_str().unwrap(), "-p", "objects"]);
    let from_generator = stdout(&["sim", "-w", "objects", "-p", "objects", "--size-scale", small]);
    let migrated = |out: &str| out.lines().find(|l| l.starts_with("migrated")).unwrap().to_string();
    assert_eq!(migrated(&from_trace), migrated(&from_generator));
    let pair = dir.path().join("pair.trc");
    let err = fails(&[
        "trace",
        "generate",
        "-w",
        "objects-pair",
        "--size-scale",
        small,
        "-o",
        pair.to_str().unwrap(),
    ]);
    assert!(err.contains("a trace holds one program"), "{err}");
    assert!(!pair.exists());
}

fn write(path: &Path, bytes: &[u8]) -> String {
    std::fs::write(path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn bad_input_gets_one_line_and_a_nonzero_exit() {
    assert!(fails(&["sim", "-w", "nope"]).contains("unknown workload 'nope'"));
    assert!(fails(&["sim", "-w", "gups", "-p", "nope"]).contains("unknown policy 'nope'"));
    assert!(fails(&["sim", "-w", "gups", "--profile", "nope"]).contains("unknown profile 'nope'"));
    assert!(fails(&["compare", "--workloads", "gups", "--policies", "nope"]).contains("unknown policy"));
    let err = fails(&["sim", "-w", "gups", "--fast-capacity", "1%", "--slow-capacity", "1MiB"]);
    assert!(err.contains("does not fit") && err.contains("--fast-capacity"), "{err}");
    assert!(fails(&["sim", "-w", "gups", "--size-scale=-1"]).contains("size scale"));

    let dir = tempfile::tempdir().unwrap();
    let junk = write(&dir.path().join("junk.trc"), b"this is not a trace at all");
    assert!(fails(&["sim", "-w", &junk]).contains("not a Terrace trace"));
    assert!(fails(&["trace", "info", &junk]).contains("not a Terrace trace"));

    let good = dir.path().join("g.trc");
    stdout(&["trace", "generate", "-w", "gups", "--size-scale", TINY, "-o", good.to_str().unwrap()]);
    let bytes = std::fs::read(&good).unwrap();
    let cut = write(&dir.path().join("cut.trc"), &bytes[..bytes.len() / 2]);
    assert!(fails(&["sim", "-w", &cut]).contains("truncated"));
    assert!(fails(&["trace", "info", &cut]).contains("truncated"));
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    let flipped = write(&dir.path().join("flip.trc"), &flipped);
    fails(&["sim", "-w", &flipped]);

    let profile = write(&dir.path().join("p.toml"), b"name = 3");
    assert!(fails(&["sim", "-w", "gups", "--profile", &profile]).contains("malformed"));

    // A path that does not exist is a missing file, not an unknown workload.
    for missing in ["./nonexistent.trc", "nonexistent.trc", "some/dir/trace"] {
        let err = fails(&["sim", "-w", missing]);
        assert!(err.contains("does not exist") && !err.contains("unknown workload"), "{err}");
    }
    // Usage errors are one line too, and negative numbers reach the parser instead of being
    // taken for flags.
    assert!(fails(&["sim", "-w", "gups", "--fast-capacity", "-1"]).contains("cannot be negative"));
    assert!(fails(&["sim", "-w", "gups", "--fast-capacity", "-5%"]).contains("cannot be negative"));
    assert!(fails(&["sim", "-w", "gups", "--seed", "-3"]).contains("is not a seed"));
    assert!(fails(&["sim", "-w", "gups", "--bogus"]).contains("--bogus"));
    let err = fails(&["bench", "ceiling", "--exhaustive", "--workloads", "gups,nope"]);
    assert!(err.contains("'nope' is no built-in workload"), "{err}");
    // A file that cannot be written is named, and the OS error is said once.
    let err = fails(&[
        "compare",
        "--workloads",
        "gups",
        "--policies",
        "all-fast",
        "--size-scale",
        TINY,
        "--csv",
        "/dev/full",
    ]);
    assert!(err.contains("/dev/full") && err.matches("No space left").count() == 1, "{err}");
}

#[test]
fn an_oversized_fast_tier_is_run_and_explained() {
    let out = terrace()
        .args(["sim", "-w", "gups", "--size-scale", TINY, "--fast-capacity", "150%"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("more than the footprint"), "{err}");
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("150% of the footprint"), "{report}");
}

/// The fake sysfs/procfs trees of terrace-linux's topology tests.
#[cfg(all(feature = "live", target_os = "linux"))]
fn fixture(name: &str) -> (String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../terrace-linux/tests/fixtures").join(name);
    (root.join("sys").to_str().unwrap().into(), root.join("proc").to_str().unwrap().into())
}

#[test]
#[cfg(all(feature = "live", target_os = "linux"))] // needs the live machine
fn doctor_exits_1_when_the_host_cannot_tier() {
    let code = |name: &str| {
        let (sys, proc_) = fixture(name);
        let out = terrace().args(["doctor", "--sys", &sys, "--proc-root", &proc_]).output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("Findings") || out.status.code() == Some(0));
        out.status.code()
    };
    assert_eq!(code("single-node"), Some(1), "a single node cannot tier");
    assert_eq!(code("two-node-hmat"), Some(0));
    // Without HMAT the split is guessed (an information finding), not an error.
    assert_eq!(code("two-node-no-hmat"), Some(0));
    let out =
        terrace().args(["doctor", "--sys", "/nonexistent", "--proc-root", "/nonexistent"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "doctor that cannot read the host at all");
}

#[test]
fn zero_capacity_is_refused_by_the_argument_parser() {
    let out = terrace().args(["sim", "-w", "gups", "--fast-capacity", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("above zero") && !err.contains("panicked"), "{err}");
}

#[test]
fn bench_prints_every_figure() {
    let out = stdout(&["bench", "sim", "--size-scale", "0.03125"]);
    for line in [
        "generate only",
        "decode trace only",
        "simulate, first-touch",
        "simulate, sampling tracker",
        "ratio decode / trace replay",
    ] {
        assert!(out.contains(line), "{line} missing: {out}");
    }
}

/// `bench page-size` replays each workload at both page sizes and both chains, and refuses a
/// bad workload before replaying anything.
#[test]
#[cfg(all(feature = "live", target_os = "linux"))] // replays on this host's memory
fn page_size_bench_prints_a_row_per_workload_and_refuses_a_bad_one() {
    let out = stdout(&[
        "bench",
        "page-size",
        "--workloads",
        "gups,npb-cg-small",
        "--size-scale",
        TINY,
        "--accesses",
        "40000",
        "--repeat",
        "1",
    ]);
    for w in ["gups", "npb-cg-small"] {
        let row = out.lines().find(|l| l.starts_with(w)).unwrap_or_else(|| panic!("no row for {w}: {out}"));
        // Two 4K/2M ratios (independent, dependent), each a positive factor.
        let ratios: Vec<f64> =
            row.split_whitespace().filter_map(|c| c.strip_suffix('x')).map(|c| c.parse().unwrap()).collect();
        assert_eq!(ratios.len(), 2, "{row}");
        assert!(ratios.iter().all(|r| *r > 0.0 && r.is_finite()), "{row}");
        assert!(row.contains(" 40000 "), "the accesses replayed: {row}");
    }
    let err = fails(&["bench", "page-size", "--workloads", "gups,nope", "--accesses", "1000"]);
    assert!(err.contains("nope") && err.lines().count() == 1, "{err}");
}

/// `list policies --params`: every parameter of every policy, with its default, range and
/// source; each preset says what it is.
#[test]
fn list_params_shows_every_parameter_of_every_policy() {
    let out = stdout(&["list", "policies", "--params"]);
    for p in terrace_policy::list() {
        assert!(out.lines().any(|l| l.starts_with(p.name) && l.contains(p.summary)), "{} missing", p.name);
        if let Some(preset) = p.preset {
            assert!(out.contains(&format!("preset: {}:", preset.of)), "{}: no preset line", p.name);
            continue;
        }
        for param in p.params {
            let line = format!("    {} = {}  ({})", param.name, param.default, param.kind.range());
            assert!(out.contains(&line), "{}: no line {line:?}", p.name);
            assert!(
                out.contains(&format!("source: {}", param.source)),
                "{}.{}: no source",
                p.name,
                param.name
            );
        }
    }
    // The plain listing keeps its shape: one line per policy.
    assert_eq!(stdout(&["list", "policies"]).lines().count(), terrace_policy::list().len());
    assert!(fails(&["list", "workloads", "--params"]).contains("--params goes with `terrace list policies`"));
}

#[test]
fn sim_and_compare_take_policies_with_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = stdout(&[
        "sim",
        "-w",
        "gups",
        "-p",
        "hpwp:hot_threshold=8",
        "--size-scale",
        TINY,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.contains("hpwp:hot_threshold=8"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["policy"], "hpwp:hot_threshold=8");
    // A spec's own commas stay with it; the same policy twice (a preset and its values) runs once;
    // a sweep adds a row per value, the default's under the plain name.
    let out = stdout(&[
        "compare",
        "--workloads",
        "gups",
        "--size-scale",
        TINY,
        "--policies",
        "hpwp:hpw_writes=2,cooling_threshold=12,ambix-noswitch,ambix:switch=false",
        "--sweep",
        "hpwp.hot_threshold=2,3,8",
    ]);
    let policies: Vec<&str> =
        out.lines().filter(|l| l.starts_with("gups")).map(|l| l.split_whitespace().nth(4).unwrap()).collect();
    assert_eq!(
        policies,
        [
            "first-touch",
            "hpwp:hpw_writes=2,cooling_threshold=12",
            "ambix-noswitch",
            "hpwp:hot_threshold=2",
            "hpwp",
            "hpwp:hot_threshold=8"
        ],
        "{out}"
    );
}

#[test]
fn bad_policy_specs_get_one_line_saying_what_to_do() {
    for (args, want) in [
        (vec!["sim", "-w", "gups", "-p", "hpwq"], "unknown policy 'hpwq'; known: first-touch"),
        (
            vec!["sim", "-w", "gups", "-p", "hpwp:hot=8"],
            "hpwp has no parameter 'hot'; its parameters are hot_threshold,",
        ),
        (
            vec!["sim", "-w", "gups", "-p", "hpwp:hot_threshold=x"],
            "hot_threshold=x is not a whole number; give 1 to 1000",
        ),
        (vec!["sim", "-w", "gups", "-p", "hpwp:hot_threshold=0"], "hot_threshold=0 is out of range"),
        (
            vec!["sim", "-w", "gups", "-p", "hpwp:hot_threshold"],
            "'hot_threshold' has no value; write NAME or NAME:key=value",
        ),
        (vec!["sim", "-w", "gups", "-p", "age:interval=5"], "interval=5 needs a unit"),
        (vec!["sim", "-w", "gups", "-p", "ambix:delay=2s"], "ambix: delay=2s must be shorter than period=2s"),
        (vec!["compare", "--policies", "hot_threshold=8,hpwp"], "a parameter with no policy before it"),
        (vec!["compare", "--policies", ","], "--policies names no policy"),
        (vec!["compare", "--sweep", "hpwp.hot_threshold"], "a sweep is POLICY.KEY=V1,V2,..."),
        (vec!["compare", "--sweep", "hpwp.hot_threshold=2,x"], "hot_threshold=x is not a whole number"),
        (vec!["compare", "--sweep", "first-touch.x=1"], "first-touch takes no parameters"),
    ] {
        let e = fails(&args);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

/// The live commands refuse a config with a bad `[policy.NAME]` table before anything else.
#[cfg(all(feature = "live", target_os = "linux"))]
#[test]
#[cfg(all(feature = "live", target_os = "linux"))] // needs the live machine
fn a_bad_policy_table_in_the_config_is_refused_by_run_and_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(&dir.path().join("c.toml"), b"[policy.hpwp]\nhot_treshold = 8\n");
    let want = format!("config '{config}' is invalid: [policy.hpwp]: hpwp has no parameter 'hot_treshold'");
    for args in [vec!["run", "--config", &config, "--", "true"], vec!["daemon", "--config", &config]] {
        let e = fails(&args);
        assert!(e.contains(&want), "{args:?}: {e}");
    }
}

/// On a host of one memory node a dry run tracks and decides against a stand-in slow tier and
/// says so once; a run that would move pages is still refused, and so is a policy whose tracker
/// the host lacks, with its one line. (On a host of more nodes there is nothing to check here.)
#[cfg(all(feature = "live", target_os = "linux"))]
#[test]
fn a_dry_run_on_one_node_tracks_and_a_real_run_is_refused() {
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_prefix("node").is_some_and(|n| n.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0);
    if nodes != 1 {
        eprintln!("skipped: this host has {nodes} NUMA nodes, not one");
        return;
    }
    const LINE: &str = "single-node dry run";
    let out = terrace().args(["run", "--dry-run", "--policy", "first-touch", "--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches(LINE).count(), 1, "{err}");
    let e = fails(&["run", "--policy", "first-touch", "--", "true"]);
    assert!(e.contains("single memory tier"), "{e}");
    // Whatever trackers this host has: each policy either runs (and says it is a single-node dry
    // run) or is refused with one line naming what is missing.
    for policy in ["age", "hemem"] {
        let out = terrace().args(["run", "--dry-run", "--policy", policy, "--", "true"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            assert_eq!(err.matches(LINE).count(), 1, "{policy}: {err}");
        } else {
            let e = fails(&["run", "--dry-run", "--policy", policy, "--", "true"]);
            assert!(e.contains(&format!("policy {policy} cannot run here")), "{e}");
        }
    }
}

/// `terrace run` of a shell running 3,000 short commands under hemem, whose fault sampler joins
/// each process of the tree with a userfaultfd made inside it: the shell runs to its end (a
/// command that exited as it joined once hung it, its exit held by Terrace, its tracer), and a
/// command that exited as it joined is neither warned about as refused (ptrace answers EPERM for
/// a process exiting) nor logged as managed. Where hemem cannot run, one line says so.
#[test]
fn run_of_a_shell_of_short_commands_ends_and_blames_no_exit_on_ptrace() {
    let out = terrace()
        .args(["run", "--dry-run", "--policy", "hemem", "--", "sh", "-c"])
        .arg("i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done; exit 4")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("policy hemem cannot run here") {
        eprintln!("skipped: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(4), "the shell did not run to its end: {err}");
    assert!(!err.contains("joins without a userfaultfd"), "{err}");
    assert!(!err.contains("too, with \n"), "{err}");
}

/// `optimal`, the offline reference, runs by name in `compare`, is never slower than the policies
/// beside it, and says which candidate's run it is.
#[test]
fn compare_runs_optimal_by_name_and_names_its_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("c.csv");
    let out = terrace()
        .args(["compare", "--workloads", "gups", "--policies", "first-touch,oracle,optimal"])
        .args(["--size-scale", "0.015625", "--csv"])
        .arg(&csv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("optimal on gups is the run of"), "{stderr}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let runtime = |policy: &str| -> f64 {
        let line = text.lines().find(|l| l.split(',').nth(1) == Some(policy)).unwrap();
        line.split(',').nth(6).unwrap().parse().unwrap()
    };
    assert!(
        runtime("optimal") <= runtime("oracle") && runtime("optimal") <= runtime("first-touch"),
        "{text}"
    );
}

/// Pages in the fast tier (DRAM) and in all, from a `sim --final-placement` file, checking its
/// runs are in order and none overlaps.
fn final_placement_pages(file: &std::path::Path) -> (u64, u64) {
    let text = std::fs::read_to_string(file).unwrap();
    let (mut next, mut in_fast, mut total) = (0u64, 0u64, 0u64);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        let first = u64::from_str_radix(f[0].trim_start_matches("0x"), 16).unwrap() / 4096;
        let pages: u64 = f[1].parse().unwrap();
        assert!(first >= next, "runs in order, none overlapping: {line}");
        next = first + pages;
        total += pages;
        if f[2] == "DRAM" {
            in_fast += pages;
        }
    }
    (in_fast, total)
}

/// `sim --final-placement`: runs of pages in one tier that together hold every page the run
/// touched once, the fast tier's no more than its capacity; first-touch fills the fast tier.
#[test]
fn the_final_placement_holds_every_touched_page_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("placement.txt");
    let out = stdout(&[
        "sim",
        "-w",
        "gups",
        "--size-scale",
        TINY,
        "--fast-capacity",
        "25%",
        "--json",
        dir.path().join("r.json").to_str().unwrap(),
        "--final-placement",
        file.to_str().unwrap(),
    ]);
    assert!(out.contains("run time"), "{out}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let footprint_pages = report["footprint_bytes"].as_u64().unwrap() / 4096;
    let fast_pages = report["fast_capacity_bytes"].as_u64().unwrap() / 4096;
    let (in_fast, total) = final_placement_pages(&file);
    assert_eq!(total, footprint_pages, "GUPS touches its whole table");
    assert_eq!(in_fast, fast_pages, "first-touch fills the fast tier and moves nothing");
}

/// `sim --start-tier slow`: every page starts in the slow tier, so first-touch (which never
/// moves a page) ends with none fast, and a promoting policy ends with what it promoted; a tier
/// the profile lacks is refused in one line.
#[test]
fn start_tier_places_first_touches_in_the_named_tier() {
    let dir = tempfile::tempdir().unwrap();
    let fast_at_end = |policy: &str, tier: &str| {
        let file = dir.path().join(format!("{policy}-{tier}.txt"));
        let out = stdout(&[
            "sim",
            "-w",
            "gups",
            "--size-scale",
            TINY,
            "--fast-capacity",
            "25%",
            "-p",
            policy,
            "--start-tier",
            tier,
            "--final-placement",
            file.to_str().unwrap(),
        ]);
        assert!(out.contains("run time"), "{out}");
        final_placement_pages(&file).0
    };
    assert_eq!(fast_at_end("first-touch", "slow"), 0, "first-touch moves nothing from where pages start");
    assert!(fast_at_end("first-touch", "fast") > 0);
    assert!(fast_at_end("hemem", "slow") > 0, "hemem promotes from the slow tier");
    let err = fails(&["sim", "-w", "gups", "--size-scale", TINY, "--start-tier", "hbm"]);
    assert!(
        err.contains("--start-tier 'hbm': profile optane-2019 has no such tier; give fast, slow or one of"),
        "{err}"
    );
    let err = fails(&["sim", "-w", "gups", "--size-scale", TINY, "-p", "optimal", "--start-tier", "slow"]);
    assert!(err.contains("--start-tier sets where a policy's pages start"), "{err}");
}

/// Tiers that hold the footprint exactly (8 MiB of GUPS on 3 + 5 MiB): a policy that moves
/// pages holds a frame at both ends of each copy, so a page touched first meanwhile may find no
/// room. The run says that, and what to give, in one line (it blamed the trace before).
#[test]
fn tiers_the_copies_fill_are_one_line_naming_the_room_to_give() {
    let args = ["sim", "-w", "gups", "--size-scale", TINY, "--fast-capacity", "3MiB", "--slow-capacity"];
    let err = fails(&[&args[..], &["5MiB", "-p", "oracle"]].concat());
    assert!(err.contains("copies in flight and shadow copies held the room"), "{err}");
    assert!(err.contains("(--slow-capacity)"), "{err}");
    // A megabyte more, and it runs.
    stdout(&[&args[..], &["6MiB", "-p", "oracle"]].concat());
}
