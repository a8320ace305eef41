//! `terrace bench migrate --plot`: GB/s against pages per call, a panel per page size (columns)
//! and thread count (rows), a line per mechanism, memcpy's bandwidth as a dashed line.

use crate::{render_with, series_colour, text, Drawn, PlotError};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Migration throughput measured (or modelled) over a grid of cells.
#[derive(Clone, Debug, Default)]
pub struct MigrationThroughput {
    /// Above the chart, e.g. the host's nodes or the profile.
    pub title: String,
    pub series: Vec<ThroughputSeries>,
    /// The plain-copy bandwidth to compare with, per thread count: (threads, GB/s).
    pub memcpy: Vec<(u32, f64)>,
    /// What the dashed line is called ("memcpy 0->1").
    pub memcpy_label: String,
}

/// One mechanism's figures at one page size and thread count.
#[derive(Clone, Debug, Default)]
pub struct ThroughputSeries {
    /// The page size, as printed ("4KiB").
    pub page: String,
    pub threads: u32,
    /// How the pages moved ("demote", "exchange").
    pub mechanism: String,
    /// (pages per call, GB/s), the cells measured.
    pub points: Vec<(u32, f64)>,
}

/// Writes the picture to `path` (.svg or .png).
pub fn migration_throughput(path: &Path, data: &MigrationThroughput) -> Result<(), PlotError> {
    if data.series.iter().all(|s| s.points.is_empty()) {
        return Err(PlotError(format!("cannot plot to {}: no cell was measured", path.display())));
    }
    let (pages, threads) = (distinct(data, |s| s.page.clone()), distinct(data, |s| s.threads));
    let width = (60 + 440 * pages.len()) as u32;
    let height = (60 + 260 * threads.len()) as u32;
    render_with!(path, (width, height), draw, data)
}

/// The distinct values of `key` over the series, in order of first appearance.
fn distinct<T: PartialEq>(data: &MigrationThroughput, key: impl Fn(&ThroughputSeries) -> T) -> Vec<T> {
    let mut out = Vec::new();
    for s in &data.series {
        let k = key(s);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, data: &MigrationThroughput) -> Drawn
where
    DB::ErrorType: 'static,
{
    let pages = distinct(data, |s| s.page.clone());
    let threads = distinct(data, |s| s.threads);
    let mechanisms = distinct(data, |s| s.mechanism.clone());
    let batches = data.series.iter().flat_map(|s| s.points.iter().map(|p| p.0 as f64));
    let (lo, hi) = batches.fold((f64::INFINITY, 1.0f64), |(lo, hi), b| (lo.min(b), hi.max(b)));
    let (lo, hi) = (lo.max(1.0) / 1.5, hi * 1.5);
    let figures = data.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let top = figures.chain(data.memcpy.iter().map(|m| m.1)).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };

    let titled = root.titled(&data.title, text(18))?;
    let panels = titled.split_evenly((threads.len(), pages.len()));
    for (i, panel) in panels.iter().enumerate() {
        let (t, page) = (threads[i / pages.len()], &pages[i % pages.len()]);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{page} pages, {t} thread{}", if t == 1 { "" } else { "s" }), text(14))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(54)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("pages per move_pages call")
            .y_desc("GB/s")
            .x_label_formatter(&|b| format!("{b:.0}"))
            .y_label_formatter(&crate::number)
            .label_style(text(12))
            .axis_desc_style(text(13))
            .draw()?;
        for s in data.series.iter().filter(|s| s.threads == t && &s.page == page) {
            let k = mechanisms.iter().position(|m| *m == s.mechanism).unwrap_or(0);
            let colour = series_colour(k);
            let mut points: Vec<(f64, f64)> =
                s.points.iter().filter(|p| p.1.is_finite()).map(|&(b, g)| (b as f64, g)).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
                .label(&s.mechanism)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], colour.stroke_width(2)));
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, colour.filled())))?;
        }
        if let Some(&(_, copy)) = data.memcpy.iter().find(|m| m.0 == t).filter(|m| m.1.is_finite()) {
            chart
                .draw_series(DashedLineSeries::new([(lo, copy), (hi, copy)], 8, 5, BLACK.stroke_width(2)))?
                .label(&data.memcpy_label)
                .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK.stroke_width(2)));
        }
        if i > 0 {
            // One legend, in the first panel: every panel has the same lines.
            continue;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(text(11))
            .draw()?;
    }
    Ok(())
}
