//! Learning curves come out as a PNG of the requested size with the series' colors in it
//! and as an SVG naming the series, using only the bundled font; bad requests are errors.
#![cfg(feature = "plot")]

use std::fs::File;

use rlgrad_summary::{CurveOptions, Series, plot_learning_curves};

fn curves() -> Vec<Series> {
    let mut actor = Series::new("actor loss");
    let mut critic = Series::new("critic loss");
    for step in 0..300u64 {
        let t = step as f64;
        actor.push(step * 10, (-t / 80.0).exp() + 0.1 * (t * 0.7).sin());
        critic.push(step * 10, 2.0 * (-t / 50.0).exp() + 0.1 * (t * 1.3).cos());
    }
    critic.push(3000, f64::NAN);
    vec![actor, critic]
}

/// The contents of the SVG's `<text>` elements.
fn texts(svg: &str) -> Vec<&str> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>')?.1.split_once("</text>"))
        .map(|(text, _)| text.trim())
        .collect()
}

fn options() -> CurveOptions {
    CurveOptions {
        title: "TD3 losses".into(),
        y_label: "loss".into(),
        size: (640, 400),
        ..CurveOptions::default()
    }
}

#[test]
fn png_has_the_requested_size_and_the_series_colors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("losses.png");
    plot_learning_curves(&path, &curves(), &options()).unwrap();
    let mut reader = png::Decoder::new(File::open(&path).unwrap())
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((frame.width, frame.height), (640, 400));
    assert_eq!(frame.color_type, png::ColorType::Rgb);
    let rgb: Vec<[u8; 3]> = pixels[..frame.buffer_size()]
        .chunks_exact(3)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    // The first two palette colors (the smoothed curves) and black text are drawn.
    for color in [[31, 119, 180], [255, 127, 14], [0, 0, 0]] {
        let count = rgb.iter().filter(|&&p| p == color).count();
        assert!(count > 100, "{color:?} drawn on {count} pixels");
    }
    let white = rgb.iter().filter(|&&p| p == [255, 255, 255]).count();
    assert!(white > rgb.len() / 2, "mostly white background");
}

#[test]
fn svg_names_the_series_and_the_axes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("losses.svg");
    plot_learning_curves(&path, &curves(), &options()).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
    assert!(svg.contains(r#"width="640" height="400""#));
    let texts = texts(&svg);
    for text in [
        "TD3 losses",
        "actor loss (moving average of 10)",
        "critic loss (moving average of 10)",
        "step",
        "loss",
    ] {
        assert!(texts.contains(&text), "{text} not in {texts:?}");
    }
    assert!(svg.contains(r#"font-family="DejaVu Sans, sans-serif""#));
    assert!(
        svg.matches("<polyline").count() >= 4,
        "raw and smoothed lines"
    );
}

#[test]
fn without_smoothing_the_legend_names_the_raw_curves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("raw.svg");
    let options = CurveOptions {
        smoothing: 1,
        ..options()
    };
    plot_learning_curves(&path, &curves(), &options).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    let texts = texts(&svg);
    assert!(texts.contains(&"actor loss"), "{texts:?}");
    assert!(!svg.contains("moving average"));
}

#[test]
fn bad_requests_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("x.svg");
    let cases = [
        (dir.path().join("x.jpg"), curves(), options()),
        (svg.clone(), vec![], options()),
        (svg.clone(), vec![Series::new("empty")], options()),
        (
            svg.clone(),
            curves(),
            CurveOptions {
                smoothing: 0,
                ..options()
            },
        ),
        (
            svg.clone(),
            curves(),
            CurveOptions {
                size: (0, 10),
                ..options()
            },
        ),
        (
            dir.path().join("missing").join("x.png"),
            curves(),
            options(),
        ),
    ];
    for (path, series, options) in cases {
        assert!(
            plot_learning_curves(&path, &series, &options).is_err(),
            "{}",
            path.display()
        );
    }
}
