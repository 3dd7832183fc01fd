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
//! - **otherwise**, the second time the same work comes (the first runs eagerly: an
//!   optimizer's first step that creates its slots, a last short minibatch), the log is
//!   captured into a new CUDA graph (up to [`RECORDINGS`] per step, the least recently
//!   replayed dropped) and launched.
//!
//! A host read inside the step (a download, a synchronization) launches the work logged so
//! far, eagerly, and the rest of the step runs eagerly too; [`Step::run`] then returns the
//! error naming the read. A step that returns an error has its logged work launched
//! eagerly before the error is returned, so the device is where an eager run would have
//! left it.
//!
//! Buffers freed while a step is logged are held until its work is launched: a free is
//! ordered on the stream, and the logged kernels that use the buffer are launched after.
//! A device runs one step at a time, and its work comes from the thread that runs the step:
//! another thread's launch, copy or allocation on that device meanwhile is an error naming
//! the rule (it could read an upload that is only logged, or join a capture), not a wait
//! (which could deadlock on the locks it holds); so is another thread's step there. While a
//! step runs on a device, frees of that device's memory (from any thread) wait until the
//! step ends. A step that panics has its logged work launched as it unwinds; one whose
//! staging buffer cannot be had runs its work with its uploads copied directly.
//!
//! [`Step::run`]: rlgrad_core::Step::run

use std::collections::hash_map::DefaultHasher;
use std::ffi::c_void;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaGraph, CudaSlice, LaunchConfig};
use rlgrad_core::{Error, Result};

use crate::Cuda;
use crate::device::{CudaBuffer, KernelArg};

/// Recordings kept per step: enough for steps that alternate (TD3's delayed actor update)
/// or change shape now and then (the last minibatch of an epoch).
pub const RECORDINGS: usize = 4;

/// Staged upload offsets are multiples of this, so that the copies read aligned words.
const STAGE_ALIGN: usize = 16;

/// Work signatures remembered as seen once, per step.
const SEEN: usize = 8;

thread_local! {
    /// This thread's number for [`Cuda`]'s step owner (0: none).
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// Per device (by ordinal): how many steps run (0 or 1: one at a time) and the device
/// memory freed meanwhile, freed when its step ends. One lock for both, so that a step's
/// end cannot take a free that a later step's work still needs.
static DEFERRED: Mutex<Vec<(usize, Deferral)>> = Mutex::new(Vec::new());

/// Steps running on every device, changed with [`DEFERRED`] held: while none runs, a free
/// takes no lock. A free of memory that a running step's work uses comes after that step
/// began (the work's tensors were dropped after it), so it never reads 0 then.
static STEPS_RUNNING: AtomicUsize = AtomicUsize::new(0);

#[derive(Default)]
struct Deferral {
    running: usize,
    held: Vec<CudaSlice<u8>>,
}

fn deferred() -> MutexGuard<'static, Vec<(usize, Deferral)>> {
    DEFERRED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The deferral of device `ordinal` in `all`, made where there is none.
fn deferral_of(all: &mut Vec<(usize, Deferral)>, ordinal: usize) -> &mut Deferral {
    let index = match all.iter().position(|(o, _)| *o == ordinal) {
        Some(index) => index,
        None => {
            all.push((ordinal, Deferral::default()));
            all.len() - 1
        }
    };
    &mut all[index].1
}

fn this_thread() -> u64 {
    THREAD.with(|t| *t)
}

/// Frees `slice`, or, while a step runs on its device, keeps it until that step ends (see
/// the module documentation): a free is ordered on the stream, and the step's logged work
/// that uses the memory is launched later.
pub(crate) fn dispose(slice: CudaSlice<u8>) {
    if STEPS_RUNNING.load(Ordering::SeqCst) == 0 {
        return drop(slice);
    }
    let mut all = deferred();
    match all
        .iter_mut()
        .find(|(ordinal, _)| *ordinal == slice.ordinal())
    {
        Some((_, deferral)) if deferral.running > 0 => deferral.held.push(slice),
        _ => {
            drop(all);
            drop(slice);
        }
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
    /// What the launch does, up to its parameters' values.
    fn key(&self) -> LaunchKey {
        let c = &self.config;
        let [(a, b, d), (e, f, g)] = [c.grid_dim, c.block_dim];
        LaunchKey {
            kernel: self.kernel.cu_function() as usize,
            dims: [a, b, d, e, f, g, c.shared_mem_bytes],
            sizes: self.params.spans.iter().map(|s| s.1 as u32).collect(),
        }
    }
}

/// What a launch does up to its parameters' values: its kernel, grid and shared memory,
/// and its parameters' sizes. Two runs whose launches have equal keys, in order, do the
/// same work, and one's graph replays the other's with the parameters updated.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LaunchKey {
    kernel: usize,
    dims: [u32; 7],
    sizes: Vec<u32>,
}

/// What a run of a step does with its logged work ([`Planner::plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Replay recording `.0`.
    Replay(usize),
    /// Capture the work (seen once before), then [`Planner::insert`] it.
    Record,
    /// Run the work as it comes: seen for the first time.
    Eager,
}

/// A step's recordings (each with its device payload `G`: a CUDA graph) and the work seen
/// once, and how a run's work is planned: replayed where a recording did the same work,
/// recorded the second time it comes, eager the first time; at most [`RECORDINGS`]
/// recordings, the least recently run dropped first. Pure bookkeeping, tested without a
/// GPU.
#[derive(Debug)]
struct Planner<G> {
    recorded: Vec<Recorded<G>>,
    /// Hashes of work seen once and not recorded, the newest last (at most [`SEEN`]).
    seen: Vec<u64>,
    /// Runs planned so far.
    runs: u64,
}

#[derive(Debug)]
struct Recorded<G> {
    work: Vec<LaunchKey>,
    payload: G,
    /// The run that last planned it.
    last_run: u64,
}

impl<G> Default for Planner<G> {
    fn default() -> Self {
        Self {
            recorded: Vec::new(),
            seen: Vec::new(),
            runs: 0,
        }
    }
}

impl<G> Planner<G> {
    /// The plan for a run whose logged work is `work`.
    fn plan(&mut self, work: &[LaunchKey]) -> Plan {
        self.runs += 1;
        if let Some(index) = self.recorded.iter().position(|r| r.work == work) {
            self.recorded[index].last_run = self.runs;
            return Plan::Replay(index);
        }
        let mut hasher = DefaultHasher::new();
        work.hash(&mut hasher);
        let hash = hasher.finish();
        if let Some(k) = self.seen.iter().position(|&seen| seen == hash) {
            self.seen.remove(k);
            return Plan::Record;
        }
        if self.seen.len() == SEEN {
            self.seen.remove(0);
        }
        self.seen.push(hash);
        Plan::Eager
    }

    /// Keeps the recording of this run's `work`, dropping the least recently run one
    /// where [`RECORDINGS`] are kept.
    fn insert(&mut self, work: Vec<LaunchKey>, payload: G) {
        if self.recorded.len() == RECORDINGS {
            let oldest = (self.recorded.iter().enumerate())
                .min_by_key(|(_, r)| r.last_run)
                .map_or(0, |(k, _)| k);
            self.recorded.remove(oldest);
        }
        self.recorded.push(Recorded {
            work,
            payload,
            last_run: self.runs,
        });
    }

    /// Drops recording `index` (a replay of it failed).
    fn forget(&mut self, index: usize) {
        self.recorded.remove(index);
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
}

// SAFETY: the graph and its nodes are driver handles used only through `&mut` of the
// `Step` that owns them, one thread at a time, with the device's context bound by each
// call (cudarc's and `Cuda::bind`).
unsafe impl Send for Recording {}

/// What a GPU keeps of a [`rlgrad_core::Step`]: its recordings (CUDA graphs), its staging
/// buffer for uploads, and counts of what its runs did.
#[derive(Default)]
pub struct CudaRecordings {
    planner: Planner<Recording>,
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
    /// Runs whose work was launched eagerly: work seen for the first time, a host read,
    /// an error, or a refused capture.
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
        (self.planner.recorded.iter())
            .map(|r| r.payload.launches.len())
            .collect()
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
        if self.runs_step_here() {
            // Inside this thread's step on this device: the outer step logs the work.
            return step();
        }
        // One step at a time: another thread's step here is an error, as its other work
        // would be (waiting could deadlock on a thread this one waits for).
        let _one_step = match self.inner().step_lock.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(self.step_elsewhere_error("Step::run"));
            }
        };
        recordings.stats.runs += 1;
        // A refused step still owns the device while it runs, its work eager.
        let refused = recordings.refused.is_some();
        let mut running = Running::start(self, recordings.staging.take(), refused);
        let result = step();
        let mut log = running.stop();
        let launched = if result.is_ok() && !log.eager && !log.launches.is_empty() {
            self.launch_recorded(recordings, &mut log)
        } else {
            recordings.stats.eager += 1;
            self.flush(&mut log)
        };
        recordings.staging = log.staging.take();
        // Ends the run: its work is on the stream, so the frees held are ordered after it.
        drop(running);
        launched?;
        result
    }

    /// The running step's log, if any.
    pub(crate) fn log(&self) -> std::sync::MutexGuard<'_, Option<Log>> {
        self.inner().log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this thread runs a step on this device that logs its work (not running
    /// eagerly after a host read).
    fn logging(&self) -> bool {
        self.runs_step_here() && self.log().as_ref().is_some_and(|log| !log.eager)
    }

    /// Whether this thread runs a step on this device.
    fn runs_step_here(&self) -> bool {
        self.inner().step_thread.load(Ordering::Acquire) == this_thread()
    }

    /// `Ok` unless another thread runs a step on this device: then `function`'s work here
    /// is an error (see the module documentation).
    pub(crate) fn check_step_thread(&self, function: &'static str) -> Result<()> {
        match self.inner().step_thread.load(Ordering::Acquire) {
            0 => Ok(()),
            owner if owner == this_thread() => Ok(()),
            _ => Err(self.step_elsewhere_error(function)),
        }
    }

    /// `function`'s error where another thread runs a step on this device.
    fn step_elsewhere_error(&self, function: &'static str) -> Error {
        self.error(
            function,
            "another thread runs a training step (`Step::run`) on this device: while it \
             runs, the device's work comes from that thread only",
        )
    }

    /// Logs a launch where a step is logging; `false` where the launch is to run now.
    pub(crate) fn logged_launch(
        &self,
        function: &'static str,
        kernel: &CudaFunction,
        config: LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> bool {
        if !self.runs_step_here() {
            return false;
        }
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
        if !self.runs_step_here() {
            return Ok(());
        }
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
        flushed.inspect_err(|_| self.forget_uploads())
    }

    /// Launches `log`'s work eagerly, in order; where that fails, forgets what the device
    /// caches believe was uploaded.
    fn flush(&self, log: &mut Log) -> Result<()> {
        let staged = std::mem::take(&mut log.staged);
        self.run_log(log, &staged)
    }

    fn run_eagerly(
        &self,
        launches: &mut [Launch],
        staged: &[u8],
        staging: &mut Option<CudaBuffer<u8>>,
    ) -> Result<()> {
        if self.stage(launches, staged, staging).is_err() {
            return self.run_unstaged(launches, staged);
        }
        self.bind()?;
        for launch in launches.iter_mut() {
            self.count_launch();
            self.launch_logged(launch)?;
        }
        Ok(())
    }

    /// Runs `launches` in order with each staged upload copied straight from `staged` to
    /// its target instead of launching its copy kernel: where no staging buffer could be
    /// had.
    fn run_unstaged(&self, launches: &mut [Launch], staged: &[u8]) -> Result<()> {
        self.bind()?;
        for launch in launches.iter_mut() {
            let Some(at) = launch.staged_at else {
                self.count_launch();
                self.launch_logged(launch)?;
                continue;
            };
            // The copy's parameters: source (not patched), target, bytes.
            let word = |k: usize| launch.params.words[launch.params.spans[k].0];
            let (target, len) = (word(1), word(2) as usize);
            self.count_upload();
            // SAFETY: `len` bytes from `staged` (the step's host bytes, alive for the call;
            // the driver stages pageable memory before it returns) to the target buffer the
            // upload was logged for, alive on this device; the context is bound.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    target,
                    staged[at..at + len].as_ptr().cast(),
                    len,
                    self.inner().stream.cu_stream(),
                )
            }
            .result()
            .map_err(|e| self.driver_error(launch.function, e))?;
        }
        Ok(())
    }

    /// Launches one logged launch on the stream (captured where the stream captures), its
    /// parameters read from its words.
    fn launch_logged(&self, launch: &mut Launch) -> Result<()> {
        let mut pointers = launch.params.pointers();
        let (grid, block) = (launch.config.grid_dim, launch.config.block_dim);
        // SAFETY: the kernel with the grid and parameters that `Cuda::launch` checked and
        // logged, each parameter's bytes alive in `launch.params` for the call (the driver
        // copies them); the device's context is bound (`bind`) by the caller.
        unsafe {
            sys::cuLaunchKernel(
                launch.kernel.cu_function(),
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                launch.config.shared_mem_bytes,
                self.inner().stream.cu_stream(),
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| self.driver_error(launch.function, e))
    }

    /// Forgets the index lists and sequence layouts the device keeps (`copy.rs`,
    /// `sequence.rs`): after a failed launch of a step's work, their uploads may not have
    /// run.
    fn forget_uploads(&self) {
        *self.index_cache() = Default::default();
        *self.sequence_cache() = Default::default();
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
            // Dropped, the old buffer's free is ordered after the graphs that read it. The new
            // one is not the cache's: the cache may hold buffers that the step's work, not yet
            // launched, uses, and the staged bytes are written now.
            *staging = Some(self.fresh("Step::run", staged.len().next_power_of_two())?);
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

    /// Replays the recording whose work is `log`'s, records work seen before, or runs
    /// work seen for the first time eagerly.
    fn launch_recorded(&self, recordings: &mut CudaRecordings, log: &mut Log) -> Result<()> {
        let staged = std::mem::take(&mut log.staged);
        if self
            .stage(&mut log.launches, &staged, &mut log.staging)
            .is_err()
        {
            // No staging buffer (memory): the work still runs, its uploads copied directly.
            recordings.stats.eager += 1;
            return self
                .run_unstaged(&mut log.launches, &staged)
                .inspect_err(|_| self.forget_uploads());
        }
        let work: Vec<LaunchKey> = log.launches.iter().map(Launch::key).collect();
        match recordings.planner.plan(&work) {
            Plan::Replay(index) => {
                let recording = &mut recordings.planner.recorded[index].payload;
                let replayed = self
                    .update_nodes(recording, &log.launches)
                    .and_then(|updated| self.launch_graph(&recording.graph).map(|()| updated));
                match replayed {
                    Ok(updated) => {
                        recordings.stats.node_updates += updated;
                        recordings.stats.replayed += 1;
                        Ok(())
                    }
                    Err(_) => {
                        // Dropped: its nodes may hold some of this run's parameters only.
                        recordings.planner.forget(index);
                        recordings.stats.eager += 1;
                        self.run_log(log, &[])
                    }
                }
            }
            Plan::Eager => {
                recordings.stats.eager += 1;
                self.run_log(log, &[])
            }
            Plan::Record => {
                // An error the driver kept from earlier work is not the capture's: it
                // fails the run, not the step's recordings.
                self.bind().inspect_err(|_| self.forget_uploads())?;
                let recording = match self.record(&mut log.launches) {
                    Ok(recording) => recording,
                    Err(why) => {
                        recordings.refused = Some(why.to_string());
                        recordings.stats.eager += 1;
                        return self.run_log(log, &[]);
                    }
                };
                if self.launch_graph(&recording.graph).is_err() {
                    recordings.stats.eager += 1;
                    return self.run_log(log, &[]);
                }
                recordings.stats.recorded += 1;
                recordings.planner.insert(work, recording);
                Ok(())
            }
        }
    }

    /// Runs `log`'s work eagerly, uploading `staged` first (empty where its bytes are
    /// already uploaded and patched in); where that fails, forgets what the device caches
    /// believe was uploaded.
    fn run_log(&self, log: &mut Log, staged: &[u8]) -> Result<()> {
        self.run_eagerly(&mut log.launches, staged, &mut log.staging)
            .inspect_err(|_| self.forget_uploads())
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
            let mut params = launch.params.clone();
            let mut pointers = params.pointers();
            let config = recorded.config;
            let node_params = sys::CUDA_KERNEL_NODE_PARAMS {
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
                    &node_params,
                )
            }
            .result()
            .map_err(|e| self.driver_error("Step::run", e))?;
            // Only once the node holds them.
            recorded.params = params;
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
        })
    }

    /// Launches `launches` into the capturing stream; each one's graph node.
    fn capture_launches(&self, launches: &mut [Launch]) -> Result<Vec<sys::CUgraphNode>> {
        let stream = &self.inner().stream;
        let mut nodes = Vec::with_capacity(launches.len());
        self.bind()?;
        for launch in launches.iter_mut() {
            self.launch_logged(launch)?;
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
            if status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
                return Err(self.error(
                    "Step::run",
                    format_args!("the capture stopped ({status:?}) at {}", launch.function),
                ));
            }
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
        graph
            .launch()
            .map_err(|e| self.driver_error("Step::run", e))?;
        self.count_graph_launch();
        Ok(())
    }
}

/// A step's run on its device: the device's step owner, the log, and the thread's held
/// frees, set up at its start and undone at its end, or as a panic unwinds through it
/// (the logged work is launched then, as far as it can be).
struct Running<'a> {
    cuda: &'a Cuda,
}

impl<'a> Running<'a> {
    /// A run that logs, or with `eager` one whose work runs as it comes (a refused step).
    fn start(cuda: &'a Cuda, staging: Option<CudaBuffer<u8>>, eager: bool) -> Self {
        cuda.inner()
            .step_thread
            .store(this_thread(), Ordering::Release);
        *cuda.log() = Some(Log {
            staging,
            eager,
            ..Log::default()
        });
        let mut all = deferred();
        deferral_of(&mut all, cuda.ordinal()).running += 1;
        STEPS_RUNNING.fetch_add(1, Ordering::SeqCst);
        drop(all);
        Self { cuda }
    }

    /// The run's log, taken: from here the device's work runs as it comes.
    fn stop(&mut self) -> Log {
        self.cuda.log().take().unwrap_or_default()
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let unfinished = self.cuda.log().take();
        if let Some(mut log) = unfinished {
            // Unwinding from a panic in the step: what it logged runs, as it would have.
            let _ = self.cuda.flush(&mut log);
        }
        let freed = {
            let mut all = deferred();
            let deferral = deferral_of(&mut all, self.cuda.ordinal());
            deferral.running -= 1;
            STEPS_RUNNING.fetch_sub(1, Ordering::SeqCst);
            if deferral.running == 0 {
                std::mem::take(&mut deferral.held)
            } else {
                Vec::new()
            }
        };
        // Freed outside the lock, after the step's work is on the stream.
        drop(freed);
        self.cuda.inner().step_thread.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The work of a run: `launches` launches of kernel `kernel`.
    fn work(kernel: usize, launches: usize) -> Vec<LaunchKey> {
        (0..launches)
            .map(|k| LaunchKey {
                kernel,
                dims: [k as u32, 1, 1, 256, 1, 1, 0],
                sizes: vec![8, 8, 4],
            })
            .collect()
    }

    /// Plans `runs` in turn, inserting every recording the plans ask for; the plans.
    fn plans(planner: &mut Planner<()>, runs: &[Vec<LaunchKey>]) -> Vec<Plan> {
        runs.iter()
            .map(|work| {
                let plan = planner.plan(work);
                if plan == Plan::Record {
                    planner.insert(work.clone(), ());
                }
                plan
            })
            .collect()
    }

    /// The GPU tests' runs: a first step unlike the rest (an optimizer creating its slots),
    /// then steady work: eager, eager (seen once), recorded, replayed from then on; with
    /// two kinds of work alternating, each recorded on its second sight and each replay
    /// taking its own recording.
    #[test]
    fn work_is_eager_at_first_sight_recorded_at_the_second_and_replayed_after() {
        use Plan::{Eager, Record, Replay};
        let (first, steady) = (work(1, 12), work(1, 10));
        let runs = [
            first.clone(),
            steady.clone(),
            steady.clone(),
            steady.clone(),
        ];
        assert_eq!(
            plans(&mut Planner::default(), &runs),
            [Eager, Eager, Record, Replay(0)]
        );
        let (a, b) = (work(2, 10), work(3, 10));
        let mut runs = vec![first];
        for _ in 0..9 {
            runs.push(if runs.len() % 2 == 0 {
                a.clone()
            } else {
                b.clone()
            });
        }
        let planned = plans(&mut Planner::default(), &runs);
        let count = |f: fn(&Plan) -> bool| planned.iter().filter(|p| f(p)).count();
        assert_eq!(
            (
                count(|p| *p == Record),
                count(|p| matches!(p, Replay(_))),
                count(|p| *p == Eager)
            ),
            (2, 5, 3),
            "{planned:?}"
        );
        assert_eq!(
            &planned[5..],
            [Replay(0), Replay(1), Replay(0), Replay(1), Replay(0)]
        );
        // A launch's grid or a parameter's size makes other work; its values do not count.
        let mut wider = work(2, 10);
        wider[3].dims[0] = 99;
        let mut planner = Planner::default();
        plans(&mut planner, &[a.clone(), a.clone()]);
        assert_eq!(planner.plan(&wider), Eager);
        assert_eq!(planner.plan(&a), Replay(0));
    }

    /// At most `RECORDINGS` recordings, the least recently run dropped; a forgotten one is
    /// recorded again from its next second sight; at most `SEEN` kinds of work are
    /// remembered as seen once, the oldest forgotten.
    #[test]
    fn the_least_recently_run_recording_goes_first_and_seen_work_is_bounded() {
        use Plan::{Eager, Record, Replay};
        let mut planner = Planner::default();
        let kinds: Vec<Vec<LaunchKey>> = (0..=RECORDINGS).map(|k| work(10 + k, 3)).collect();
        for kind in &kinds[..RECORDINGS] {
            assert_eq!(
                plans(&mut planner, &[kind.clone(), kind.clone()]),
                [Eager, Record]
            );
        }
        // The first is run again, so the second is now the least recently run.
        assert_eq!(planner.plan(&kinds[0]), Replay(0));
        plans(
            &mut planner,
            &[kinds[RECORDINGS].clone(), kinds[RECORDINGS].clone()],
        );
        assert_eq!(planner.recorded.len(), RECORDINGS);
        assert!(planner.recorded.iter().all(|r| r.work != kinds[1]));
        assert!(matches!(planner.plan(&kinds[0]), Replay(_)));
        assert_eq!(
            plans(&mut planner, &[kinds[1].clone(), kinds[1].clone()]),
            [Eager, Record]
        );
        let index = planner
            .recorded
            .iter()
            .position(|r| r.work == kinds[1])
            .unwrap();
        planner.forget(index);
        assert_eq!(planner.plan(&kinds[1]), Eager);
        let mut planner = Planner::<()>::default();
        for k in 0..=SEEN {
            assert_eq!(planner.plan(&work(100 + k, 1)), Eager);
        }
        assert_eq!(
            planner.plan(&work(100, 1)),
            Eager,
            "the oldest was forgotten"
        );
        assert_eq!(planner.plan(&work(100 + SEEN, 1)), Record);
    }

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
