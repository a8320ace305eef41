//! Each picture is written as SVG and as PNG, with the shapes and texts its data asks for: the
//! SVG parsed as XML, the PNG decoded.

use std::path::Path;
use terrace_plot::*;

/// An SVG's elements named `tag` whose attribute `attr` is `value`.
fn count(doc: &roxmltree::Document, tag: &str, attr: &str, value: &str) -> usize {
    doc.descendants().filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value)).count()
}

/// Every text of an SVG, trimmed.
fn texts(doc: &roxmltree::Document) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .collect()
}

/// Reads and checks an SVG: its size, and that every text the picture must show is there.
fn svg(path: &Path, size: (u32, u32), wanted: &[&str]) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.attribute("width"), Some(size.0.to_string().as_str()));
    assert_eq!(root.attribute("height"), Some(size.1.to_string().as_str()));
    let all = texts(&doc);
    for w in wanted {
        assert!(all.iter().any(|t| t == w), "no text '{w}' in {}: {all:?}", path.display());
    }
    text
}

/// Decodes a PNG: its size, and its pixels' distinct colours.
fn png_colours(path: &Path) -> ((u32, u32), std::collections::HashSet<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let colours = buf[..info.buffer_size()].chunks(3).map(|p| [p[0], p[1], p[2]]).collect();
    ((info.width, info.height), colours)
}

fn speedups() -> Speedups {
    let s = |v: f64| Some(v);
    Speedups {
        title: "Speedup over first-touch, profile optane".into(),
        workloads: vec!["gups".into(), "btree".into(), "xsbench".into()],
        policies: vec!["first-touch".into(), "hemem".into(), "ambix".into(), "oracle".into()],
        speedup: vec![
            vec![s(1.0), s(1.4), s(1.2), s(2.0)],
            vec![s(1.0), s(0.7), None, s(1.5)],
            vec![s(1.0), s(1.1), s(1.3), s(1.6)],
        ],
    }
}

#[test]
fn speedup_bars_draw_a_bar_per_run_and_a_ceiling_per_workload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compare.svg");
    speedup_bars(&path, &speedups()).unwrap();
    let text = svg(&path, (640, 560), &["gups", "btree", "xsbench", "hemem", "ambix", "ceiling: oracle"]);
    let doc = roxmltree::Document::parse(&text).unwrap();
    // hemem (first colour): 3 bars and its legend swatch; ambix (second): 2 bars (its btree run
    // failed) and its swatch. first-touch and oracle have no bars.
    let bars = |fill| -> Vec<f64> {
        doc.descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(fill))
            .map(|n| n.attribute("height").unwrap().parse().unwrap())
            .collect()
    };
    let (hemem, ambix) = (bars("#1F77B4"), bars("#FF7F0E"));
    assert_eq!((hemem.len(), ambix.len()), (4, 3), "{hemem:?} {ambix:?}");
    // Heights follow the speedups: gups's 1.4 over btree's 0.7 (pixels rounded).
    assert!((hemem[0] / hemem[1] - 2.0).abs() < 0.05, "{hemem:?}");
    // The ceiling: a thick line across each group, and one in the legend.
    assert_eq!(count(&doc, "polyline", "stroke-width", "3"), 4);
    assert_eq!(ceiling_policy(&speedups().policies), Some(3));
    let with_optimal = ["oracle".to_string(), "optimal".to_string()];
    assert_eq!(ceiling_policy(&with_optimal), Some(1), "optimal wins over oracle");

    let png_path = dir.path().join("compare.png");
    speedup_bars(&png_path, &speedups()).unwrap();
    let (size, colours) = png_colours(&png_path);
    assert_eq!(size, (640, 560));
    assert!(colours.contains(&[31, 119, 180]) && colours.contains(&[255, 127, 14]) && colours.len() > 20);
}

/// 64 ranges of 1 MiB over 100 epochs: the top ranges untouched at first, the fast tier
/// taking more ranges over time.
fn timeline(ranges: usize, epochs: usize) -> PlacementTimeline {
    let epochs = (0..epochs)
        .map(|e| PlacementEpoch {
            start_ns: e as f64 * 1e5,
            end_ns: (e + 1) as f64 * 1e5,
            tier: (0..ranges)
                .map(|r| if e < 3 && r > e * 20 { None } else { Some(u8::from(r % 16 >= e / 10)) })
                .collect(),
            range_accesses: (0..ranges).map(|r| ((r * 7 + e) % 50) as u64).collect(),
            fast_hit_rate: Some(0.3 + e as f64 / 200.0),
            bytes_migrated: if e % 10 == 0 { 1 << 20 } else { 0 },
        })
        .collect();
    PlacementTimeline {
        title: "gups under hemem, profile optane".into(),
        tier_names: vec!["DRAM".into(), "Optane".into()],
        footprint_bytes: ranges as u64 * (1 << 20),
        range_bytes: 1 << 20,
        epochs,
    }
}

#[test]
fn placement_over_time_colours_ranges_by_tier_with_hit_rate_and_migration_beneath() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.svg");
    placement_over_time(&path, &timeline(64, 100)).unwrap();
    let wanted =
        ["time (ms)", "address (MiB)", "fast-tier hits (%)", "migrated (MiB, total)", "DRAM", "Optane"];
    let text = svg(&path, (1100, 820), &wanted);
    let doc = roxmltree::Document::parse(&text).unwrap();
    // Both tiers at full strength (the legend, the hottest ranges) and paler (colder ranges).
    assert!(count(&doc, "rect", "fill", "#C81E1E") >= 2 && count(&doc, "rect", "fill", "#145AB4") >= 2);
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
    assert!(rects > 500, "{rects} shapes for 6,400 cells of varied heat");

    // 512 ranges over 512 epochs: the SVG's map is merged to at most 96 x 128 shapes.
    let big = dir.path().join("big.svg");
    placement_over_time(&big, &timeline(512, 512)).unwrap();
    let doc_text = std::fs::read_to_string(&big).unwrap();
    let rects = roxmltree::Document::parse(&doc_text)
        .unwrap()
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .count();
    assert!(rects > 1000 && rects <= 96 * 128 + 40, "{rects}");

    let png_path = dir.path().join("sim.png");
    placement_over_time(&png_path, &timeline(64, 100)).unwrap();
    let (size, colours) = png_colours(&png_path);
    assert_eq!(size, (1100, 820));
    assert!(colours.contains(&[200, 30, 30]) && colours.contains(&[20, 90, 180]), "both tiers' colours");
    assert!(colours.len() > 30, "{} colours", colours.len());
}

fn throughput() -> MigrationThroughput {
    let mut series = Vec::new();
    for page in ["4KiB", "2MiB"] {
        for threads in [1, 2] {
            for (k, mechanism) in ["demote", "promote", "exchange"].iter().enumerate() {
                let scale = if page == "4KiB" { 0.25 } else { 1.0 };
                let points = [512u32, 1, 8, 64]
                    .iter()
                    .map(|&b| (b, (1.0 + k as f64) * threads as f64 * (b as f64).ln_1p() * scale))
                    .collect();
                series.push(ThroughputSeries {
                    page: page.into(),
                    threads,
                    mechanism: mechanism.to_string(),
                    points,
                });
            }
        }
    }
    MigrationThroughput {
        title: "Page migration".into(),
        series,
        memcpy: vec![(1, 10.0), (2, 18.0)],
        memcpy_label: "memcpy 0->1".into(),
    }
}

#[test]
fn migration_throughput_draws_a_panel_per_page_size_and_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("migrate.svg");
    migration_throughput(&path, &throughput()).unwrap();
    let wanted = [
        "4KiB pages, 1 thread",
        "2MiB pages, 2 threads",
        "pages per move_pages call",
        "GB/s",
        "memcpy 0->1",
        "exchange",
    ];
    let text = svg(&path, (940, 580), &wanted);
    let doc = roxmltree::Document::parse(&text).unwrap();
    // A line per mechanism in each of the 4 panels, and one in the legend.
    for colour in ["#1F77B4", "#FF7F0E", "#2CA02C"] {
        assert_eq!(count(&doc, "polyline", "stroke", colour), 4 + 1, "{colour}");
    }
    // Each line goes through its 4 cells, in batch order (the data came unsorted).
    let line = doc
        .descendants()
        .find(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some("#1F77B4"))
        .unwrap();
    let xs: Vec<i32> = line
        .attribute("points")
        .unwrap()
        .split_whitespace()
        .map(|p| p.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(xs.len(), 4);
    assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");

    let png_path = dir.path().join("migrate.png");
    migration_throughput(&png_path, &throughput()).unwrap();
    let (size, colours) = png_colours(&png_path);
    assert_eq!(size, (940, 580));
    assert!(colours.contains(&[44, 160, 44]) && colours.len() > 20);
}

#[test]
fn a_file_of_another_format_is_refused_and_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compare.pdf");
    let e = speedup_bars(&path, &speedups()).unwrap_err().to_string();
    assert!(e.contains("compare.pdf") && e.contains(".svg or .png") && !e.contains('\n'), "{e}");
    assert!(!path.exists());
    let e = placement_over_time(&dir.path().join("x.jpg"), &timeline(4, 4)).unwrap_err().to_string();
    assert!(e.contains(".svg or .png"), "{e}");
}
