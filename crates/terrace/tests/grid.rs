//! Grids of `terrace compare` (docs/grids.md): a grid's shards, merged, are the one-machine run
//! to the byte; the axes come from flags or a TOML file; and `merge` takes only every shard of
//! one grid, once each.

mod support;
use std::path::Path;
use support::{fails, stdout, terrace};

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

/// The grid of the main test, on the command line: 2 workloads x 2 fast-tier sizes x 2 seeds
/// = 8 cells of 3 policies (first-touch added).
const AXES: [&str; 10] = [
    "--workloads",
    "gups,stream-triad",
    "--policies",
    "all-fast,hpwp",
    "--fast-capacity",
    "25%,50%",
    "--seed",
    "1,2",
    "--size-scale",
    "0.0625",
];

/// The same grid as a file.
const GRID_TOML: &str = r#"
workloads = ["gups", "stream-triad"]
policies = ["all-fast", "hpwp"]
fast_capacity = ["25%", "50%"]
seed = [1, 2]
size_scale = 0.0625
"#;

#[test]
fn merged_shards_equal_the_one_machine_run_to_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let whole = {
        let mut args = vec!["compare"];
        args.extend(AXES);
        let (json, csv) = (path(d, "whole.json"), path(d, "whole.csv"));
        args.extend(["--json", &json, "--csv", &csv]);
        stdout(&args)
    };
    // The shards read the grid from a file: the same axes make the same grid.
    let grid = path(d, "grid.toml");
    std::fs::write(&grid, GRID_TOML).unwrap();
    let mut shard_rows: Vec<usize> = Vec::new();
    for i in 0..3 {
        let (shard, json) = (format!("{i}/3"), path(d, &format!("shard-{i}.json")));
        stdout(&["compare", "--grid", &grid, "--shard", &shard, "--json", &json]);
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let cells: Vec<u64> =
            v["cells"].as_array().unwrap().iter().map(|c| c["cell"].as_u64().unwrap()).collect();
        let dealt: Vec<u64> = (0..8).filter(|k| k % 3 == i).collect();
        assert_eq!(cells, dealt, "shard {i} runs the cells dealt to it, each whole");
        shard_rows
            .push(v["cells"].as_array().unwrap().iter().map(|c| c["rows"].as_array().unwrap().len()).sum());
    }
    assert_eq!(shard_rows, [9, 9, 6]);
    // Given in any order.
    let shards = [path(d, "shard-2.json"), path(d, "shard-0.json"), path(d, "shard-1.json")];
    let (json, csv) = (path(d, "merged.json"), path(d, "merged.csv"));
    let mut args = vec!["compare", "merge"];
    args.extend(shards.iter().map(String::as_str));
    args.extend(["--json", &json, "--csv", &csv]);
    let merged = stdout(&args);
    assert_eq!(merged, whole);
    let read = |name: &str| std::fs::read(d.join(name)).unwrap();
    assert!(read("merged.json") == read("whole.json"), "the merged JSON differs from one machine's");
    assert!(read("merged.csv") == read("whole.csv"), "the merged CSV differs from one machine's");

    // What the one machine wrote: a table per machine (fast-tier size and seed), every cell's
    // rows with speedups over its own first-touch.
    let headers: Vec<&str> = whole.lines().filter(|l| l.starts_with("profile ")).collect();
    assert_eq!(
        headers,
        [
            "profile optane-2019; fast tier 25% of each footprint; seed 1",
            "profile optane-2019; fast tier 25% of each footprint; seed 2",
            "profile optane-2019; fast tier 50% of each footprint; seed 1",
            "profile optane-2019; fast tier 50% of each footprint; seed 2",
        ]
    );
    let v: serde_json::Value = serde_json::from_str(&String::from_utf8(read("whole.json")).unwrap()).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 24);
    for r in rows.iter().filter(|r| r["policy"] == "first-touch") {
        assert_eq!(r["speedup_over_first_touch"], 1.0, "{r}");
    }
    let gups_ft = |seed: u64| {
        rows.iter()
            .find(|r| r["workload"] == "gups" && r["policy"] == "first-touch" && r["seed"] == seed)
            .map(|r| r["runtime_ns"].as_f64().unwrap())
            .unwrap()
    };
    assert_ne!(gups_ft(1), gups_ft(2), "the seeds are different runs");
    let csv = String::from_utf8(read("whole.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",energy_j,seed"), "{csv}");
    assert_eq!(csv.lines().count(), 25);
}

/// Shards of a one-workload grid of first-touch alone on 2 seeds: 2 cells, one per shard.
fn two_shards(d: &Path, seeds: &str) -> [String; 2] {
    [0, 1].map(|i| {
        let json = path(d, &format!("s{seeds}-{i}.json"));
        stdout(&[
            "compare",
            "--workloads",
            "stream-ro",
            "--policies",
            "first-touch",
            "--size-scale",
            "0.03125",
            "--seed",
            seeds,
            "--shard",
            &format!("{i}/2"),
            "--json",
            &json,
        ]);
        json
    })
}

#[test]
fn merge_takes_every_shard_of_one_grid_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let [a0, a1] = two_shards(d, "1,2");
    let [b0, _] = two_shards(d, "1,3");
    let out = stdout(&["compare", "merge", &a0, &a1]);
    assert_eq!(out.lines().filter(|l| l.starts_with("stream-ro")).count(), 2, "{out}");

    assert!(fails(&["compare", "merge", &a0]).contains("shard 1/2 of the grid is missing; merge needs all 2"));
    let err = fails(&["compare", "merge", &a0, &a1, &a0]);
    assert!(err.contains("are both shard 0/2"), "{err}");
    let err = fails(&["compare", "merge", &b0, &a1]);
    assert!(err.contains("are shards of different grids (they differ in `seed`)"), "{err}");
    // A shard cut short: its cell gone.
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a1).unwrap()).unwrap();
    v["cells"] = serde_json::json!([]);
    let cut = path(d, "cut.json");
    std::fs::write(&cut, v.to_string()).unwrap();
    assert!(fails(&["compare", "merge", &a0, &cut]).contains("does not hold shard 1/2's runs in full"));
    // Shards of an edited grid.
    let edited: Vec<String> = [&a0, &a1]
        .iter()
        .enumerate()
        .map(|(i, shard)| {
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(shard).unwrap()).unwrap();
            v["grid"]["fast_capacity"] = serde_json::json!(["lots"]);
            let edited = path(d, &format!("edited-{i}.json"));
            std::fs::write(&edited, v.to_string()).unwrap();
            edited
        })
        .collect();
    let err = fails(&["compare", "merge", &edited[0], &edited[1]]);
    assert!(err.contains("its grid's fast_capacity 'lots' is not a size"), "{err}");
    // A shard of another split of the same grid.
    let third = path(d, "third.json");
    stdout(&[
        "compare",
        "--workloads",
        "stream-ro",
        "--policies",
        "first-touch",
        "--size-scale",
        "0.03125",
        "--seed",
        "1,2",
        "--shard",
        "2/3",
        "--json",
        &third,
    ]);
    assert!(
        fails(&["compare", "merge", &a0, &third]).contains("a grid is merged from the shards of one split")
    );
    // Not shards at all.
    let whole = path(d, "whole.json");
    stdout(&[
        "compare",
        "--workloads",
        "stream-ro",
        "--policies",
        "first-touch",
        "--size-scale",
        "0.03125",
        "--json",
        &whole,
    ]);
    assert!(fails(&["compare", "merge", &whole]).contains("is a whole comparison's JSON, not a shard's"));
    let junk = path(d, "junk.json");
    std::fs::write(&junk, "{\"rows\": 1}").unwrap();
    assert!(fails(&["compare", "merge", &junk]).contains("is not a shard of `terrace compare --shard"));
    assert!(fails(&["compare", "merge", &path(d, "none.json")]).contains("does not exist"));
    assert!(fails(&["compare", "merge"]).contains("SHARD.json"));
}

#[test]
fn grid_files_and_flags_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let grid = path(d, "g.toml");
    std::fs::write(&grid, "workloads = [\"gups\"]\nseeds = [1, 2]\n").unwrap();
    let err = fails(&["compare", "--grid", &grid]);
    assert!(err.contains("unknown field `seeds`") && err.contains("line 2"), "{err}");
    std::fs::write(&grid, "seed = 1\n").unwrap();
    assert!(fails(&["compare", "--grid", &grid]).contains("invalid type"));
    std::fs::write(&grid, "fast_capacity = [\"0%\"]\n").unwrap();
    assert!(fails(&["compare", "--grid", &grid]).contains("fast_capacity '0%'"));
    std::fs::write(&grid, "workloads = []\n").unwrap();
    assert!(fails(&["compare", "--grid", &grid]).contains("names no workload"));
    std::fs::write(&grid, "profile = [\"nope\"]\n").unwrap();
    assert!(fails(&["compare", "--grid", &grid]).contains("unknown profile 'nope'"));
    assert!(fails(&["compare", "--grid", &grid, "--seed", "2"]).contains("cannot be used with"));
    assert!(fails(&["compare", "--grid", &path(d, "none.toml")]).contains("does not exist"));
    assert!(fails(&["compare", "--shard", "0/2"]).contains("--shard needs --json"));
    assert!(fails(&["compare", "--shard", "2/2", "--json", "x"]).contains("the last of 2 is 1/2"));
    assert!(fails(&["compare", "--seed", "1,x"]).contains("is not a seed"));
    assert!(fails(&["compare", "--fast-capacity", "25%,-1"]).contains("cannot be negative"));
    // The flags belong to compare, not to its merge.
    assert!(fails(&["compare", "--size-scale", "0.1", "merge", "a.json"]).contains("merge"));
}

/// The example grid is valid: a shard past its 120 cells checks it (profiles, policies, sizes)
/// and runs nothing.
#[test]
fn the_example_grid_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let grid = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/grid/grid.toml");
    let json = path(dir.path(), "e.json");
    let out = terrace()
        .args(["compare", "--grid", grid.to_str().unwrap(), "--shard", "120/121", "--json", &json])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("0 of the grid's 120 cells, 0 runs"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for p in v["grid"]["profiles"].as_array().unwrap() {
        assert_eq!(p["policies"].as_array().unwrap().len(), 9, "{p}");
    }
}

/// A run that fails in a shard (hpwp manages two tiers, three-tier has three) is in its shard's
/// file, and the merge reports it as one machine does: the same table, the same lines, exit 2.
#[test]
fn failed_runs_are_merged_as_one_machine_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let axes = [
        "--workloads",
        "stream-ro",
        "--policies",
        "hpwp",
        "--profile",
        "optane-2019,three-tier",
        "--size-scale",
        "0.03125",
    ];
    let run = |extra: &[&str], first: &[&str]| {
        let out = terrace().args(first).args(extra).output().unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let whole = run(&axes, &["compare"]);
    assert_eq!(whole.0, Some(2));
    assert!(whole.2.ends_with("terrace: 1 of 4 runs failed (above)\n"), "{}", whole.2);
    let shards: Vec<String> = (0..2).map(|i| path(dir.path(), &format!("f{i}.json"))).collect();
    for (i, json) in shards.iter().enumerate() {
        let shard = format!("{i}/2");
        let (code, _, _) = run(&axes, &["compare", "--shard", &shard, "--json", json]);
        assert_eq!(code, Some(if i == 1 { 2 } else { 0 }), "shard {i}: the failed run is three-tier's");
    }
    let merged = run(&[&shards[0], &shards[1]], &["compare", "merge"]);
    assert_eq!(merged, whole);
}

/// `--plot` draws one machine's comparison: from a merge of that machine's shards as from the run
/// itself; a grid of several machines, or a shard, is refused in one line before anything runs.
#[test]
fn a_merge_plots_what_one_machine_would_and_a_grid_of_machines_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let one = ["--workloads", "gups,stream-triad", "--policies", "all-fast", "--size-scale", "0.0625"];
    let mut shards = Vec::new();
    for i in 0..2 {
        let json = path(dir.path(), &format!("s{i}.json"));
        let shard = format!("{i}/2");
        let mut args: Vec<&str> = vec!["compare"];
        args.extend(one);
        args.extend(["--shard", &shard, "--json", &json]);
        stdout(&args);
        shards.push(json);
    }
    let merged = path(dir.path(), "merged.svg");
    let mut args = vec!["compare", "merge"];
    args.extend(shards.iter().map(String::as_str));
    args.extend(["--plot", &merged]);
    stdout(&args);
    let direct = path(dir.path(), "direct.svg");
    let mut args = vec!["compare"];
    args.extend(one);
    args.extend(["--plot", &direct]);
    stdout(&args);
    let svg = std::fs::read_to_string(&merged).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("gups") && svg.contains("stream-triad"), "{svg:.200}");
    assert_eq!(svg, std::fs::read_to_string(&direct).unwrap(), "the merge draws what the run does");

    let e = fails(&["compare", "--workloads", "gups", "--fast-capacity", "25%,50%", "--plot", &direct]);
    assert!(e.contains("--plot draws one machine's comparison, and this grid has 2"), "{e}");
    let e =
        fails(&["compare", "--workloads", "gups", "--shard", "0/2", "--json", &shards[0], "--plot", &direct]);
    assert!(e.contains("plot the merged shards"), "{e}");
}
