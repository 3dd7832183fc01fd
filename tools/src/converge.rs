//! `cargo xtask converge`: the TF guide's convergence test for gradient descent, momentum
//! and Adam at three learning rates; prints the outcome table and draws the parameter
//! paths over the loss landscape and Adam's `alpha_t` to PNG and SVG.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use rlgrad_optim::converge::{self, GuideOptimizer, Outcome, Run, SeedAdam};

const LEARNING_RATES: [f64; 3] = [1e-3, 1e-2, 1e-1];
const MAX_ITERS: usize = 2000;
const INIT: f32 = 2.0;

/// The fonts tried for the charts' text, after `$RLGRAD_FONT`.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/Library/Fonts/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

fn optimizers() -> [(&'static str, GuideOptimizer); 3] {
    [
        ("gradient descent", GuideOptimizer::GradientDescent),
        ("momentum 0.7", GuideOptimizer::Momentum { momentum: 0.7 }),
        ("adam", GuideOptimizer::Adam(SeedAdam::default())),
    ]
}

fn register_font() -> Result<(), String> {
    let candidates = std::env::var("RLGRAD_FONT")
        .ok()
        .into_iter()
        .chain(FONT_PATHS.iter().map(|p| (*p).to_owned()));
    for path in candidates {
        if let Ok(bytes) = std::fs::read(&path) {
            // plotters keeps fonts for the whole process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err(format!(
        "no TrueType font found for the charts' text; set RLGRAD_FONT to a .ttf file (tried {})",
        FONT_PATHS.join(", ")
    ))
}

/// How the table and the charts' legends name an outcome.
fn in_words(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Converged => "converged",
        Outcome::Exploded => "exploded",
        Outcome::HitLimit => "hit the limit",
    }
}

pub fn run() -> Result<(), String> {
    let mut runs: Vec<(&str, f64, Run)> = Vec::new();
    println!(
        "{:<18} {:>7}  {:<16} {:>10}  {:>12}",
        "optimizer", "lr", "outcome", "iterations", "final x"
    );
    for (name, optimizer) in optimizers() {
        for lr in LEARNING_RATES {
            let run = converge::run(optimizer, lr, INIT, MAX_ITERS).map_err(|e| e.to_string())?;
            println!(
                "{name:<18} {lr:>7}  {:<16} {:>10}  {:>12.6}",
                in_words(run.outcome),
                run.iterations,
                run.final_x
            );
            runs.push((name, lr, run));
        }
    }
    register_font()?;
    let dir = crate::root().join("target/converge");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for ext in ["png", "svg"] {
        let paths = dir.join(format!("paths.{ext}"));
        let alpha = dir.join(format!("adam_alpha.{ext}"));
        if ext == "png" {
            draw_paths(
                &BitMapBackend::new(&paths, (1500, 500)).into_drawing_area(),
                &runs,
            )?;
            draw_alpha(
                &BitMapBackend::new(&alpha, (800, 500)).into_drawing_area(),
                &runs,
            )?;
        } else {
            draw_paths(
                &SVGBackend::new(&paths, (1500, 500)).into_drawing_area(),
                &runs,
            )?;
            draw_alpha(
                &SVGBackend::new(&alpha, (800, 500)).into_drawing_area(),
                &runs,
            )?;
        }
        report(&paths);
        report(&alpha);
    }
    Ok(())
}

fn report(path: &Path) {
    println!("wrote {}", path.display());
}

fn error(e: impl std::fmt::Display) -> String {
    format!("drawing failed: {e}")
}

const COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

/// One panel per optimizer: the landscape L(x) and each learning rate's path on it.
fn draw_paths<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[(&str, f64, Run)],
) -> Result<(), String> {
    area.fill(&WHITE).map_err(error)?;
    let (x_min, x_max) = (-2.0f64, 2.2f64);
    let (y_min, y_max) = (0.0f64, converge::loss(x_max));
    for (panel, (name, _)) in area.split_evenly((1, 3)).iter().zip(optimizers()) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{name}: paths on L(x) = 2x^4 + 3x^3 + 2"),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(x_min..x_max, y_min..y_max)
            .map_err(error)?;
        chart
            .configure_mesh()
            .x_desc("x")
            .y_desc("L(x)")
            .draw()
            .map_err(error)?;
        let landscape = (0..=400).map(|i| x_min + (x_max - x_min) * f64::from(i) / 400.0);
        chart
            .draw_series(LineSeries::new(
                landscape.map(|x| (x, converge::loss(x))),
                BLACK.stroke_width(1),
            ))
            .map_err(error)?;
        for (color, (_, lr, run)) in COLORS.iter().zip(runs.iter().filter(|r| r.0 == name)) {
            let points: Vec<(f64, f64)> = std::iter::once(INIT)
                .chain(run.path.iter().copied())
                .map(f64::from)
                .filter(|x| (x_min..=x_max).contains(x))
                .map(|x| (x, converge::loss(x)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(1)))
                .map_err(error)?
                .label(format!(
                    "lr {lr}: {} at {}",
                    in_words(run.outcome),
                    run.iterations
                ))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], *color));
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 2, color.filled())))
                .map_err(error)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(error)?;
    }
    area.present().map_err(error)
}

/// Adam's effective step size `alpha_t` over the steps, per learning rate (log scale).
fn draw_alpha<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[(&str, f64, Run)],
) -> Result<(), String> {
    area.fill(&WHITE).map_err(error)?;
    let adam: Vec<&(&str, f64, Run)> = runs.iter().filter(|r| r.0 == "adam").collect();
    let steps = adam
        .iter()
        .map(|r| r.2.effective_lr.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let (low, high) = adam
        .iter()
        .flat_map(|r| r.2.effective_lr.iter().copied())
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Adam's alpha_t = lr sqrt(1 - b2^t) / (1 - b1^t)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(1..steps, (low * 0.8..high * 1.25).log_scale())
        .map_err(error)?;
    chart
        .configure_mesh()
        .x_desc("step t")
        .y_desc("alpha_t")
        .draw()
        .map_err(error)?;
    for (color, (_, lr, run)) in COLORS.iter().zip(adam) {
        chart
            .draw_series(LineSeries::new(
                run.effective_lr
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| (i + 1, a)),
                color.stroke_width(2),
            ))
            .map_err(error)?
            .label(format!("lr {lr}"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], *color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(error)?;
    area.present().map_err(error)
}
