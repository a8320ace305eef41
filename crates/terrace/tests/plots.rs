//! `--plot FILE` end to end: `compare`, `sim` and `bench migrate --simulated` each write a
//! picture of the expected kind and content, and a file of another format is refused in one line
//! before anything runs. Tiny runs: the whole file takes a few seconds.

use assert_cmd::Command;
use std::path::Path;

const TINY: &str = "0.03125";

fn terrace(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("terrace").unwrap().args(args).output().unwrap()
}

fn succeeds(args: &[&str]) {
    let out = terrace(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// An SVG document with every one of `texts` (as written in XML).
fn svg_with(path: &Path, texts: &[&str]) -> String {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"), "not an SVG: {}", path.display());
    for t in texts {
        assert!(svg.contains(t), "{}: no '{t}'", path.display());
    }
    svg
}

/// A PNG's width and height from its header, after checking the signature.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert!(bytes.len() > 10_000, "{} bytes: next to nothing drawn", bytes.len());
    (be(16), be(20))
}

#[test]
fn compare_plot_draws_a_bar_per_policy_and_workload_and_the_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compare.svg");
    let (workloads, policies) = ("gups,pmbench-s12-r50", "hemem,oracle");
    let p = path.to_str().unwrap();
    succeeds(&[
        "compare",
        "--workloads",
        workloads,
        "--policies",
        policies,
        "--size-scale",
        TINY,
        "--plot",
        p,
    ]);
    let svg = svg_with(
        &path,
        &["gups", "pmbench-s12-r50", "hemem", "ceiling: oracle", "speedup over first-touch (x)"],
    );
    // hemem's colour: a bar per workload and the legend's swatch; first-touch and the ceiling
    // are lines, not bars.
    assert_eq!(svg.matches("fill=\"#1F77B4\"").count(), 3);
    assert_eq!(svg.matches("fill=\"#FF7F0E\"").count(), 0);
    // The ceiling: a thick mark per workload and the legend's.
    assert_eq!(svg.matches("stroke-width=\"3\"").count(), 3);
}

#[test]
fn sim_plot_draws_placement_hit_rate_and_migration_over_time() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("sim.png");
    let args =
        ["sim", "-w", "gups", "-p", "oracle", "--size-scale", TINY, "--fast-capacity", "25%", "--plot"];
    succeeds(&[&args[..], &[png.to_str().unwrap()]].concat());
    assert_eq!(png_size(&png), (1100, 820));
    let svg = dir.path().join("sim.svg");
    succeeds(&[&args[..], &[svg.to_str().unwrap()]].concat());
    let svg =
        svg_with(&svg, &["gups under oracle", "address (", "fast-tier hits (%)", "migrated (", "time ("]);
    // Both tiers' colours at full strength: the fast tier's hot set, and the legend.
    for tier in ["#C81E1E", "#145AB4"] {
        assert!(svg.matches(&format!("fill=\"{tier}\"")).count() >= 2, "{tier}");
    }
    assert!(svg.matches("<rect").count() > 300, "a map of a few shapes");
}

#[test]
fn bench_migrate_simulated_plot_draws_gb_s_against_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("migrate.svg");
    let p = path.to_str().unwrap();
    succeeds(&[
        "bench",
        "migrate",
        "--simulated",
        "--mib",
        "8",
        "--threads",
        "2",
        "--batches",
        "1,64,512",
        "--plot",
        p,
    ]);
    let svg = svg_with(
        &path,
        &[
            "4KiB pages, 1 thread",
            "2MiB pages, 2 threads",
            "pages per move_pages call",
            "memcpy 0-&gt;1 (model)",
        ],
    );
    // demote's colour: a line in each of the 4 panels (2 page sizes, 2 thread counts) and the
    // legend's.
    assert_eq!(svg.matches("stroke=\"#1F77B4\"").count(), 5);
}

/// A `--plot` file that is neither .svg nor .png: one line naming it, exit 2, nothing run or
/// written; the live benchmark refuses it before measuring too.
#[test]
fn a_plot_file_of_another_format_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("picture.pdf");
    let p = path.to_str().unwrap();
    let mut commands = vec![
        vec!["sim", "-w", "gups", "--size-scale", TINY, "--plot", p],
        vec!["compare", "--workloads", "gups", "--size-scale", TINY, "--plot", p],
        vec!["bench", "migrate", "--simulated", "--plot", p],
    ];
    if cfg!(all(feature = "live", target_os = "linux")) {
        commands.push(vec!["bench", "migrate", "--plot", p]);
    }
    for args in commands {
        let out = terrace(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("terrace: cannot plot to") && err.contains(".svg or .png"),
            "{args:?}: {err}"
        );
        assert!(String::from_utf8(out.stdout).unwrap().is_empty(), "{args:?} ran before refusing");
    }
    assert!(!path.exists());
}
