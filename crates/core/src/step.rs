//! Captured training steps: a step that a device may record once and replay, with the bits
//! of running it as it comes.
//!
//! A training step (sample, forward, backward, optimizer, Polyak) is hundreds of small
//! kernels; on a GPU, launching them one by one costs more than running them. [`Step`]
//! lets the device record the step's work the first time and replay the recording after
//! (a CUDA graph on `rlgrad-cuda`), while the step's host code still runs every time:
//! random streams, optimizer step counts and schedules advance on the host as they do
//! without a `Step`, and what a replay launches is checked against the recording, so a
//! replay gives **the bits of the eager step**. The [`crate::Cpu`] runs every step as it
//! comes, and checks the one rule a recording needs, so a step that passes on the Cpu
//! records on a GPU.
//!
//! **The rule: no host reads inside a step.** A recording holds device work only, so a
//! step that reads the device from the host (`Tensor::to_vec`, `to_scalar`, a loss
//! logged every step, an opt-in finite check, a download, a synchronization) cannot be
//! recorded. Such a step still runs to its end, eagerly and with correct results, and
//! then [`Step::run`] returns an [`Error::Device`] naming the first read. Read values after
//! `run` returns instead (the step can return the tensor; reading it then costs one
//! wait, not a lost recording).
//!
//! ```
//! use rlgrad_core::{Cpu, Device, Result, Step};
//!
//! let cpu = Cpu::seq();
//! let mut weights = cpu.upload(&[1.0f32, 2.0])?;
//! let mut step = Step::new(&cpu);
//! for _ in 0..3 {
//!     // Device work only: no host read inside.
//!     step.run(|| {
//!         for w in weights.iter_mut() {
//!             *w *= 0.5;
//!         }
//!         Ok(())
//!     })?;
//! }
//! // Read after the step.
//! assert_eq!(cpu.download(&weights)?, [0.125, 0.25]);
//!
//! // A host read inside a step: the step runs, and `run` says what broke the recording.
//! let refused = step.run(|| cpu.download(&weights).map(|_| ()));
//! assert!(refused.unwrap_err().to_string().contains("Device::download"));
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

use std::cell::RefCell;

use crate::{Device, Error, Result};

/// A training step that the device may record once and replay (see the
/// [module documentation](self)): create it once, call [`Step::run`] with the step's code
/// every iteration.
///
/// What a device keeps between runs (on a GPU, its recordings) lives here, so one
/// `Step` per kind of step: two different steps (a critic update and an actor update)
/// take two `Step`s or one `Step` whose closure does both. A step whose work changes from
/// one run to the next (another shape, another branch) is recorded again: a device keeps
/// a few recordings and replays the one whose work matches.
#[derive(Debug)]
pub struct Step<D: Device> {
    device: D,
    recordings: D::Recordings,
}

impl<D: Device> Step<D> {
    /// A step on `device`, recorded at its first runs.
    pub fn new(device: &D) -> Self {
        Self {
            device: device.clone(),
            recordings: D::Recordings::default(),
        }
    }

    /// Runs `step`: recorded or replayed where the device records steps, as it comes on
    /// the Cpu; its result either way. The step's own error is returned as it is. A step
    /// that reads the device from the host runs to its end with correct results, and
    /// then returns [`Error::Device`] naming the first read (see the
    /// [module documentation](self)).
    pub fn run<R>(&mut self, step: impl FnOnce() -> Result<R>) -> Result<R> {
        let (device, recordings) = (&self.device, &mut self.recordings);
        match watching_host_reads(|| device.run_step(recordings, step)) {
            (Ok(_), Some(read)) => Err(host_read_error(device.name(), read)),
            (result, _) => result,
        }
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// What the device keeps of this step (on a GPU: its recordings and how often each
    /// was replayed).
    pub fn recordings(&self) -> &D::Recordings {
        &self.recordings
    }
}

thread_local! {
    /// While a step runs on this thread: the first host read of its work, if any.
    static HOST_READ: RefCell<Option<Option<&'static str>>> = const { RefCell::new(None) };
}

/// Runs `step` with this thread's host reads watched: its result, and the first host read
/// ([`note_host_read`]) it made, if any, which a step around this one (on this thread)
/// made too.
fn watching_host_reads<R>(step: impl FnOnce() -> R) -> (R, Option<&'static str>) {
    /// Puts the enclosing step's watch back, also when `step` panics.
    struct Restore(Option<Option<&'static str>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            HOST_READ.with(|read| *read.borrow_mut() = outer);
        }
    }
    let restore = Restore(HOST_READ.with(|read| read.borrow_mut().replace(None)));
    let result = step();
    let read = HOST_READ.with(|read| read.borrow_mut().take()).flatten();
    drop(restore);
    if let Some(read) = read {
        // A step around this one read the device too.
        note_host_read(read);
    }
    (result, read)
}

/// Tells a running step (if any, on this thread) that `function` read the device from
/// the host. Devices call it from their downloads, host views and synchronizations.
pub fn note_host_read(function: &'static str) {
    HOST_READ.with(|read| {
        if let Some(first @ None) = read.borrow_mut().as_mut() {
            *first = Some(function);
        }
    });
}

/// Whether a step is running on this thread.
pub fn in_step() -> bool {
    HOST_READ.with(|read| read.borrow().is_some())
}

/// The error of a step whose work read the device from the host at `read` (on `device`):
/// the step ran to its end, and could not be recorded.
fn host_read_error(device: String, read: &'static str) -> Error {
    Error::Device {
        function: "Step::run",
        device,
        message: format!(
            "the step read a device from the host (`{read}`), which no recording can hold: \
             the step ran to its end (its work eagerly from the read on) and its results \
             are valid. Read values after `Step::run` returns (return the tensors from the \
             step), or run this work outside the step"
        ),
        cause: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cpu;

    #[test]
    fn a_cpu_step_runs_its_work_and_names_the_first_host_read() {
        let cpu = Cpu::seq();
        let buffer = cpu.upload(&[1.0f32, 2.0]).unwrap();
        let mut step = Step::new(&cpu);
        assert_eq!(step.run(|| Ok(3)).unwrap(), 3);
        let mut ran = false;
        let err = step
            .run(|| {
                cpu.synchronize()?;
                cpu.download(&buffer)?;
                ran = true;
                Ok(())
            })
            .unwrap_err();
        assert!(ran, "the step runs to its end");
        let message = err.to_string();
        assert!(message.contains("Step::run") && message.contains("Device::synchronize"));
        assert!(
            !message.contains("Device::download"),
            "the first read only: {message}"
        );
        // The step's own errors come back as they are, and nothing leaks out of a step.
        let own = step.run(|| -> Result<()> { Err(Error::empty("mine", "x", 1)) });
        assert_eq!(own.unwrap_err().function(), "mine");
        assert!(!in_step());
        cpu.download(&buffer).unwrap();
        assert!(
            step.run(|| Ok(())).is_ok(),
            "a read outside a step is not counted"
        );
    }

    #[test]
    fn steps_nest_and_a_read_in_the_inner_one_is_the_outer_ones_too() {
        let cpu = Cpu::seq();
        let buffer = cpu.upload(&[1.0f32]).unwrap();
        let mut outer = Step::new(&cpu);
        let mut inner = Step::new(&cpu);
        let err = outer
            .run(|| {
                assert!(inner.run(|| Ok(())).is_ok());
                assert!(in_step());
                cpu.host_values(&buffer).map(|_| ())
            })
            .unwrap_err();
        assert!(err.to_string().contains("Device::host_slice"), "{err}");
        let err = outer
            .run(|| {
                let inner_err = inner.run(|| cpu.download(&buffer).map(drop)).unwrap_err();
                assert!(inner_err.to_string().contains("Device::download"));
                Ok(())
            })
            .unwrap_err();
        assert!(err.to_string().contains("Device::download"), "{err}");
    }
}
