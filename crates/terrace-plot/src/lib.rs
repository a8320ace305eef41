//! Terrace's pictures, drawn with plotters: a comparison's speedups as grouped bars
//! ([`speedup_bars`]), one run's placement over time ([`placement_over_time`]) and page-migration
//! throughput against batch size ([`migration_throughput`]).
//!
//! Every function takes plain data (the command line gathers it) and writes an SVG or a PNG,
//! as the file's extension says ([`Format::of`]). Text is set in DejaVu Sans, embedded here
//! (fonts/LICENSE-DejaVu), so a picture needs no font library or system font.
#![forbid(unsafe_code)]

mod migrate;
mod placement;
mod speedup;

pub use migrate::{migration_throughput, MigrationThroughput, ThroughputSeries};
pub use placement::{placement_over_time, PlacementEpoch, PlacementTimeline};
pub use speedup::{ceiling_policy, speedup_bars, Speedups};

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Why a picture could not be made: one line, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlotError(String);

/// What a drawing function returns: plotters' errors, whatever the backend.
type Drawn = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A picture's file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format `path`'s extension names (.svg or .png, any case); anything else is refused
    /// before a long run starts.
    pub fn of(path: &Path) -> Result<Format, PlotError> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => Err(PlotError(format!(
                "cannot plot to '{}': the file name must end in .svg or .png",
                path.display()
            ))),
        }
    }
}

const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
/// The font family every text of the pictures asks for.
const FAMILY: &str = "sans-serif";

/// Registers the embedded font under [`FAMILY`], once.
fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            panic!("the embedded DejaVu Sans does not parse");
        }
    });
}

/// Draws with `draw` on a `width` x `height` canvas and writes it to `path`, as its extension says.
fn render(
    path: &Path,
    (width, height): (u32, u32),
    draw: impl Fn(&DrawingArea<SVGBackend<'_>, Shift>) -> Drawn,
    draw_png: impl Fn(&DrawingArea<BitMapBackend<'_>, Shift>) -> Drawn,
) -> Result<(), PlotError> {
    let format = Format::of(path)?;
    register_font();
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| {
        PlotError(format!("cannot draw {}: {e}", path.display()))
    };
    let cannot_write = |e: std::io::Error| PlotError(format!("cannot write {}: {e}", path.display()));
    match format {
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
                root.fill(&WHITE).map_err(|e| failed(e.into()))?;
                draw(&root).map_err(failed)?;
                root.present().map_err(|e| failed(e.into()))?;
            }
            std::fs::write(path, svg).map_err(cannot_write)
        }
        Format::Png => {
            let mut rgb = vec![0u8; width as usize * height as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
                root.fill(&WHITE).map_err(|e| failed(e.into()))?;
                draw_png(&root).map_err(failed)?;
                root.present().map_err(|e| failed(e.into()))?;
            }
            let file = std::fs::File::create(path).map_err(cannot_write)?;
            let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width, height);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let encoded = encoder.write_header().and_then(|mut w| w.write_image_data(&rgb));
            encoded.map_err(|e| PlotError(format!("cannot write {}: {e}", path.display())))
        }
    }
}

/// Draws one picture to `path` with the generic drawing function `$draw(area, data)`, on either
/// backend (a closure cannot be generic over the backend, a macro can stand for two).
macro_rules! render_with {
    ($path:expr, $size:expr, $draw:path, $data:expr) => {
        crate::render($path, $size, |root| $draw(root, $data), |root| $draw(root, $data))
    };
}
pub(crate) use render_with;

/// The text style of titles, labels and legends, at `size` pixels.
fn text(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

/// An axis label: at most three decimals, no trailing zeros ("60", "2.5", "0.125").
fn number(v: &f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

/// Distinct colours for series (policies, mechanisms), in order.
fn series_colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    COLOURS[i % COLOURS.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers_drop_trailing_zeros() {
        let labels: Vec<String> =
            [60.0, 2.5, 0.125, 0.0, -0.0001, 1e-7, 12.3456].iter().map(number).collect();
        assert_eq!(labels, ["60", "2.5", "0.125", "0", "0", "0", "12.346"]);
    }

    #[test]
    fn the_extension_chooses_the_format_and_anything_else_is_refused() {
        assert_eq!(Format::of(Path::new("a/b.svg")).unwrap(), Format::Svg);
        assert_eq!(Format::of(Path::new("b.PNG")).unwrap(), Format::Png);
        for bad in ["b.pdf", "b", "svg", "b.svg.txt"] {
            let e = Format::of(Path::new(bad)).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains(".svg or .png"), "{e}");
        }
    }
}
