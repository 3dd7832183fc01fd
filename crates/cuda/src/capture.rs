//! Captured training steps ([`rlgrad_core::Step`]) on a GPU: CUDA graphs with the eager
//! step's bits.
//!
//! While a step runs, its work is **logged, not launched**: each kernel launch (its
//! function, grid and parameter bytes), each upload (its bytes staged on the host, then a
//! copy kernel from a device staging buffer) and each zeroing (a kernel too), in order.
//! The step's host code runs as it always does (random streams, optimizer step counts and
//! the caching allocator advance as without a `Step`). When the step returns, the log is
//! compared with the step's recordings:
//!
//! - **a recording with the same work** (the same kernels, grids and parameter sizes, in
//!   the same order) is replayed: the parameters that changed (the optimizer's step
//!   scalars, a random stream's position, a buffer the allocator handed out elsewhere) are
//!   written into its graph's nodes (`cuGraphExecKernelNodeSetParams`), the staged bytes are
//!   uploaded in one copy, and the graph is launched: the same kernels with the same
//!   parameters as launching them one by one, so the same bits;
//! - **otherwise** the log is captured into a new CUDA graph (up to [`RECORDINGS`] per
//!   step, the oldest dropped) and launched.
//!
//! A host read inside the step (a download, a synchronization) launches the work logged so
//! far, eagerly, and the rest of the step runs eagerly too; [`Step::run`] then returns the
//! error naming the read. A step that returns an error has its logged work launched
//! eagerly before the error is returned, so the device is where an eager run would have
//! left it.
//!
//! Buffers freed while a step is logged are held until its work is launched: a free is
//! ordered on the stream, and the logged kernels that use the buffer are launched after.
//!
//! [`Step::run`]: rlgrad_core::Step::run

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::fmt;

use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaGraph, CudaSlice, LaunchConfig, PushKernelArg};
use rlgrad_core::{Error, Result};

use crate::Cuda;
use crate::device::{CudaBuffer, KernelArg};

/// Recordings kept per step: enough for steps that alternate (TD3's delayed actor update)
/// or change shape now and then (the last minibatch of an epoch).
pub const RECORDINGS: usize = 4;

/// Staged upload offsets are multiples of this, so that the copies read aligned words.
const STAGE_ALIGN: usize = 16;

thread_local! {
    /// Whether a step is logging its work on this thread: frees are held meanwhile.
    static LOGGING: Cell<bool> = const { Cell::new(false) };
    /// The buffers freed while this thread's step is logged.
    static HELD: RefCell<Vec<CudaSlice<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Frees `slice`, or holds it until the running step's work is launched (see the module
/// documentation).
pub(crate) fn dispose(slice: CudaSlice<u8>) {
    if LOGGING.with(Cell::get) {
        HELD.with(|held| held.borrow_mut().push(slice));
    }
}

/// A kernel's parameters, each at a multiple of 8 bytes in `words` (as the driver reads a
/// parameter through a pointer to its first byte).
#[derive(Debug, Clone, PartialEq)]
struct Params {
    words: Vec<u64>,
    /// Each parameter's first word and length in bytes.
    spans: Vec<(usize, usize)>,
}

impl Params {
    fn of(args: &[&dyn KernelArg]) -> Self {
        let mut words = Vec::new();
        let mut spans = Vec::with_capacity(args.len());
        for arg in args {
            let bytes = arg.bytes();
            let first = words.len();
            words.resize(first + bytes.len().div_ceil(8), 0);
            for (k, chunk) in bytes.chunks(8).enumerate() {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                words[first + k] = u64::from_le_bytes(word);
            }
            spans.push((first, bytes.len()));
        }
        Self { words, spans }
    }

    /// Pointers to each parameter, as `kernelParams` and the launch builder take them.
    fn pointers(&mut self) -> Vec<*mut c_void> {
        let base = self.words.as_mut_ptr();
        // SAFETY: every span's first word is inside `words`.
        (self.spans.iter())
            .map(|&(first, _)| unsafe { base.add(first) }.cast())
            .collect()
    }
}

/// One logged launch.
#[derive(Clone)]
struct Launch {
    /// The public function that issued it, for messages.
    function: &'static str,
    kernel: CudaFunction,
    config: LaunchConfig,
    params: Params,
    /// For a staged upload's copy: the offset of its bytes in the staging buffer, whose
    /// address goes into the first parameter once the staging buffer is known.
    staged_at: Option<usize>,
}

impl Launch {
    /// Whether `other` does the same work up to its parameters' values.
    fn same_work(&self, other: &Launch) -> bool {
        let dims = |c: &LaunchConfig| (c.grid_dim, c.block_dim, c.shared_mem_bytes);
        self.kernel.cu_function() == other.kernel.cu_function()
            && dims(&self.config) == dims(&other.config)
            && (self.params.spans.iter().map(|s| s.1)).eq(other.params.spans.iter().map(|s| s.1))
    }
}

/// The work of a step being logged, on its device.
#[derive(Default)]
pub(crate) struct Log {
    launches: Vec<Launch>,
    /// The uploads' bytes, each at a multiple of [`STAGE_ALIGN`].
    staged: Vec<u8>,
    /// The step's staging buffer (lent by its [`CudaRecordings`] for the run).
    staging: Option<CudaBuffer<u8>>,
    /// A host read flushed the log: the rest of the step runs eagerly.
    eager: bool,
}

/// A step's work recorded as a CUDA graph.
struct Recording {
    graph: CudaGraph,
    /// The graph's kernel node of each launch.
    nodes: Vec<sys::CUgraphNode>,
    launches: Vec<Launch>,
    replays: u64,
}

// SAFETY: the graph and its nodes are driver handles used only through `&mut` of the
// `Step` that owns them, one thread at a time, with the device's context bound by each
// call (cudarc's and `Cuda::bind`).
unsafe impl Send for Recording {}

/// What a GPU keeps of a [`rlgrad_core::Step`]: its recordings (CUDA graphs), its staging
/// buffer for uploads, and counts of what its runs did.
#[derive(Default)]
pub struct CudaRecordings {
    recordings: Vec<Recording>,
    staging: Option<CudaBuffer<u8>>,
    /// Why the step is not recorded any more (a capture the driver refused), if so.
    refused: Option<String>,
    stats: StepStats,
}

/// How the runs of a captured step went ([`CudaRecordings::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepStats {
    /// Runs of the step.
    pub runs: u64,
    /// Runs recorded as a new graph (and launched).
    pub recorded: u64,
    /// Runs that replayed a recording.
    pub replayed: u64,
    /// Runs whose work was launched eagerly: a host read, an error, or a refused capture.
    pub eager: u64,
    /// Graph nodes whose parameters a replay changed.
    pub node_updates: u64,
}

impl CudaRecordings {
    /// How the step's runs went.
    pub fn stats(&self) -> StepStats {
        self.stats
    }

    /// The recordings kept (at most [`RECORDINGS`]), each its kernel launches.
    pub fn recorded_launches(&self) -> Vec<usize> {
        self.recordings.iter().map(|r| r.launches.len()).collect()
    }

    /// Why the step is no longer recorded (the driver refused a capture), if it is not.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }
}

impl fmt::Debug for CudaRecordings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaRecordings")
            .field("launches", &self.recorded_launches())
            .field("refused", &self.refused)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Cuda {
    /// [`rlgrad_core::Device::run_step`] on this GPU (see the module documentation).
    pub(crate) fn run_captured<R>(
        &self,
        recordings: &mut CudaRecordings,
        step: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        recordings.stats.runs += 1;
        let nested = self.log().is_some();
        if nested || recordings.refused.is_some() {
            // Inside another step, the outer step logs the work; a refused step runs as
            // it comes.
            if !nested {
                recordings.stats.eager += 1;
            }
            return finish(self, rlgrad_core::step::watching_host_reads(step));
        }
        *self.log() = Some(Log {
            staging: recordings.staging.take(),
            ..Log::default()
        });
        LOGGING.with(|logging| logging.set(true));
        let (result, read) = rlgrad_core::step::watching_host_reads(step);
        LOGGING.with(|logging| logging.set(false));
        let mut log = self.log().take().expect("the step's log is this run's");
        let launched = if result.is_ok() && !log.eager {
            self.launch_recorded(recordings, &mut log)
        } else {
            recordings.stats.eager += 1;
            self.flush(&mut log)
        };
        recordings.staging = log.staging.take();
        // The step's work is on the stream now: frees after it are ordered after it.
        HELD.with(|held| held.borrow_mut().clear());
        launched?;
        finish(self, (result, read))
    }

    /// The running step's log, if any.
    pub(crate) fn log(&self) -> std::sync::MutexGuard<'_, Option<Log>> {
        self.inner().log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a step is logging its work (not running eagerly after a host read).
    fn logging(&self) -> bool {
        self.log().as_ref().is_some_and(|log| !log.eager)
    }

    /// Logs a launch where a step is logging; `false` where the launch is to run now.
    pub(crate) fn logged_launch(
        &self,
        function: &'static str,
        kernel: &CudaFunction,
        config: LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> bool {
        let mut log = self.log();
        match log.as_mut() {
            Some(log) if !log.eager => {
                log.launches.push(Launch {
                    function,
                    kernel: kernel.clone(),
                    config,
                    params: Params::of(args),
                    staged_at: None,
                });
                true
            }
            _ => false,
        }
    }

    /// Logs an upload of `host` into the buffer at `target` where a step is logging (its
    /// bytes staged, a copy kernel logged); `false` where the upload is to run now.
    pub(crate) fn logged_upload(
        &self,
        function: &'static str,
        host: &[u8],
        target: u64,
    ) -> Result<bool> {
        if !self.logging() {
            return Ok(false);
        }
        let kernel = self.byte_kernel("copy_bytes")?;
        let mut log = self.log();
        let log = log
            .as_mut()
            .expect("checked above; only this thread runs the step");
        let at = log.staged.len().next_multiple_of(STAGE_ALIGN);
        log.staged.resize(at, 0);
        log.staged.extend_from_slice(host);
        let len = host.len() as u64;
        log.launches.push(Launch {
            function,
            kernel,
            config: crate::device::grid(host.len()),
            // The source is patched in once the staging buffer is known.
            params: Params::of(&[&0u64, &target, &len]),
            staged_at: Some(at),
        });
        Ok(true)
    }

    /// Logs `kernel_name` of the byte kernels (`zero_bytes`, `copy_bytes`) where a step is
    /// logging; `false` where the work is to run now.
    pub(crate) fn logged_bytes(
        &self,
        function: &'static str,
        kernel_name: &'static str,
        args: &[&dyn KernelArg],
        bytes: usize,
    ) -> Result<bool> {
        if !self.logging() {
            return Ok(false);
        }
        let kernel = self.byte_kernel(kernel_name)?;
        Ok(self.logged_launch(function, &kernel, crate::device::grid(bytes), args))
    }

    /// Before a host read (`function`): where a step is logging, launches what it logged
    /// so far and lets the rest of the step run eagerly.
    pub(crate) fn before_host_read(&self, function: &'static str) -> Result<()> {
        rlgrad_core::step::note_host_read(function);
        // Taken out of the log, which is unlocked before the launches (the staging upload
        // asks it whether to log).
        let taken = match self.log().as_mut() {
            Some(log) if !log.eager => {
                log.eager = true;
                Some((
                    std::mem::take(&mut log.launches),
                    std::mem::take(&mut log.staged),
                    log.staging.take(),
                ))
            }
            _ => None,
        };
        let Some((mut launches, staged, mut staging)) = taken else {
            return Ok(());
        };
        let flushed = self.run_eagerly(&mut launches, &staged, &mut staging);
        if let Some(log) = self.log().as_mut() {
            log.staging = staging;
        }
        flushed
    }

    /// Launches `log`'s work eagerly, in order.
    fn flush(&self, log: &mut Log) -> Result<()> {
        let staged = std::mem::take(&mut log.staged);
        self.run_eagerly(&mut log.launches, &staged, &mut log.staging)
    }

    fn run_eagerly(
        &self,
        launches: &mut [Launch],
        staged: &[u8],
        staging: &mut Option<CudaBuffer<u8>>,
    ) -> Result<()> {
        self.stage(launches, staged, staging)?;
        for launch in launches.iter_mut() {
            let pointers = launch.params.pointers();
            let mut builder = self.inner().stream.launch_builder(&launch.kernel);
            for pointer in &pointers {
                // SAFETY: the parameter's bytes live in `launch.params` for the call.
                builder.arg(unsafe { &*pointer.cast::<u64>() });
            }
            self.count_launch();
            // SAFETY: the logged launch's own parameters, as `Cuda::launch` checked them.
            unsafe { builder.launch(launch.config) }
                .map_err(|e| self.driver_error(launch.function, e))?;
        }
        Ok(())
    }

    /// Uploads `staged` into the staging buffer (a larger one where it does not fit) and
    /// puts its addresses into the copies that read it.
    fn stage(
        &self,
        launches: &mut [Launch],
        staged: &[u8],
        staging: &mut Option<CudaBuffer<u8>>,
    ) -> Result<()> {
        if staged.is_empty() {
            return Ok(());
        }
        if staging.as_ref().is_none_or(|s| s.len() < staged.len()) {
            // The old buffer's free is ordered after the graphs that read it.
            if let Some(old) = staging.take() {
                self.release(old);
            }
            *staging = Some(self.uninit("Step::run", staged.len().next_power_of_two())?);
        }
        let staging = staging.as_mut().expect("allocated above");
        self.copy_in("Step::run", staged, staging)?;
        let base = self.ptr(staging);
        for launch in launches {
            if let Some(at) = launch.staged_at {
                launch.params.words[launch.params.spans[0].0] = base + at as u64;
            }
        }
        Ok(())
    }

    /// Replays the recording whose work is `log`'s, or records it.
    fn launch_recorded(&self, recordings: &mut CudaRecordings, log: &mut Log) -> Result<()> {
        if log.launches.is_empty() {
            return Ok(());
        }
        let staged = std::mem::take(&mut log.staged);
        self.stage(&mut log.launches, &staged, &mut log.staging)?;
        let matching = (recordings.recordings.iter_mut()).find(|r| {
            r.launches.len() == log.launches.len()
                && r.launches
                    .iter()
                    .zip(&log.launches)
                    .all(|(a, b)| a.same_work(b))
        });
        match matching {
            Some(recording) => {
                recordings.stats.node_updates += self.update_nodes(recording, &log.launches)?;
                recording.replays += 1;
                recordings.stats.replayed += 1;
                self.launch_graph(&recording.graph)
            }
            None => match self.record(&mut log.launches) {
                Ok(recording) => {
                    if recordings.recordings.len() == RECORDINGS {
                        recordings.recordings.remove(0);
                    }
                    recordings.stats.recorded += 1;
                    let launched = self.launch_graph(&recording.graph);
                    recordings.recordings.push(recording);
                    launched
                }
                Err(why) => {
                    // The staged bytes are already uploaded and patched in.
                    recordings.refused = Some(why.to_string());
                    recordings.stats.eager += 1;
                    self.run_eagerly(&mut log.launches, &[], &mut log.staging)
                }
            },
        }
    }

    /// Writes into `recording`'s nodes the parameters of `launches` that differ from the
    /// recorded ones; how many nodes changed.
    fn update_nodes(&self, recording: &mut Recording, launches: &[Launch]) -> Result<u64> {
        let mut updated = 0;
        self.bind()?;
        for ((recorded, node), launch) in (recording.launches.iter_mut())
            .zip(&recording.nodes)
            .zip(launches)
        {
            if recorded.params == launch.params {
                continue;
            }
            *recorded = launch.clone();
            let mut pointers = recorded.params.pointers();
            let config = recorded.config;
            let params = sys::CUDA_KERNEL_NODE_PARAMS {
                func: recorded.kernel.cu_function(),
                gridDimX: config.grid_dim.0,
                gridDimY: config.grid_dim.1,
                gridDimZ: config.grid_dim.2,
                blockDimX: config.block_dim.0,
                blockDimY: config.block_dim.1,
                blockDimZ: config.block_dim.2,
                sharedMemBytes: config.shared_mem_bytes,
                kernelParams: pointers.as_mut_ptr(),
                extra: std::ptr::null_mut(),
                kern: std::ptr::null_mut(),
                ctx: std::ptr::null_mut(),
            };
            // SAFETY: `node` is a kernel node of this graph's executable, `params` names
            // its own kernel and grid with parameters laid out as it takes them, alive for
            // the call (the driver copies them).
            unsafe {
                sys::cuGraphExecKernelNodeSetParams_v2(
                    recording.graph.cu_graph_exec(),
                    *node,
                    &params,
                )
            }
            .result()
            .map_err(|e| self.driver_error("Step::run", e))?;
            updated += 1;
        }
        Ok(updated)
    }

    /// Captures `launches` into a CUDA graph; the driver's reason where it refuses.
    fn record(&self, launches: &mut [Launch]) -> std::result::Result<Recording, Error> {
        let stream = &self.inner().stream;
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| self.driver_error("Step::run", e))?;
        let captured = self.capture_launches(launches);
        let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        let nodes = captured?;
        let graph = ended
            .map_err(|e| self.driver_error("Step::run", e))?
            .ok_or_else(|| self.error("Step::run", "the capture recorded no graph"))?;
        Ok(Recording {
            graph,
            nodes,
            launches: launches.to_vec(),
            replays: 0,
        })
    }

    /// Launches `launches` into the capturing stream; each one's graph node.
    fn capture_launches(&self, launches: &mut [Launch]) -> Result<Vec<sys::CUgraphNode>> {
        let stream = &self.inner().stream;
        let mut nodes = Vec::with_capacity(launches.len());
        for launch in launches.iter_mut() {
            let pointers = launch.params.pointers();
            let mut builder = stream.launch_builder(&launch.kernel);
            for pointer in &pointers {
                // SAFETY: the parameter's bytes live in `launch.params` for the call.
                builder.arg(unsafe { &*pointer.cast::<u64>() });
            }
            // SAFETY: the logged launch's own parameters, as `Cuda::launch` checked them.
            unsafe { builder.launch(launch.config) }
                .map_err(|e| self.driver_error(launch.function, e))?;
            let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
            let mut dependencies: *const sys::CUgraphNode = std::ptr::null();
            let mut count = 0usize;
            // SAFETY: out-pointers to locals; the optional ones are null.
            unsafe {
                sys::cuStreamGetCaptureInfo_v3(
                    stream.cu_stream(),
                    &mut status,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    &mut dependencies,
                    std::ptr::null_mut(),
                    &mut count,
                )
            }
            .result()
            .map_err(|e| self.driver_error("Step::run", e))?;
            if count != 1 || dependencies.is_null() {
                return Err(self.error(
                    "Step::run",
                    format_args!("the capture has {count} open ends after a launch, not 1"),
                ));
            }
            // SAFETY: the driver returned `count` (1) nodes at `dependencies`, valid until
            // the next capture call.
            nodes.push(unsafe { *dependencies });
        }
        Ok(nodes)
    }

    fn launch_graph(&self, graph: &CudaGraph) -> Result<()> {
        self.count_graph_launch();
        graph
            .launch()
            .map_err(|e| self.driver_error("Step::run", e))
    }
}

/// A step's result: its own, or the host-read error where it read the device.
fn finish<R>(cuda: &Cuda, (result, read): (Result<R>, Option<&'static str>)) -> Result<R> {
    use rlgrad_core::Device;
    match (result, read) {
        (Ok(_), Some(read)) => Err(rlgrad_core::step::host_read_error(cuda.name(), read)),
        (result, _) => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_keep_their_bytes_at_word_boundaries() {
        let (a, b, c) = (7u64, -2i32, crate::device::Scalar::F32(1.5));
        let mut params = Params::of(&[&a, &b, &c]);
        assert_eq!(params.spans, [(0, 8), (1, 4), (2, 4)]);
        assert_eq!(params.words[0], 7);
        assert_eq!(params.words[1] as u32, (-2i32) as u32);
        assert_eq!(params.words[2] as u32, 1.5f32.to_bits());
        let pointers = params.pointers();
        // SAFETY: each pointer is to a word of `params`, alive here.
        let read = |k: usize| unsafe { *pointers[k].cast::<u32>() };
        assert_eq!((read(1), read(2)), ((-2i32) as u32, 1.5f32.to_bits()));
        assert_ne!(Params::of(&[&a, &b, &c]), Params::of(&[&a, &b, &-3i32]));
    }
}
