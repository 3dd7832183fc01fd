//! Learning curves as PNG and SVG (feature `plot`), drawn by `plotters` with a bundled
//! font, so that they work on machines without any system font.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use rlgrad_core::{Error, Result};

use crate::series::{Series, moving_average};

/// DejaVu Sans 2.37, subset to Latin-1, Greek, punctuation and a few math signs; its
/// license is `assets/DejaVuSans-LICENSE.txt` (see `assets/README.md`).
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans-subset.ttf");
/// The family the bundled font is registered under. plotters writes it verbatim as the
/// SVG's CSS `font-family`, so it is a CSS list: viewers use DejaVu Sans where installed
/// and their own sans-serif elsewhere. As a plotters registry key it is a name of its
/// own, so fonts other code registers as `"sans-serif"` neither replace it nor are
/// replaced.
const FONT_FAMILY: &str = "DejaVu Sans, sans-serif";

/// Series colors (matplotlib's `tab10`).
const COLORS: [RGBColor; 10] = [
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

/// Registers the bundled font with plotters, once per process.
fn register_font() {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "invalid font")
            .expect("the bundled font is a valid TrueType font (a test parses it)");
    });
}

/// How [`plot_learning_curves`] draws.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveOptions {
    /// The chart's title; none when empty. Default: empty.
    pub title: String,
    /// The x axis' label. Default `"step"`.
    pub x_label: String,
    /// The y axis' label. Default `"value"`.
    pub y_label: String,
    /// Points in each curve's trailing moving average, drawn solid over the raw curve
    /// (drawn faint); 1 draws the raw curve alone. Default 10.
    pub smoothing: usize,
    /// Width and height in pixels (the SVG's size too). Default 960 x 540.
    pub size: (u32, u32),
}

impl Default for CurveOptions {
    fn default() -> Self {
        Self {
            title: String::new(),
            x_label: "step".to_owned(),
            y_label: "value".to_owned(),
            smoothing: 10,
            size: (960, 540),
        }
    }
}

/// Draws learning curves, one color per [`Series`], to `path`: a PNG for a `.png` path,
/// an SVG for `.svg`. Each curve is drawn faint with its moving average
/// ([`moving_average`], over `options.smoothing` points) solid on top, and named in the
/// legend. Non-finite values (a diverged run) are left out. Text uses a bundled font, so
/// no system font is needed.
///
/// An error for another extension, `options.smoothing = 0`, a zero size, no finite
/// point at all, and a file that cannot be written.
///
/// ```
/// use rlgrad_summary::{CurveOptions, Series, plot_learning_curves};
///
/// let dir = tempfile::tempdir().unwrap();
/// let mut returns = Series::new("episode return");
/// for step in 0..200u64 {
///     returns.push(step * 100, (step as f64).sqrt() * 10.0 + (step as f64).sin() * 5.0);
/// }
/// let options = CurveOptions { title: "TD3 on Pendulum".into(), ..CurveOptions::default() };
/// plot_learning_curves(dir.path().join("returns.svg"), &[returns.clone()], &options)?;
/// plot_learning_curves(dir.path().join("returns.png"), &[returns], &options)?;
/// let svg = std::fs::read_to_string(dir.path().join("returns.svg")).unwrap();
/// assert!(svg.contains("episode return"));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn plot_learning_curves(
    path: impl AsRef<Path>,
    series: &[Series],
    options: &CurveOptions,
) -> Result<()> {
    const FUNCTION: &str = "plot_learning_curves";
    let path = path.as_ref();
    if options.smoothing == 0 {
        return Err(Error::value(
            FUNCTION,
            "options.smoothing",
            "at least 1 point",
            0,
        ));
    }
    if options.size.0 == 0 || options.size.1 == 0 {
        return Err(Error::value(
            FUNCTION,
            "options.size",
            "a positive width and height",
            format_args!("{:?}", options.size),
        ));
    }
    let curves: Vec<Curve<'_>> = series
        .iter()
        .map(|s| Curve::new(s, options.smoothing))
        .collect::<Result<_>>()?;
    let Some(bounds) = Bounds::of(&curves) else {
        return Err(Error::empty(
            FUNCTION,
            "series",
            "at least one finite point",
        ));
    };
    register_font();
    let failed = |e: String| Error::io(FUNCTION, "draw", path, std::io::Error::other(e));
    match path.extension().and_then(|e| e.to_str()) {
        Some("png") => draw(
            &BitMapBackend::new(path, options.size).into_drawing_area(),
            &curves,
            bounds,
            options,
        ),
        Some("svg") => draw(
            &SVGBackend::new(path, options.size).into_drawing_area(),
            &curves,
            bounds,
            options,
        ),
        _ => {
            return Err(Error::value(
                FUNCTION,
                "path",
                "a file name ending in .png or .svg",
                path.display(),
            ));
        }
    }
    .map_err(failed)
}

/// One series ready to draw: finite points and their moving average.
struct Curve<'a> {
    name: &'a str,
    raw: Vec<(f64, f64)>,
    smoothed: Vec<(f64, f64)>,
}

impl<'a> Curve<'a> {
    fn new(series: &'a Series, window: usize) -> Result<Self> {
        let raw: Vec<(f64, f64)> = series
            .points
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|&(step, v)| (step as f64, v))
            .collect();
        let values: Vec<f64> = raw.iter().map(|p| p.1).collect();
        let smoothed = raw
            .iter()
            .zip(moving_average(&values, window)?)
            .map(|(&(x, _), y)| (x, y))
            .collect();
        Ok(Self {
            name: &series.name,
            raw,
            smoothed,
        })
    }
}

/// The axes' ranges, padded so that a single point or a flat curve still has an extent.
#[derive(Clone, Copy)]
struct Bounds {
    x: (f64, f64),
    y: (f64, f64),
}

impl Bounds {
    fn of(curves: &[Curve<'_>]) -> Option<Self> {
        let points = || curves.iter().flat_map(|c| c.raw.iter());
        let fold = |get: fn(&(f64, f64)) -> f64| {
            points()
                .map(get)
                .fold(None, |range: Option<(f64, f64)>, v| {
                    Some(range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
                })
        };
        let pad = |(lo, hi): (f64, f64), fraction: f64| {
            let margin = if hi > lo {
                (hi - lo) * fraction
            } else {
                lo.abs().max(1.0) * 0.5
            };
            (lo - margin, hi + margin)
        };
        Some(Self {
            x: pad(fold(|p| p.0)?, 0.0),
            y: pad(fold(|p| p.1)?, 0.05),
        })
    }
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    curves: &[Curve<'_>],
    bounds: Bounds,
    options: &CurveOptions,
) -> std::result::Result<(), String> {
    let error = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(error)?;
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    if !options.title.is_empty() {
        builder.caption(&options.title, (FONT_FAMILY, 20));
    }
    let mut chart = builder
        .build_cartesian_2d(bounds.x.0..bounds.x.1, bounds.y.0..bounds.y.1)
        .map_err(error)?;
    // Steps are integers: whole numbers on the axis unless it spans only a few steps.
    let whole_steps = bounds.x.1 - bounds.x.0 >= 10.0;
    let step_label = |x: &f64| {
        if whole_steps {
            format!("{x:.0}")
        } else {
            format!("{x}")
        }
    };
    chart
        .configure_mesh()
        .x_label_formatter(&step_label)
        .x_desc(&options.x_label)
        .y_desc(&options.y_label)
        .label_style((FONT_FAMILY, 13))
        .axis_desc_style((FONT_FAMILY, 15))
        .draw()
        .map_err(error)?;
    let smoothing = options.smoothing;
    for (curve, &color) in curves.iter().zip(COLORS.iter().cycle()) {
        let label = if smoothing > 1 {
            format!("{} (moving average of {smoothing})", curve.name)
        } else {
            curve.name.to_owned()
        };
        let solid = if smoothing > 1 {
            chart
                .draw_series(LineSeries::new(
                    curve.raw.iter().copied(),
                    color.mix(0.3).stroke_width(1),
                ))
                .map_err(error)?;
            &curve.smoothed
        } else {
            &curve.raw
        };
        chart
            .draw_series(LineSeries::new(
                solid.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(error)?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .label_font((FONT_FAMILY, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(error)?;
    area.present().map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_font_parses() {
        assert!(plotters::style::register_font("test-parse", FontStyle::Normal, FONT).is_ok());
    }

    #[test]
    fn bounds_pad_single_points_and_skip_non_finite_values() {
        let series = Series {
            name: "s".into(),
            points: vec![(5, 2.0), (6, f64::NAN), (7, f64::INFINITY)],
        };
        let curve = Curve::new(&series, 2).unwrap();
        assert_eq!(curve.raw, [(5.0, 2.0)]);
        let bounds = Bounds::of(&[curve]).unwrap();
        assert_eq!((bounds.x, bounds.y), ((2.5, 7.5), (1.0, 3.0)));
        let empty = Series::new("e");
        assert!(Bounds::of(&[Curve::new(&empty, 2).unwrap()]).is_none());
    }
}
