//! The file under a summary writer: its path, its buffered writer and its cadence; flushed
//! when the cadence's interval has passed, on `flush`, on `close` (then synced to disk)
//! and, silently, on drop.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rlgrad_core::{Error, Result};

use crate::cadence::Cadence;

/// A buffered writer over a file: `BufWriter` for event records, `csv::Writer` for rows.
pub(crate) trait Buffered {
    fn flush_buffer(&mut self) -> std::io::Result<()>;
    fn file(&self) -> &File;
}

impl Buffered for BufWriter<File> {
    fn flush_buffer(&mut self) -> std::io::Result<()> {
        self.flush()
    }

    fn file(&self) -> &File {
        self.get_ref()
    }
}

impl Buffered for csv::Writer<File> {
    fn flush_buffer(&mut self) -> std::io::Result<()> {
        self.flush()
    }

    fn file(&self) -> &File {
        self.get_ref()
    }
}

#[derive(Debug)]
pub(crate) struct Output<W: Buffered> {
    pub(crate) path: PathBuf,
    pub(crate) out: W,
    pub(crate) cadence: Cadence,
}

impl<W: Buffered> Output<W> {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// After a record: flushes when the cadence's interval has passed.
    pub(crate) fn recorded(&mut self, function: &'static str) -> Result<()> {
        if self.cadence.flush_due() {
            self.flush(function)?;
        }
        Ok(())
    }

    pub(crate) fn flush(&mut self, function: &'static str) -> Result<()> {
        self.cadence.flushed();
        self.out
            .flush_buffer()
            .map_err(|e| Error::io(function, "write", &self.path, e))
    }

    /// Flushes and syncs the file to disk, reporting any error.
    pub(crate) fn close(&mut self, function: &'static str) -> Result<()> {
        self.flush(function)?;
        self.out
            .file()
            .sync_all()
            .map_err(|e| Error::io(function, "sync", &self.path, e))
    }
}

impl<W: Buffered> Drop for Output<W> {
    fn drop(&mut self) {
        // Drop cannot report an error; `close` does.
        let _ = self.out.flush_buffer();
    }
}
