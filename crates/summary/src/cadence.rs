//! [`WriterOptions`]: which steps a writer records and how often it flushes.

use std::time::{Duration, Instant};

use rlgrad_core::{Error, Result};

/// Which steps a summary writer records and how often it flushes, shared by
/// [`EventWriter`](crate::EventWriter) and [`CsvWriter`](crate::CsvWriter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Record only steps that are multiples of this (at least 1). Default 1: every step.
    /// `tf.summary.record_if(step % n == 0)` in TensorFlow's terms.
    pub record_every: u64,
    /// Flush buffered records once this much time has passed since the last flush,
    /// checked at each record (there is no background thread), and always on `flush`,
    /// `close` and drop. Default 120 s, as PyTorch's `SummaryWriter(flush_secs=120)`.
    pub flush_interval: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            record_every: 1,
            flush_interval: Duration::from_secs(120),
        }
    }
}

/// The recording policy and flush clock of one writer.
#[derive(Debug)]
pub(crate) struct Cadence {
    options: WriterOptions,
    last_flush: Instant,
}

impl Cadence {
    pub(crate) fn new(function: &'static str, options: WriterOptions) -> Result<Self> {
        if options.record_every == 0 {
            return Err(Error::value(
                function,
                "options.record_every",
                "at least 1",
                0,
            ));
        }
        Ok(Self {
            options,
            last_flush: Instant::now(),
        })
    }

    pub(crate) fn records(&self, step: u64) -> bool {
        step.is_multiple_of(self.options.record_every)
    }

    /// Whether the flush interval has passed; if so the clock restarts.
    pub(crate) fn flush_due(&mut self) -> bool {
        let due = self.last_flush.elapsed() >= self.options.flush_interval;
        if due {
            self.flushed();
        }
        due
    }

    pub(crate) fn flushed(&mut self) {
        self.last_flush = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_multiples_of_n_and_refuses_zero() {
        let options = WriterOptions {
            record_every: 5,
            ..WriterOptions::default()
        };
        let cadence = Cadence::new("test", options).unwrap();
        let recorded: Vec<u64> = (0..16).filter(|&s| cadence.records(s)).collect();
        assert_eq!(recorded, [0, 5, 10, 15]);
        let zero = WriterOptions {
            record_every: 0,
            ..options
        };
        assert!(Cadence::new("test", zero).is_err());
    }

    #[test]
    fn flush_is_due_after_the_interval_only() {
        let never = WriterOptions {
            flush_interval: Duration::from_secs(3600),
            ..WriterOptions::default()
        };
        assert!(!Cadence::new("test", never).unwrap().flush_due());
        let always = WriterOptions {
            flush_interval: Duration::ZERO,
            ..WriterOptions::default()
        };
        assert!(Cadence::new("test", always).unwrap().flush_due());
    }
}
