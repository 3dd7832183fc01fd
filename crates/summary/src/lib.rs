//! rlgrad-summary: watch a training run: TensorBoard event files, CSV, learning curves.
//!
//! - [`EventWriter`]: TensorBoard event files with scalars and histograms (TensorFlow's
//!   `Event` protobufs encoded by `prost`, TFRecord framing with CRC-32C checksums by the
//!   `crc32c` crate), readable by TensorBoard and the `tensorboard` Python package.
//! - [`CsvWriter`]: the same scalars as `wall_time,step,tag,value` rows, for people
//!   without TensorBoard.
//! - [`WriterOptions`]: record every `n`-th step only, flush on a time interval; both
//!   writers also flush on `flush`, `close` and drop.
//! - [`read_scalars`]: an event file's scalars back as [`Series`] (to plot a finished run);
//!   [`moving_average`] smooths a series' values.
//! - Feature `plot` (default): `plot_learning_curves` draws series over steps with their
//!   moving average to PNG or SVG with `plotters`, using a bundled font (DejaVu Sans,
//!   subset) so that no system font is needed.
//!
//! # Example
//!
//! ```
//! use rlgrad_summary::{CsvWriter, EventWriter, Series, WriterOptions};
//!
//! let run = tempfile::tempdir().unwrap();
//! let options = WriterOptions { record_every: 5, ..WriterOptions::default() };
//! let mut tensorboard = EventWriter::create(run.path(), options)?;
//! let mut csv = CsvWriter::open(run.path().join("scalars.csv"), options)?;
//! let mut returns = Series::new("episode return");
//! for step in 0..50u64 {
//!     let episode_return = -100.0 + 2.0 * step as f64;
//!     tensorboard.scalar("train/episode_return", step, episode_return)?;
//!     csv.scalar("train/episode_return", step, episode_return)?;
//!     returns.push(step, episode_return);
//! }
//! tensorboard.close()?;
//! csv.close()?;
//! # #[cfg(feature = "plot")]
//! rlgrad_summary::plot_learning_curves(
//!     run.path().join("returns.png"),
//!     &[returns],
//!     &rlgrad_summary::CurveOptions::default(),
//! )?;
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - Event files follow TensorFlow's format exactly (`brain.Event:2` first, masked
//!   CRC-32C on every length and record); `cargo xtask interop` reads them back with
//!   TensorBoard's own `EventAccumulator`.
//! - Histograms use TensorFlow's default buckets and encoding; their statistics are
//!   summed in f64 in index order, so the same values give the same bytes.
//! - Errors, not panics, for empty tags, steps beyond `i64::MAX`, empty or non-finite
//!   histogram values, unwritable paths ([`Error::Io`](rlgrad_core::Error::Io)), and
//!   damaged files given to [`read_scalars`].

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod cadence;
mod csv_writer;
mod events;
mod histogram;
mod output;
#[cfg(feature = "plot")]
mod plot;
mod proto;
mod record;
mod series;

pub use cadence::WriterOptions;
pub use csv_writer::CsvWriter;
pub use events::{EventWriter, read_scalars};
#[cfg(feature = "plot")]
pub use plot::{CurveOptions, plot_learning_curves};
pub use series::{Series, moving_average};

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
