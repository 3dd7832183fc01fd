//! [`CsvWriter`]: scalars as CSV rows, for people without TensorBoard.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rlgrad_core::{Error, Result};

use crate::cadence::{Cadence, WriterOptions};
use crate::output::Output;

const HEADER: [&str; 4] = ["wall_time", "step", "tag", "value"];

/// Appends scalars to a CSV file, one row `wall_time,step,tag,value` each (RFC 4180
/// quoting by the `csv` crate; values in the shortest form that reads back to the same
/// `f64`). Opening an existing file appends to it, so a resumed run continues its log;
/// the header row is written only into an empty file. Recording policy and flushing are
/// the [`EventWriter`](crate::EventWriter)'s ([`WriterOptions`]).
///
/// ```
/// use rlgrad_summary::{CsvWriter, WriterOptions};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("scalars.csv");
/// let mut csv = CsvWriter::open(&path, WriterOptions::default())?;
/// csv.scalar("train/loss", 1, 0.25)?;
/// csv.scalar("eval/return, mean", 1, -3.5)?;
/// csv.close()?;
/// let text = std::fs::read_to_string(&path).unwrap();
/// let rows: Vec<&str> = text.lines().collect();
/// assert_eq!(rows[0], "wall_time,step,tag,value");
/// assert!(rows[1].ends_with(",1,train/loss,0.25"));
/// assert!(rows[2].ends_with(r#",1,"eval/return, mean",-3.5"#));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug)]
pub struct CsvWriter {
    output: Output<csv::Writer<File>>,
}

fn io_error(function: &'static str, action: &'static str, path: &Path, e: csv::Error) -> Error {
    Error::io(function, action, path, std::io::Error::other(e))
}

impl CsvWriter {
    /// Opens `path` for appending (creating it and its directory if missing). An error
    /// when `options.record_every` is 0 or the file cannot be opened or written.
    pub fn open(path: impl AsRef<Path>, options: WriterOptions) -> Result<Self> {
        const FUNCTION: &str = "CsvWriter::open";
        let cadence = Cadence::new(FUNCTION, options)?;
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(FUNCTION, "create", dir, e))?;
        }
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| Error::io(FUNCTION, "open", &path, e))?;
        let empty = file
            .metadata()
            .map_err(|e| Error::io(FUNCTION, "open", &path, e))?
            .len()
            == 0;
        let mut out = csv::Writer::from_writer(file);
        if empty {
            out.write_record(HEADER)
                .and_then(|()| out.flush().map_err(csv::Error::from))
                .map_err(|e| io_error(FUNCTION, "write", &path, e))?;
        }
        Ok(Self {
            output: Output { path, out, cadence },
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.output.path()
    }

    /// Whether `step` is recorded (a multiple of `record_every`).
    pub fn records(&self, step: u64) -> bool {
        self.output.cadence.records(step)
    }

    /// Appends the row for `value` under `tag` at `step`, if the step is recorded. An
    /// error for an empty tag or a failed write.
    pub fn scalar(&mut self, tag: &str, step: u64, value: f64) -> Result<()> {
        const FUNCTION: &str = "CsvWriter::scalar";
        if tag.is_empty() {
            return Err(Error::value(FUNCTION, "tag", "a non-empty tag", "\"\""));
        }
        if !self.records(step) {
            return Ok(());
        }
        let wall_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let output = &mut self.output;
        output
            .out
            .serialize((wall_time, step, tag, value))
            .map_err(|e| io_error(FUNCTION, "write", &output.path, e))?;
        output.recorded(FUNCTION)
    }

    /// Writes the buffered rows to the file.
    pub fn flush(&mut self) -> Result<()> {
        self.output.flush("CsvWriter::flush")
    }

    /// Flushes and syncs the file to disk, reporting any error (dropping a writer flushes
    /// too, but silently).
    pub fn close(mut self) -> Result<()> {
        self.output.close("CsvWriter::close")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn reopening_appends_without_a_second_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("s.csv");
        let options = WriterOptions {
            record_every: 2,
            flush_interval: Duration::from_secs(3600),
        };
        let mut csv = CsvWriter::open(&path, options).unwrap();
        for step in 0..4 {
            csv.scalar("loss", step, step as f64 / 3.0).unwrap();
        }
        drop(csv);
        let mut csv = CsvWriter::open(&path, options).unwrap();
        csv.scalar("loss", 4, 1e-300).unwrap();
        assert!(csv.scalar("", 4, 1.0).is_err());
        csv.close().unwrap();
        let mut reader = csv::Reader::from_path(&path).unwrap();
        assert_eq!(reader.headers().unwrap(), HEADER.as_slice());
        let rows: Vec<(f64, u64, String, f64)> = reader.deserialize().map(|r| r.unwrap()).collect();
        let values: Vec<(u64, f64)> = rows.iter().map(|r| (r.1, r.3)).collect();
        assert_eq!(values, [(0, 0.0), (2, 2.0 / 3.0), (4, 1e-300)]);
        assert!(
            CsvWriter::open(
                &path,
                WriterOptions {
                    record_every: 0,
                    ..options
                }
            )
            .is_err()
        );
    }
}
