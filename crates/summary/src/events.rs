//! [`EventWriter`]: TensorBoard event files; [`read_scalars`] reads their scalars back.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;
use rlgrad_core::{Error, Result, check};

use crate::cadence::{Cadence, WriterOptions};
use crate::histogram::histogram;
use crate::output::Output;
use crate::proto::{Event, Summary, SummaryValue, event, summary_value};
use crate::record;
use crate::series::Series;

/// The version string TensorBoard expects in a file's first event.
const FILE_VERSION: &str = "brain.Event:2";

/// Distinguishes the files one process opens within a second.
static FILE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes TensorBoard event files: scalars and histograms by tag and step.
///
/// Each writer makes a new file `events.out.tfevents.SECONDS.HOST.PID.N` in its
/// directory (TensorBoard reads every such file of a run directory). Records are
/// TensorFlow's `Event` protobufs (encoded by `prost`) in TFRecord framing with masked
/// CRC-32C checksums (the `crc32c` crate), readable by TensorBoard, `tf.data`, and the
/// `tensorboard` Python package's `EventAccumulator`.
///
/// Steps that are not multiples of [`WriterOptions::record_every`] are skipped
/// ([`EventWriter::records`] tells in advance, to skip computing a value), and records are
/// buffered and flushed every [`WriterOptions::flush_interval`], on [`EventWriter::flush`],
/// [`EventWriter::close`] and drop (where an error cannot be reported: call `close` to see
/// it).
///
/// ```
/// use rlgrad_summary::{EventWriter, WriterOptions, read_scalars};
///
/// let dir = tempfile::tempdir().unwrap();
/// let options = WriterOptions { record_every: 10, ..WriterOptions::default() };
/// let mut writer = EventWriter::create(dir.path(), options)?;
/// for step in 0..100u64 {
///     writer.scalar("train/loss", step, 1.0 / (1.0 + step as f64))?;
///     if writer.records(step) {
///         let weights: Vec<f32> = (0..64).map(|i| (i as f32 * 0.1).sin()).collect();
///         writer.histogram("actor/l1/weight", step, &weights)?;
///     }
/// }
/// let path = writer.path().to_path_buf();
/// writer.close()?;
///
/// let series = read_scalars(&path)?;
/// assert_eq!(series[0].name, "train/loss");
/// assert_eq!(series[0].points.len(), 10);
/// assert_eq!(series[0].points[1], (10, (1.0f32 / 11.0) as f64));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug)]
pub struct EventWriter {
    output: Output<BufWriter<File>>,
    scratch: Vec<u8>,
}

/// Seconds since the Unix epoch (0 for a clock set before it).
fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The machine's name for the file name, as TensorFlow puts it there; `localhost` when
/// it cannot be told.
fn hostname() -> String {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    if name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

fn check_tag(function: &'static str, tag: &str) -> Result<()> {
    if tag.is_empty() {
        return Err(Error::value(function, "tag", "a non-empty tag", "\"\""));
    }
    Ok(())
}

fn event_step(function: &'static str, step: u64) -> Result<i64> {
    i64::try_from(step).map_err(|_| {
        Error::out_of_range(
            function,
            "step",
            "a step at most i64::MAX (event files store int64 steps)",
            step,
        )
    })
}

impl EventWriter {
    /// Opens a new event file in `dir` (created if missing) and writes its version
    /// record. An error when `options.record_every` is 0 or the file cannot be created.
    pub fn create(dir: impl AsRef<Path>, options: WriterOptions) -> Result<Self> {
        const FUNCTION: &str = "EventWriter::create";
        let cadence = Cadence::new(FUNCTION, options)?;
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(FUNCTION, "create", dir, e))?;
        let seconds = wall_time() as u64;
        let path = dir.join(format!(
            "events.out.tfevents.{seconds}.{}.{}.{}",
            hostname(),
            std::process::id(),
            FILE_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(FUNCTION, "create", &path, e))?;
        let mut writer = Self {
            output: Output {
                path,
                out: BufWriter::new(file),
                cadence,
            },
            scratch: Vec::new(),
        };
        let version = Event {
            wall_time: wall_time(),
            step: 0,
            what: Some(event::What::FileVersion(FILE_VERSION.to_owned())),
        };
        writer.write(FUNCTION, &version)?;
        writer.output.flush(FUNCTION)?;
        Ok(writer)
    }

    /// The event file's path.
    pub fn path(&self) -> &Path {
        self.output.path()
    }

    /// Whether `step` is recorded (a multiple of `record_every`).
    pub fn records(&self, step: u64) -> bool {
        self.output.cadence.records(step)
    }

    /// Records scalar `value` under `tag` at `step` (TensorBoard stores it as `f32`), if
    /// the step is recorded. An error for an empty tag, a step above `i64::MAX`, or a
    /// failed write.
    pub fn scalar(&mut self, tag: &str, step: u64, value: f64) -> Result<()> {
        const FUNCTION: &str = "EventWriter::scalar";
        check_tag(FUNCTION, tag)?;
        let step = event_step(FUNCTION, step)?;
        if !self.records(step as u64) {
            return Ok(());
        }
        self.summary(
            FUNCTION,
            tag,
            step,
            summary_value::Value::SimpleValue(value as f32),
        )
    }

    /// Records the histogram of `values` under `tag` at `step`, if the step is recorded:
    /// TensorFlow's default exponential buckets (growing by 10% from `1e-12` to `1e20`,
    /// both signs), runs of empty buckets collapsed; `min`, `max`, `sum` and `sum_squares`
    /// accumulated in f64 in index order. An error for an empty tag, a step above
    /// `i64::MAX`, and on recorded steps for empty or non-finite `values`.
    pub fn histogram<T: Copy + Into<f64>>(
        &mut self,
        tag: &str,
        step: u64,
        values: &[T],
    ) -> Result<()> {
        const FUNCTION: &str = "EventWriter::histogram";
        check_tag(FUNCTION, tag)?;
        let step = event_step(FUNCTION, step)?;
        if !self.records(step as u64) {
            return Ok(());
        }
        if values.is_empty() {
            return Err(Error::empty(FUNCTION, "values", "at least one value"));
        }
        let values: Vec<f64> = values.iter().map(|&v| v.into()).collect();
        check::finite(FUNCTION, "values", &values)?;
        self.summary(
            FUNCTION,
            tag,
            step,
            summary_value::Value::Histo(histogram(&values)),
        )
    }

    fn summary(
        &mut self,
        function: &'static str,
        tag: &str,
        step: i64,
        value: summary_value::Value,
    ) -> Result<()> {
        let event = Event {
            wall_time: wall_time(),
            step,
            what: Some(event::What::Summary(Summary {
                value: vec![SummaryValue {
                    tag: tag.to_owned(),
                    value: Some(value),
                }],
            })),
        };
        self.write(function, &event)?;
        self.output.recorded(function)
    }

    fn write(&mut self, function: &'static str, event: &Event) -> Result<()> {
        self.scratch.clear();
        record::frame(&event.encode_to_vec(), &mut self.scratch);
        self.output
            .out
            .write_all(&self.scratch)
            .map_err(|e| Error::io(function, "write", &self.output.path, e))
    }

    /// Writes the buffered records to the file.
    pub fn flush(&mut self) -> Result<()> {
        self.output.flush("EventWriter::flush")
    }

    /// Flushes and syncs the file to disk, reporting any error (dropping a writer flushes
    /// too, but silently).
    pub fn close(mut self) -> Result<()> {
        self.output.close("EventWriter::close")
    }
}

/// The events of the file at `path`, as written. A record cut short at the end (a writer
/// still running, or killed) is left out.
pub(crate) fn read_events(function: &'static str, path: &Path) -> Result<Vec<Event>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(function, "read", path, e))?;
    let corrupt = |why: String| {
        Error::value(
            function,
            "path",
            "a TensorBoard event file",
            format_args!("`{}`: {why}", path.display()),
        )
    };
    record::records(&bytes)
        .map_err(corrupt)?
        .into_iter()
        .map(|data| {
            Event::decode(data).map_err(|e| corrupt(format!("a record does not decode: {e}")))
        })
        .collect()
}

/// The scalars of the event file at `path` (any TensorBoard event file with
/// `simple_value` scalars, as TensorFlow 1, PyTorch and this crate write them), one
/// [`Series`] per tag, sorted by tag, points in file order. Points at negative steps,
/// which event files allow and [`Series`] does not, are left out. An error for a file
/// that cannot be read or whose records fail their checksums; a record cut short at the
/// end is left out.
pub fn read_scalars(path: impl AsRef<Path>) -> Result<Vec<Series>> {
    let mut by_tag: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for event in read_events("read_scalars", path.as_ref())? {
        let (Some(event::What::Summary(summary)), Ok(step)) =
            (event.what, u64::try_from(event.step))
        else {
            continue;
        };
        for value in summary.value {
            if let Some(summary_value::Value::SimpleValue(v)) = value.value {
                by_tag
                    .entry(value.tag)
                    .or_default()
                    .push((step, f64::from(v)));
            }
        }
    }
    Ok(by_tag
        .into_iter()
        .map(|(name, points)| Series { name, points })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn writer(dir: &Path, record_every: u64) -> EventWriter {
        let options = WriterOptions {
            record_every,
            flush_interval: Duration::from_secs(3600),
        };
        EventWriter::create(dir, options).unwrap()
    }

    #[test]
    fn first_event_is_the_file_version_and_the_name_is_tensorboards() {
        let dir = tempfile::tempdir().unwrap();
        let w = writer(dir.path(), 1);
        let name = w.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("events.out.tfevents."), "{name}");
        // Written at once, before any flush: TensorBoard sees the run immediately.
        let events = read_events("test", w.path()).unwrap();
        assert_eq!(
            events[0].what,
            Some(event::What::FileVersion("brain.Event:2".to_owned()))
        );
        assert_ne!(writer(dir.path(), 1).path(), w.path());
    }

    #[test]
    fn histograms_round_trip_and_bad_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 2);
        w.histogram("h", 4, &[1.0f32, 2.0, 2.5, -1.0]).unwrap();
        w.histogram("h", 5, &[0.0f64]).unwrap();
        assert!(w.histogram("h", 6, &[1.0, f64::NAN]).is_err());
        assert!(w.histogram::<f64>("h", 6, &[]).is_err());
        // Not recorded: not even looked at.
        w.histogram::<f64>("h", 7, &[]).unwrap();
        assert!(w.histogram("", 6, &[1.0]).is_err());
        assert!(w.scalar("s", u64::MAX, 1.0).is_err());
        let path = w.path().to_path_buf();
        w.close().unwrap();
        let events = read_events("test", &path).unwrap();
        assert_eq!(events.len(), 2);
        let Some(event::What::Summary(summary)) = &events[1].what else {
            panic!("a summary event");
        };
        let Some(summary_value::Value::Histo(h)) = &summary.value[0].value else {
            panic!("a histogram");
        };
        assert_eq!(
            (events[1].step, h.num, h.min, h.max, h.sum),
            (4, 4.0, -1.0, 2.5, 4.5)
        );
    }

    #[test]
    fn drop_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 1);
        w.scalar("s", 3, 0.5).unwrap();
        let path = w.path().to_path_buf();
        assert!(
            read_scalars(&path).unwrap().is_empty(),
            "buffered until a flush"
        );
        drop(w);
        assert_eq!(read_scalars(&path).unwrap()[0].points, [(3, 0.5)]);
    }

    #[test]
    fn a_zero_interval_flushes_at_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let options = WriterOptions {
            record_every: 1,
            flush_interval: Duration::ZERO,
        };
        let mut w = EventWriter::create(dir.path(), options).unwrap();
        w.scalar("s", 1, 2.0).unwrap();
        assert_eq!(read_scalars(w.path()).unwrap()[0].points, [(1, 2.0)]);
    }

    #[test]
    fn negative_steps_of_foreign_files_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 1);
        for step in [-3, 4] {
            let value = SummaryValue {
                tag: "s".to_owned(),
                value: Some(summary_value::Value::SimpleValue(1.5)),
            };
            let event = Event {
                wall_time: 0.0,
                step,
                what: Some(event::What::Summary(Summary { value: vec![value] })),
            };
            w.write("test", &event).unwrap();
        }
        w.flush().unwrap();
        assert_eq!(read_scalars(w.path()).unwrap()[0].points, [(4, 1.5)]);
    }

    #[test]
    fn damaged_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), 1);
        w.scalar("s", 1, 2.0).unwrap();
        let path = w.path().to_path_buf();
        w.close().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 6;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = read_scalars(&path).unwrap_err().to_string();
        assert!(e.contains("checksum does not match"), "{e}");
        assert!(read_scalars(dir.path().join("missing")).is_err());
    }
}
