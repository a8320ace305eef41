//! `terrace compare --plot`: speedup over first-touch, one group of bars per workload, the
//! ceiling marked across each group.

use crate::{render_with, series_colour, text, Drawn, PlotError};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// A comparison's speedups over first-touch.
#[derive(Clone, Debug, Default)]
pub struct Speedups {
    /// Above the chart, e.g. the profile and the fast tier's size.
    pub title: String,
    pub workloads: Vec<String>,
    /// The policies compared (first-touch may be among them; it is drawn as the line at 1).
    pub policies: Vec<String>,
    /// `speedup[w][p]`: first-touch's run time over the policy's on the workload; `None` where
    /// the run failed or first-touch's did.
    pub speedup: Vec<Vec<Option<f64>>>,
}

/// The policy drawn as each workload's ceiling (a marker across its group, not a bar): one
/// named `optimal` if there is one, else `oracle`. Here alone, so that a better ceiling only
/// changes this.
pub fn ceiling_policy(policies: &[String]) -> Option<usize> {
    ["optimal", "oracle"].iter().find_map(|c| policies.iter().position(|p| p == c))
}

/// The reference every speedup is over: a line at 1, not a bar.
const REFERENCE: &str = "first-touch";

/// Writes the grouped bars to `path` (.svg or .png).
pub fn speedup_bars(path: &Path, data: &Speedups) -> Result<(), PlotError> {
    if data.speedup.len() != data.workloads.len()
        || data.speedup.iter().any(|r| r.len() != data.policies.len())
    {
        return Err(PlotError("speedup_bars: one speedup per workload and policy".into()));
    }
    let bars = bar_policies(&data.policies).len();
    let width = (160 + data.workloads.len() * (bars * 22 + 30)).clamp(640, 2400) as u32;
    render_with!(path, (width, 560), draw, data)
}

/// The policies drawn as bars, in order: all but the reference and the ceiling.
fn bar_policies(policies: &[String]) -> Vec<usize> {
    let ceiling = ceiling_policy(policies);
    (0..policies.len()).filter(|&i| Some(i) != ceiling && policies[i] != REFERENCE).collect()
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, data: &Speedups) -> Drawn
where
    DB::ErrorType: 'static,
{
    let bars = bar_policies(&data.policies);
    let ceiling = ceiling_policy(&data.policies);
    let groups = data.workloads.len().max(1);
    let top =
        data.speedup.iter().flatten().flatten().copied().filter(|v| v.is_finite()).fold(1.0f64, f64::max);
    // The room above the tallest bar keeps the legend off the bars.
    let mut chart = ChartBuilder::on(root)
        .caption(&data.title, text(18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..groups as f64, 0f64..top * 1.3)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("speedup over first-touch (x)")
        .y_label_formatter(&crate::number)
        .label_style(text(13))
        .axis_desc_style(text(14))
        .draw()?;
    // Each group: a bar per policy across 80% of its width.
    let slot = 0.8 / bars.len().max(1) as f64;
    for (w, row) in data.speedup.iter().enumerate() {
        for (k, &p) in bars.iter().enumerate() {
            let Some(v) = row[p].filter(|v| v.is_finite()) else { continue };
            let x0 = w as f64 + 0.1 + k as f64 * slot;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x0 + slot * 0.9, v)],
                series_colour(k).filled(),
            )))?;
        }
    }
    for (k, &p) in bars.iter().enumerate() {
        let colour = series_colour(k);
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
            .label(&data.policies[p])
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    chart
        .draw_series(LineSeries::new([(0.0, 1.0), (groups as f64, 1.0)], BLACK.mix(0.5).stroke_width(1)))?
        .label(format!("{REFERENCE} (1x)"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK.mix(0.5).stroke_width(1)));
    if let Some(c) = ceiling {
        let marks: Vec<_> = data
            .speedup
            .iter()
            .enumerate()
            .filter_map(|(w, row)| row[c].filter(|v| v.is_finite()).map(|v| (w, v)))
            .map(|(w, v)| {
                PathElement::new([(w as f64 + 0.05, v), (w as f64 + 0.95, v)], BLACK.stroke_width(3))
            })
            .collect();
        chart
            .draw_series(marks)?
            .label(format!("ceiling: {}", data.policies[c]))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(text(12))
        .draw()?;
    // The workloads' names under their groups, placed in pixels from the chart's own mapping.
    let style = text(13).pos(Pos::new(HPos::Center, VPos::Top));
    for (w, name) in data.workloads.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(w as f64 + 0.5, 0.0));
        root.draw(&Text::new(name.clone(), (x, y + 8), style.clone()))?;
    }
    Ok(())
}
