//! `terrace sim --plot`: one run's placement over time (each range of pages against time,
//! coloured by the tier it is in, darker the more it was accessed), with the fast tier's hit
//! rate and the bytes migrated beneath, on the same time axis.

use crate::{render_with, text, Drawn, Format, PlotError};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// A run's placement over time.
#[derive(Clone, Debug, Default)]
pub struct PlacementTimeline {
    /// Above the chart, e.g. the workload, the policy and the profile.
    pub title: String,
    /// The tiers, fastest first.
    pub tier_names: Vec<String>,
    pub footprint_bytes: u64,
    /// Bytes of one range of pages (the ranges tile the footprint from address 0).
    pub range_bytes: u64,
    pub epochs: Vec<PlacementEpoch>,
}

/// One stretch of the run.
#[derive(Clone, Debug, Default)]
pub struct PlacementEpoch {
    pub start_ns: f64,
    pub end_ns: f64,
    /// Per range: the tier holding most of its pages (index into `tier_names`), `None` while
    /// none is touched.
    pub tier: Vec<Option<u8>>,
    /// Per range: the accesses of the epoch.
    pub range_accesses: Vec<u64>,
    /// Share of the epoch's accesses the fast tier served (`None`: no access).
    pub fast_hit_rate: Option<f64>,
    pub bytes_migrated: u64,
}

/// Shades of heat: a range's colour is its tier's at one of these strengths (fewer shades,
/// fewer shapes in an SVG: neighbouring ranges of one shade are drawn as one rectangle).
const HEAT_LEVELS: u32 = 8;
/// Room right of the panels for the legend, pixels.
const LEGEND_WIDTH: u32 = 170;
const Y_LABELS_WIDTH: u32 = 70;

/// Most rows and columns of the placement map in an SVG, where each is a shape: past this,
/// neighbouring ranges and epochs are merged (a PNG draws every range and epoch).
const SVG_MAP_CELLS: (usize, usize) = (96, 128);

/// Writes the picture to `path` (.svg or .png).
pub fn placement_over_time(path: &Path, data: &PlacementTimeline) -> Result<(), PlotError> {
    let cells = match Format::of(path)? {
        Format::Svg => SVG_MAP_CELLS,
        Format::Png => (usize::MAX, usize::MAX),
    };
    let (ranges, epochs) = (data.epochs.iter().map(|e| e.tier.len()).max().unwrap_or(0), data.epochs.len());
    let coarse;
    let data = if ranges > cells.0 || epochs > cells.1 {
        coarse = coarsen(data, ranges.div_ceil(cells.0).max(1), epochs.div_ceil(cells.1).max(1));
        &coarse
    } else {
        data
    };
    render_with!(path, (1100, 820), draw, data)
}

/// The placement map with every `rows` neighbouring ranges and every `columns` neighbouring
/// epochs made one: their accesses added, the tier the one most of them are in (the fastest of
/// a tie), hit rates weighted by time and bytes migrated added.
fn coarsen(data: &PlacementTimeline, rows: usize, columns: usize) -> PlacementTimeline {
    let epochs = data
        .epochs
        .chunks(columns)
        .map(|group| {
            let last = group.last().expect("chunks are not empty");
            let ranges = last.tier.len().div_ceil(rows);
            let mut accesses = vec![0u64; ranges];
            for e in group {
                for (r, &a) in e.range_accesses.iter().enumerate() {
                    accesses[r / rows] += a;
                }
            }
            let tier = last
                .tier
                .chunks(rows)
                .map(|band| {
                    let mut count = [0usize; 256];
                    band.iter().flatten().for_each(|&t| count[t as usize] += 1);
                    let most = *count.iter().max().unwrap_or(&0);
                    (most > 0).then(|| count.iter().position(|&c| c == most).unwrap_or(0) as u8)
                })
                .collect();
            let timed: Vec<(f64, f64)> =
                group.iter().filter_map(|e| e.fast_hit_rate.map(|h| (e.end_ns - e.start_ns, h))).collect();
            let time: f64 = timed.iter().map(|t| t.0).sum();
            let fast_hit_rate = (!timed.is_empty()).then(|| {
                if time > 0.0 {
                    timed.iter().map(|(d, h)| d * h).sum::<f64>() / time
                } else {
                    timed.iter().map(|t| t.1).sum::<f64>() / timed.len() as f64
                }
            });
            PlacementEpoch {
                start_ns: group[0].start_ns,
                end_ns: last.end_ns,
                tier,
                range_accesses: accesses,
                fast_hit_rate,
                bytes_migrated: group.iter().map(|e| e.bytes_migrated).sum(),
            }
        })
        .collect();
    PlacementTimeline { range_bytes: data.range_bytes * rows as u64, epochs, ..data.clone() }
}

/// The colour of tier `t` at full strength.
fn tier_colour(t: usize) -> RGBColor {
    const COLOURS: [RGBColor; 4] =
        [RGBColor(200, 30, 30), RGBColor(20, 90, 180), RGBColor(30, 140, 60), RGBColor(120, 60, 160)];
    COLOURS[t % COLOURS.len()]
}

/// Tier `t`'s colour at heat `level` (0 = no access: a pale tint, still telling the tier).
fn shade(t: usize, level: u32) -> RGBColor {
    let strength = 0.15 + 0.85 * level as f64 / HEAT_LEVELS as f64;
    let RGBColor(r, g, b) = tier_colour(t);
    let mix = |c: u8| (255.0 - (255.0 - c as f64) * strength).round() as u8;
    RGBColor(mix(r), mix(g), mix(b))
}

/// A time unit that keeps the axis's numbers short: (name, ns per unit).
fn time_unit(ns: f64) -> (&'static str, f64) {
    if ns >= 2e9 {
        ("s", 1e9)
    } else if ns >= 2e6 {
        ("ms", 1e6)
    } else {
        ("µs", 1e3)
    }
}

/// A byte unit for `bytes`: (name, bytes per unit).
fn byte_unit(bytes: f64) -> (&'static str, f64) {
    if bytes >= 2.0 * (1u64 << 30) as f64 {
        ("GiB", (1u64 << 30) as f64)
    } else if bytes >= 2.0 * (1u64 << 20) as f64 {
        ("MiB", (1u64 << 20) as f64)
    } else {
        ("KiB", 1024.0)
    }
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, data: &PlacementTimeline) -> Drawn
where
    DB::ErrorType: 'static,
{
    let end_ns = data.epochs.iter().map(|e| e.end_ns).fold(0.0, f64::max).max(1.0);
    let (t_unit, per_t) = time_unit(end_ns);
    let t_end = end_ns / per_t;
    let footprint = data.footprint_bytes.max(1) as f64;
    let (a_unit, per_a) = byte_unit(footprint);

    let (_, height) = root.dim_in_pixel();
    let titled = root.titled(&data.title, text(18))?;
    let (panels, legend) = titled.split_horizontally(titled.dim_in_pixel().0 - LEGEND_WIDTH);
    let (map_area, rest) = panels.split_vertically((height as f64 * 0.56) as u32);
    let (hits_area, migrated_area) = rest.split_vertically(rest.dim_in_pixel().1 / 2);

    // Placement: a rectangle per range and epoch, neighbouring ranges of one shade merged.
    let mut map = ChartBuilder::on(&map_area)
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(Y_LABELS_WIDTH)
        .build_cartesian_2d(0f64..t_end, 0f64..footprint / per_a)?;
    map.configure_mesh()
        .disable_mesh()
        .x_desc(format!("time ({t_unit})"))
        .y_desc(format!("address ({a_unit})"))
        .x_label_formatter(&crate::number)
        .y_label_formatter(&crate::number)
        .label_style(text(12))
        .axis_desc_style(text(13))
        .draw()?;
    let hottest = data.epochs.iter().flat_map(|e| e.range_accesses.iter().copied()).max().unwrap_or(0);
    let level = |count: u64| -> u32 {
        if count == 0 || hottest == 0 {
            return 0;
        }
        let heat = (count as f64).ln_1p() / (hottest as f64).ln_1p();
        ((heat * HEAT_LEVELS as f64).ceil() as u32).clamp(1, HEAT_LEVELS)
    };
    let range_bytes = data.range_bytes.max(1) as f64;
    let mut cells = Vec::new();
    for e in &data.epochs {
        let (x0, x1) = (e.start_ns / per_t, e.end_ns / per_t);
        let mut run: Option<(usize, (u8, u32))> = None;
        let ranges = e.tier.len();
        for r in 0..=ranges {
            let here = (r < ranges)
                .then(|| e.tier[r].map(|t| (t, level(e.range_accesses.get(r).copied().unwrap_or(0)))))
                .flatten();
            if run.map(|(_, s)| Some(s)) == Some(here) {
                continue;
            }
            if let Some((first, (t, l))) = run {
                let y0 = first as f64 * range_bytes / per_a;
                let y1 = (r as f64 * range_bytes).min(footprint) / per_a;
                cells.push(Rectangle::new([(x0, y0), (x1, y1)], shade(t as usize, l).filled()));
            }
            run = here.map(|s| (r, s));
        }
    }
    map.draw_series(cells)?;

    // The fast tier's hit rate, epoch by epoch, as steps.
    let mut hits = ChartBuilder::on(&hits_area)
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(Y_LABELS_WIDTH)
        .build_cartesian_2d(0f64..t_end, 0f64..100.0)?;
    hits.configure_mesh()
        .x_desc(format!("time ({t_unit})"))
        .y_desc("fast-tier hits (%)")
        .y_labels(5)
        .light_line_style(BLACK.mix(0.04))
        .x_label_formatter(&crate::number)
        .y_label_formatter(&crate::number)
        .label_style(text(12))
        .axis_desc_style(text(13))
        .draw()?;
    let steps = data.epochs.iter().filter_map(|e| e.fast_hit_rate.map(|h| (e, h * 100.0)));
    let points: Vec<(f64, f64)> =
        steps.flat_map(|(e, h)| [(e.start_ns / per_t, h), (e.end_ns / per_t, h)]).collect();
    hits.draw_series(LineSeries::new(points, tier_colour(0).stroke_width(2)))?;

    // Bytes migrated since the start.
    let total: u64 = data.epochs.iter().map(|e| e.bytes_migrated).sum();
    let (m_unit, per_m) = byte_unit(total as f64);
    let mut migrated = ChartBuilder::on(&migrated_area)
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(Y_LABELS_WIDTH)
        .build_cartesian_2d(0f64..t_end, 0f64..(total as f64 / per_m).max(1.0) * 1.05)?;
    migrated
        .configure_mesh()
        .x_desc(format!("time ({t_unit})"))
        .y_desc(format!("migrated ({m_unit}, total)"))
        .y_labels(5)
        .light_line_style(BLACK.mix(0.04))
        .x_label_formatter(&crate::number)
        .y_label_formatter(&crate::number)
        .label_style(text(12))
        .axis_desc_style(text(13))
        .draw()?;
    let mut so_far = 0u64;
    let mut points = vec![(0.0, 0.0)];
    for e in &data.epochs {
        so_far += e.bytes_migrated;
        points.push((e.end_ns / per_t, so_far as f64 / per_m));
    }
    migrated.draw_series(LineSeries::new(points, BLACK.stroke_width(2)))?;

    // The legend: a swatch per tier, then the heat scale.
    let left = text(13).pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = 40;
    for (t, name) in data.tier_names.iter().enumerate() {
        legend.draw(&Rectangle::new([(10, y - 7), (26, y + 7)], tier_colour(t).filled()))?;
        legend.draw(&Text::new(name.clone(), (34, y), left.clone()))?;
        y += 24;
    }
    y += 12;
    legend.draw(&Text::new("accesses in the epoch:", (10, y), left.clone()))?;
    y += 20;
    for l in 0..=HEAT_LEVELS {
        let x = 10 + l as i32 * 16;
        legend.draw(&Rectangle::new([(x, y - 7), (x + 16, y + 7)], shade(0, l).filled()))?;
    }
    y += 18;
    legend.draw(&Text::new("none", (10, y), left.clone()))?;
    legend.draw(&Text::new("most", (10 + HEAT_LEVELS as i32 * 16 - 14, y), left))?;
    Ok(())
}
