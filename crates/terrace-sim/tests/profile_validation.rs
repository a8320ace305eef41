//! Profiles that make no physical sense are refused in one line naming the number, its value, its
//! range and why (issue 9: a mutation campaign found profiles with a 1e19 ns latency, a 1e-300 GHz
//! clock or 1e-300 GB/s bandwidths accepted, and runs on them that never ended). Also: malformed
//! TOML gives the line and column, unreadable files are refused in one line, the built-in profiles
//! pass, a profile at the slow end of every range still runs to the end, and docs/model.md shows the
//! ranges as `RANGES` has them.

use terrace_sim::profile::{show_number, Profile, ProfileError, BUILT_IN, RANGES};
use terrace_sim::{simulate, SimOptions};
use toml::Value;

/// optane-2019 as a TOML tree, to change one number at a time.
fn base() -> Value {
    toml::from_str(BUILT_IN.iter().find(|(n, _)| *n == "optane-2019").unwrap().1).unwrap()
}

fn tier(v: &mut Value, i: usize) -> &mut toml::Table {
    v["tiers"].as_array_mut().unwrap()[i].as_table_mut().unwrap()
}

/// Sets the number of a `RANGES` row (for `tiers.*`, in tier `i`) to `x`.
fn set(v: &mut Value, field: &str, i: usize, x: f64) {
    let curve = |threads: f64, gb_s: f64| Value::Array(vec![Value::Array(vec![threads.into(), gb_s.into()])]);
    match field.split_once('.') {
        None => {
            v.as_table_mut().unwrap().insert(field.into(), x.into());
        }
        Some(("tiers", "*_bandwidth_gb_s threads")) => {
            tier(v, i).insert("read_bandwidth_gb_s".into(), curve(x, 10.0));
        }
        Some(("tiers", key)) if key.ends_with("_bandwidth_gb_s") => {
            tier(v, i).insert(key.into(), curve(1.0, x));
        }
        Some(("tiers", "media_granularity_bytes")) => {
            tier(v, i).insert("media_granularity_bytes".into(), (x as i64).into());
        }
        Some(("tiers", key)) => {
            tier(v, i).insert(key.into(), x.into());
        }
        Some((table, key)) => {
            v[table].as_table_mut().unwrap().insert(key.into(), x.into());
        }
    }
}

/// optane-2019 with a copy of its Optane tier in the middle, twice the fast tier's size.
fn three_tiers() -> Value {
    let mut v = base();
    let mut middle = tier(&mut v, 1).clone();
    middle.insert("name".into(), "middle".into());
    middle.insert("capacity_to_fast".into(), 2.0.into());
    v["tiers"].as_array_mut().unwrap().insert(1, Value::Table(middle));
    v
}

fn text(v: &Value) -> String {
    toml::to_string(v).unwrap()
}

/// The one-line refusal of a well-formed profile.
fn invalid(text: &str) -> String {
    let e = Profile::parse("p.toml", text).unwrap_err();
    assert!(matches!(e, ProfileError::Invalid { .. }), "{e}");
    let s = e.to_string();
    assert!(!s.contains('\n'), "not one line: {s}");
    assert!(s.starts_with("profile 'p.toml' is invalid: "), "{s}");
    s
}

/// The one-line refusal of TOML that is not a profile.
fn malformed(text: &str) -> String {
    let e = Profile::parse("p.toml", text).unwrap_err();
    assert!(matches!(e, ProfileError::Malformed { .. }), "{e}");
    let s = e.to_string();
    assert!(!s.contains('\n'), "not one line: {s}");
    assert!(s.starts_with("profile 'p.toml' is malformed: line "), "{s}");
    s
}

#[test]
fn the_built_in_profiles_pass() {
    for (name, _) in BUILT_IN {
        let p = Profile::load(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&p.name, name);
    }
}

/// Every row of the table is checked: below its minimum, above its maximum, NaN and both
/// infinities are refused, naming the number and its range; its bounds themselves pass.
#[test]
fn every_number_outside_its_range_is_refused_naming_it() {
    for r in RANGES {
        // The slow tier: a change to it cannot first trip the check that tier 0 is the faster.
        let below = if r.min > 0.0 { r.min / 2.0 } else { -1.0 };
        let mut bad = vec![below, r.max * 2.0];
        if r.field != "tiers.media_granularity_bytes" {
            bad.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
        }
        for x in bad {
            // A middle tier's size needs a middle tier: tier 1 of three.
            let mut v = if r.field == "tiers.capacity_to_fast" { three_tiers() } else { base() };
            set(&mut v, r.field, 1, x);
            let e = invalid(&text(&v));
            let key = r.field.rsplit_once('.').map_or(r.field, |(_, k)| k);
            let key = if key.ends_with("threads") { "threads" } else { key };
            let range = format!("outside {} to {}", show_number(r.min), show_number(r.max));
            assert!(e.contains(key) && e.contains(&show_number(x)) && e.contains(&range), "{}: {e}", r.field);
            assert!(e.contains(r.why), "{}: {e}", r.field);
        }
    }
}

#[test]
fn the_cases_the_mutation_campaign_found_are_refused() {
    let mut v = base();
    tier(&mut v, 0).insert("read_latency_sequential_ns".into(), 1e19.into());
    assert_eq!(
        invalid(&text(&v)),
        "profile 'p.toml' is invalid: tier 0 (DRAM) read_latency_sequential_ns = 1e19 is outside 1 to \
         100000 ns: no memory answers a read in under 1 ns or takes over 100 µs; cited: 81.4 to 169.4 ns"
    );
    let mut v = base();
    set(&mut v, "cpu_ghz", 0, 1e-300);
    let e = invalid(&text(&v));
    assert!(e.contains("cpu_ghz = 1e-300 is outside 0.1 to 10 GHz"), "{e}");
    let mut v = base();
    set(&mut v, "tiers.read_bandwidth_gb_s", 1, 1e-300);
    let e = invalid(&text(&v));
    assert!(e.contains("tier 1 (Optane) read_bandwidth_gb_s point 1 bandwidth = 1e-300 is outside"), "{e}");
    for key in ["loaded_light_gb_s", "loaded_max_gb_s", "write_bandwidth_gb_s"] {
        let mut v = base();
        set(&mut v, &format!("tiers.{key}"), 0, 1e-300);
        assert!(invalid(&text(&v)).contains(&format!("tier 0 (DRAM) {key}")), "{key}");
    }
    let mut v = base();
    set(&mut v, "migration.copy_gb_s", 0, 1e-300);
    assert!(invalid(&text(&v)).contains("migration.copy_gb_s = 1e-300"));
    // Negative, NaN and infinite numbers as a user would write them.
    let optane = text(&base());
    for (from, to, want) in [
        ("cpu_ghz = 2.3", "cpu_ghz = -2.3", "cpu_ghz = -2.3 is outside"),
        ("cpu_ghz = 2.3", "cpu_ghz = nan", "cpu_ghz = NaN is outside"),
        ("cpu_ghz = 2.3", "cpu_ghz = inf", "cpu_ghz = inf is outside"),
        ("read_latency_random_ns = 305.0", "read_latency_random_ns = -305.0", "= -305 is outside"),
        ("page_us = 2.6", "page_us = nan", "migration.page_us = NaN is outside"),
        ("tlb_shootdown_us = 1.0", "tlb_shootdown_us = -inf", "migration.tlb_shootdown_us = -inf"),
    ] {
        assert!(optane.contains(from), "{from}");
        let e = invalid(&optane.replacen(from, to, 1));
        assert!(e.contains(want), "{to}: {e}");
    }
}

#[test]
fn tier_0_must_be_the_fast_tier() {
    let mut v = base();
    v["tiers"].as_array_mut().unwrap().swap(0, 1);
    assert_eq!(
        invalid(&text(&v)),
        "profile 'p.toml' is invalid: tier 0 (Optane) is slower than tier 1 (DRAM): its random read \
         latency is 305 ns against 101.5 ns; tiers go fastest first: swap the [[tiers]] tables of Optane \
         and DRAM"
    );
    // Latency in order, bandwidth not.
    let mut v = base();
    tier(&mut v, 0).insert(
        "read_bandwidth_gb_s".into(),
        toml::from_str::<Value>("a = [[1.0, 5.0]]").unwrap()["a"].clone(),
    );
    let e = invalid(&text(&v));
    assert!(e.contains("its peak read bandwidth is 5 GB/s against 37.63 GB/s") && e.contains("swap"), "{e}");
    // A tier's name is shown escaped: the refusal stays one line.
    let mut v = base();
    tier(&mut v, 1).insert("name".into(), "Opt\nane".into());
    v["tiers"].as_array_mut().unwrap().swap(0, 1);
    assert!(invalid(&text(&v)).contains("tier 0 (Opt\\nane) is slower"));
    // Equal tiers are allowed (nothing to place, but nothing backwards).
    let mut v = base();
    let fast = tier(&mut v, 0).clone();
    v["tiers"].as_array_mut().unwrap()[1] = Value::Table(fast);
    Profile::parse("p.toml", &text(&v)).unwrap();
}

#[test]
fn curves_and_load_points_must_be_in_order() {
    let mut v = base();
    let curve: Value = toml::from_str("a = [[1.0, 2.0], [8.0, 30.0], [4.0, 35.0]]").unwrap();
    tier(&mut v, 1).insert("read_bandwidth_gb_s".into(), curve["a"].clone());
    let e = invalid(&text(&v));
    assert!(
        e.contains("read_bandwidth_gb_s points must have increasing thread counts, but 4 follows 8"),
        "{e}"
    );
    let mut v = base();
    tier(&mut v, 1).insert("read_bandwidth_gb_s".into(), Value::Array(vec![]));
    assert!(invalid(&text(&v)).contains("needs at least one [threads, GB/s] point"));
    let mut v = base();
    tier(&mut v, 1).insert("loaded_max_gb_s".into(), 0.2.into());
    assert!(invalid(&text(&v)).contains("the max-load point (260 ns at 0.2 GB/s) must lie beyond"));
    let mut v = base();
    tier(&mut v, 1).insert("media_granularity_bytes".into(), 100.into());
    assert!(invalid(&text(&v)).contains("media_granularity_bytes = 100 is not a power of two"));
    let mut v = base();
    set(&mut v, "migration.tlb_shootdown_us", 0, 3.0);
    assert!(invalid(&text(&v)).contains("exceeds migration.page_us"));
}

#[test]
fn malformed_toml_gives_the_line_column_and_key_in_one_line() {
    let optane = BUILT_IN.iter().find(|(n, _)| *n == "optane-2019").unwrap().1;
    let line = optane.lines().position(|l| l.starts_with("cpu_ghz = ")).unwrap() + 2;
    let e = malformed(&format!("cpu_ghz = 1.0\n{optane}"));
    assert!(
        e.contains(&format!("line {line}, column 1: duplicate key `cpu_ghz` (in `cpu_ghz = 2.3`)")),
        "{e}"
    );
    let e = malformed(&optane.replacen("read_latency_random_ns", "read_latency_ns", 1));
    assert!(e.contains("unknown field `read_latency_ns`"), "{e}");
    let e = malformed(&optane.replacen("cpu_ghz = 2.3", "cpu_ghz = \"fast\"", 1));
    assert!(e.contains("column 11: invalid type: string \"fast\", expected f64"), "{e}");
    let e = malformed("name = 3");
    assert!(
        e.contains("line 1, column 8: invalid type: integer `3`, expected a string (in `name = 3`)"),
        "{e}"
    );
    malformed("not toml [");
}

#[test]
fn unreadable_profile_files_are_refused_in_one_line_naming_them() {
    let dir = std::env::temp_dir().join(format!("terrace-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo.toml");
    let have_fifo = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    let mut cases = vec![
        (dir.join("absent.toml"), "does not exist"),
        (dir.clone(), "a directory"),
        ("/dev/zero".into(), "a character device"),
    ];
    if have_fifo {
        cases.push((fifo, "a FIFO"));
    }
    for (path, want) in cases {
        let e = Profile::load(path.to_str().unwrap()).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(want) && s.contains(path.to_str().unwrap()) && !s.contains('\n'), "{s}");
        // The cause is said once: not again as a source, which anyhow's `{:#}` would print too.
        assert!(std::error::Error::source(&e).is_none(), "{s}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The slow end of every range (the longest latencies, the least bandwidth, the slowest clock and
/// the dearest migrations) still gives a run that ends, and in seconds.
#[test]
fn a_profile_at_the_slow_end_of_every_range_still_finishes() {
    let mut v = base();
    // One thread per bandwidth point is already the slow end; the row would reset the curve.
    // A middle tier's size: there is no middle tier here (`three_tiers` runs below).
    for r in RANGES.iter().filter(|r| !r.field.ends_with(" threads") && r.field != "tiers.capacity_to_fast") {
        let slow_end = r.unit == "ns" || r.unit == "µs" || r.field == "slow_to_fast_capacity";
        let x = if slow_end { r.max } else { r.min };
        for i in 0..2 {
            set(&mut v, r.field, i, x);
        }
    }
    for i in 0..2 {
        tier(&mut v, i).insert("loaded_max_gb_s".into(), 0.02.into());
        tier(&mut v, i).insert("media_granularity_bytes".into(), 4096.into());
    }
    v["migration"].as_table_mut().unwrap().insert("tlb_shootdown_us".into(), 1000.0.into());
    let p = Profile::parse("slowest", &text(&v)).unwrap();
    let started = std::time::Instant::now();
    for policy in ["first-touch", "age", "hemem"] {
        let source = terrace_workloads::build("gups", 1, 1.0 / 64.0).unwrap();
        let mut policy = terrace_policy::build(policy).unwrap();
        let r = simulate(source, policy.as_mut(), &p, &SimOptions::default()).unwrap();
        // Over a second of simulated time: the profile is slow indeed, and the run still ends.
        assert!(r.runtime_ns.is_finite() && r.runtime_ns > 1e9, "{}", r.runtime_ns);
    }
    assert!(started.elapsed().as_secs() < 120, "took {:?}", started.elapsed());
}

/// docs/model.md §8 "Valid ranges" shows every row of `RANGES` as it is.
#[test]
fn the_documented_ranges_are_the_checked_ones() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/model.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let section = &doc[doc.find("### Valid ranges").expect("docs/model.md has a Valid ranges section")..];
    for r in RANGES {
        let unit = if r.unit.is_empty() { String::new() } else { format!(" {}", r.unit) };
        let row =
            format!("| `{}` | {} to {}{unit} | {} |", r.field, show_number(r.min), show_number(r.max), r.why);
        assert!(section.contains(&row), "docs/model.md lacks the row\n{row}");
    }
}

#[test]
fn tiers_go_from_two_to_four_and_only_a_middle_one_gives_its_size() {
    Profile::parse("p.toml", &text(&three_tiers())).unwrap();
    let mut v = three_tiers();
    tier(&mut v, 1).remove("capacity_to_fast");
    let e = invalid(&text(&v));
    assert!(
        e.contains("tier 1 (middle) is between the fast and the last tier and needs capacity_to_fast"),
        "{e}"
    );
    let mut v = base();
    tier(&mut v, 1).insert("capacity_to_fast".into(), 2.0.into());
    let e = invalid(&text(&v));
    assert!(e.contains("tier 1 (Optane) has capacity_to_fast, which only a middle tier takes"), "{e}");
    let mut v = base();
    v["tiers"].as_array_mut().unwrap().truncate(1);
    assert!(invalid(&text(&v)).contains("it has 1 tiers; the simulator models 2 to 4"));
    let mut v = three_tiers();
    for _ in 0..2 {
        let copy = tier(&mut v, 1).clone();
        v["tiers"].as_array_mut().unwrap().insert(1, Value::Table(copy));
    }
    assert!(invalid(&text(&v)).contains("it has 5 tiers"));
    // Order holds between every pair: a middle tier slower than the last is refused.
    let mut v = three_tiers();
    tier(&mut v, 1).insert("read_latency_random_ns".into(), 900.0.into());
    let e = invalid(&text(&v));
    assert!(e.contains("tier 1 (middle) is slower than tier 2 (Optane)") && e.contains("swap"), "{e}");
}
