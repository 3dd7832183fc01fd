//! The `Nccl` backend: one rank per GPU on NVIDIA's NCCL, through cudarc.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError};
use cudarc::nccl::result::{self as calls, NcclError, NcclStatus};
use cudarc::nccl::{Id, sys};
use rlgrad_core::{Error, Result};

use crate::collective::{Collective, check_all_to_all, check_root, check_timeout};

/// A rank of an NCCL communicator (feature `nccl`): one GPU per rank, ranks as threads of
/// one process ([`Nccl::local`]) or as processes joined by an [`NcclId`] ([`Nccl::join`],
/// or `Nccl::from_mpi` under `mpirun` with feature `mpi` too).
///
/// Messages are bytes staged through the rank's GPU: copied to device memory, moved by
/// `ncclAllGather`, grouped `ncclSend`/`ncclRecv`, `ncclBroadcast` and (for the barrier)
/// `ncclAllReduce` of one byte, and copied back, each preceded by an exchange of the
/// lengths. NCCL adds no floats here, so the results are those of every other backend:
/// the same bits for any world size, on any mix of backends. The GPU only carries the
/// bytes (NVLink and InfiniBand where NCCL finds them); the reduction tree runs where the
/// gradients are.
///
/// **Timeout.** The communicator runs in NCCL's non-blocking mode, and every wait (for the
/// other ranks to join, for a collective to be enqueued and to finish on the GPU) polls
/// NCCL's asynchronous error and gives up after [`Nccl::timeout`] ([`Nccl::DEFAULT_TIMEOUT`]
/// unless a `*_with_timeout` constructor sets another; `Nccl::from_mpi` takes the `Mpi`'s).
/// A rank that dies or stalls then makes the others fail with an error naming the step,
/// the timeout and their own rank (NCCL does not say which rank is missing); a peer
/// failure NCCL detects itself (over a network transport, a closed connection) may fail
/// sooner, with NCCL's reason. Either way the communicator is aborted (`ncclCommAbort`,
/// which also stops its kernels) and every later call is an error. Tested on one GPU
/// through the join (a rank that never joins); a collective stalled by a missing peer
/// needs two GPUs and has not run.
///
/// `Nccl` is `Send` but not `Sync`: a communicator may move to another thread, but NCCL
/// forbids two threads calling it at once.
///
/// The library is loaded at run time: `libnccl.so.2` from the `nvidia-nccl-cu13` wheel
/// (PyTorch's CUDA 13 builds depend on it) or a system NCCL, on `LD_LIBRARY_PATH`.
///
/// ```no_run
/// use rlgrad_dist::{Collective, Nccl};
/// // Two ranks on GPUs 0 and 1, as two threads of this process.
/// let ranks = Nccl::local(&[0, 1])?;
/// let gathered = std::thread::scope(|scope| {
///     let handles: Vec<_> = ranks
///         .into_iter()
///         .map(|comm| scope.spawn(move || comm.all_gather(&[comm.rank() as u8])))
///         .collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect::<Result<Vec<_>, _>>()
/// })?;
/// assert_eq!(gathered[1], vec![vec![0u8], vec![1u8]]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Nccl {
    /// The communicator; null once aborted.
    comm: Cell<sys::ncclComm_t>,
    rank: usize,
    size: usize,
    stream: Arc<CudaStream>,
    device: usize,
    timeout: Duration,
    /// The step whose failure aborted the communicator.
    aborted_at: Cell<Option<&'static str>>,
}

// SAFETY: an NCCL communicator and its stream are handles that any thread may use, one
// thread at a time (NCCL's rule; the CUDA context is made current on the calling thread
// before every call). `Nccl` is not `Sync`, so no two threads can call it at once.
unsafe impl Send for Nccl {}

impl Drop for Nccl {
    fn drop(&mut self) {
        let comm = self.comm.replace(std::ptr::null_mut());
        if !comm.is_null() {
            // Abort rather than finalize: finalizing waits for the other ranks, which may
            // be gone. SAFETY: the handle is live and dropped once (null from now on).
            let _ = unsafe { calls::comm_abort(comm) };
        }
    }
}

impl fmt::Debug for Nccl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nccl")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("device", &self.device)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The identifier that joins the ranks of one NCCL communicator: made once, by one rank
/// ([`NcclId::new`]), and handed to every other rank out of band (an MPI broadcast, a
/// file, an environment variable: [`NcclId::to_hex`] and [`NcclId::from_hex`]).
#[derive(Clone, Copy)]
pub struct NcclId(Id);

impl fmt::Debug for NcclId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("NcclId").field(&self.to_hex()).finish()
    }
}

/// The 128 bytes of an NCCL unique id.
const ID_BYTES: usize = 128;

impl NcclId {
    /// A fresh identifier (it names this host's network address for the bootstrap). An
    /// error when the NCCL library cannot be loaded.
    pub fn new() -> Result<NcclId> {
        library("NcclId::new")?;
        Id::new()
            .map(NcclId)
            .map_err(|e| nccl_error("NcclId::new", "nccl".to_owned(), e))
    }

    /// The identifier as 256 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The identifier [`NcclId::to_hex`] wrote; an error for any other text.
    pub fn from_hex(text: &str) -> Result<NcclId> {
        let digits = text.trim();
        let invalid = || {
            Error::value(
                "NcclId::from_hex",
                "text",
                format_args!("{} hex digits", 2 * ID_BYTES),
                format_args!("{} characters", digits.len()),
            )
        };
        if digits.len() != 2 * ID_BYTES || !digits.is_ascii() {
            return Err(invalid());
        }
        let mut bytes = [0u8; ID_BYTES];
        for (byte, pair) in bytes.iter_mut().zip(digits.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| invalid())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| invalid())?;
        }
        Ok(Self::from_bytes(bytes))
    }

    fn bytes(&self) -> [u8; ID_BYTES] {
        self.0.internal().map(|c| c.to_ne_bytes()[0])
    }

    fn from_bytes(bytes: [u8; ID_BYTES]) -> NcclId {
        NcclId(Id::uninit(
            bytes.map(|b| std::ffi::c_char::from_ne_bytes([b])),
        ))
    }
}

/// An error unless the CUDA driver and NCCL libraries can be loaded (cudarc panics on
/// first use of a missing one).
fn library(function: &'static str) -> Result<()> {
    // SAFETY: only tries to open the libraries by their candidate names.
    let (driver, nccl) = unsafe {
        (
            cudarc::driver::sys::is_culib_present(),
            cudarc::nccl::sys::is_culib_present(),
        )
    };
    let missing = match (driver, nccl) {
        (true, true) => return Ok(()),
        (false, _) => "the CUDA driver library (libcuda.so.1, from the NVIDIA driver)",
        (true, false) => {
            "the NCCL library (libnccl.so.2: `pip install nvidia-nccl-cu13` and put its \
             nvidia/nccl/lib on LD_LIBRARY_PATH, or a system NCCL)"
        }
    };
    Err(Error::Device {
        function,
        device: "nccl".to_owned(),
        message: format!("cannot load {missing}"),
        cause: None,
    })
}

/// NCCL's result code, its text, and NCCL's description of the last failure (which names
/// the cause: "Duplicate GPU detected", a peer that cannot be reached).
fn nccl_error(function: &'static str, device: String, e: NcclError) -> Error {
    let text = |chars: *const std::ffi::c_char| {
        if chars.is_null() {
            String::new()
        } else {
            // SAFETY: NCCL returns NUL-terminated strings it owns, valid until its next call
            // on this thread; copied at once.
            unsafe { std::ffi::CStr::from_ptr(chars) }
                .to_string_lossy()
                .trim()
                .to_owned()
        }
    };
    // SAFETY: the library is loadable (every caller checked with `library` first);
    // both functions only read NCCL's error state (a null communicator: the last error of
    // any).
    let (what, last) = unsafe {
        (
            text(cudarc::nccl::sys::ncclGetErrorString(e.0)),
            text(cudarc::nccl::sys::ncclGetLastError(std::ptr::null_mut())),
        )
    };
    let last = if last.is_empty() {
        String::new()
    } else {
        format!(": {last}")
    };
    Error::Device {
        function,
        device,
        message: format!("NCCL failed with {:?} ({what}){last}", e.0),
        cause: None,
    }
}

fn driver_error(function: &'static str, device: String, e: DriverError) -> Error {
    Error::Device {
        function,
        device,
        message: format!("CUDA failed: {e}"),
        cause: Some(rlgrad_core::Cause::new(e)),
    }
}

/// A stream on GPU `device`, or the error that says why there is none.
fn stream_on(function: &'static str, device: usize) -> Result<Arc<CudaStream>> {
    let context = CudaContext::new(device)
        .map_err(|e| driver_error(function, format!("cuda:{device}"), e))?;
    context
        .new_stream()
        .map_err(|e| driver_error(function, format!("cuda:{device}"), e))
}

/// How long a wait polls NCCL without pause, and then how long it sleeps between polls.
const POLL_SPIN: Duration = Duration::from_millis(1);
const POLL_SLEEP: Duration = Duration::from_micros(100);

/// NCCL's `NCCL_CONFIG_INITIALIZER` with `blocking = 0`: NCCL calls return at once
/// (`ncclInProgress`) and the caller polls, so that every wait can have a deadline. The
/// other fields are "undefined", NCCL's defaults.
fn non_blocking_config() -> sys::ncclConfig_t {
    const UNDEFINED: std::ffi::c_int = std::ffi::c_int::MIN;
    sys::ncclConfig_t {
        size: std::mem::size_of::<sys::ncclConfig_t>(),
        magic: 0xcafe_beef,
        // NCCL_VERSION(2, 30, 0), the headers cudarc's `nccl` feature binds: an older NCCL
        // reads the prefix it knows (it copies at most its own `size` of bytes), and the
        // fields it does not know keep NCCL's defaults anyway. It must stay below 2.30.5:
        // from that version on, NCCL reads one more field, which this struct does not have
        // (its bytes would be the struct's tail padding, not a defined value).
        version: 23000,
        blocking: 0,
        cgaClusterSize: UNDEFINED,
        minCTAs: UNDEFINED,
        maxCTAs: UNDEFINED,
        netName: std::ptr::null(),
        splitShare: UNDEFINED,
        trafficClass: UNDEFINED,
        commName: std::ptr::null(),
        collnetEnable: UNDEFINED,
        CTAPolicy: UNDEFINED,
        shrinkShare: UNDEFINED,
        nvlsCTAs: UNDEFINED,
        nChannelsPerNetPeer: UNDEFINED,
        nvlinkCentricSched: UNDEFINED,
        graphUsageMode: UNDEFINED,
        numRmaCtx: UNDEFINED,
        maxP2pPeers: UNDEFINED,
    }
}

impl Nccl {
    /// How long [`Nccl::local`], [`Nccl::join`] and their collectives wait for the other
    /// ranks: ten minutes, above the time a rank spends between two collectives in
    /// training (an evaluation, a checkpoint). The same as `Mpi::DEFAULT_TIMEOUT`.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

    /// One rank per entry of `devices` (GPU ordinals; rank `r` on `devices[r]`), for
    /// workers as threads of this process: move each into its thread. Collectives wait at
    /// most [`Nccl::DEFAULT_TIMEOUT`]. An error when the libraries cannot be loaded, a GPU
    /// cannot be opened, or NCCL refuses the list (NCCL allows one rank per GPU in a
    /// communicator).
    pub fn local(devices: &[usize]) -> Result<Vec<Nccl>> {
        Self::local_with_timeout(devices, Self::DEFAULT_TIMEOUT)
    }

    /// [`Nccl::local`] whose waits give up after `timeout` (a zero one is an error).
    pub fn local_with_timeout(devices: &[usize], timeout: Duration) -> Result<Vec<Nccl>> {
        let function = "Nccl::local";
        check_timeout(function, timeout)?;
        if devices.is_empty() {
            return Err(Error::empty(
                function,
                "devices",
                "at least one GPU ordinal",
            ));
        }
        library(function)?;
        let streams = devices
            .iter()
            .map(|&device| stream_on(function, device))
            .collect::<Result<Vec<_>>>()?;
        let id = NcclId::new()?;
        let size = devices.len();
        let mut ranks = Vec::with_capacity(size);
        // One thread starts every rank's initialization inside a group (NCCL's way for
        // several GPUs of one thread); each then completes on its own.
        calls::group_start().map_err(|e| nccl_error(function, format!("GPUs {devices:?}"), e))?;
        let mut started = Ok(());
        for (rank, (stream, &device)) in streams.into_iter().zip(devices).enumerate() {
            let nccl = Nccl::unjoined(rank, size, stream, device, timeout);
            started = started.and_then(|()| nccl.start_init(function, &id));
            ranks.push(nccl);
        }
        let ended = calls::group_end().map(drop);
        started?;
        ended.map_err(|e| nccl_error(function, format!("GPUs {devices:?}"), e))?;
        let start = Instant::now();
        for nccl in &ranks {
            nccl.poll(function, "initialization", start, || Ok(true))?;
        }
        Ok(ranks)
    }

    /// Rank `rank` of `size` on GPU `device`, joining the communicator that `id` names
    /// (`ncclCommInitRankConfig`): every rank calls it with the same `id` and `size`, and
    /// it returns once all have, or fails after [`Nccl::DEFAULT_TIMEOUT`]. An error for
    /// `rank >= size`, or when the libraries, the GPU or NCCL fail.
    pub fn join(device: usize, rank: usize, size: usize, id: &NcclId) -> Result<Nccl> {
        Self::join_with_timeout(device, rank, size, id, Self::DEFAULT_TIMEOUT)
    }

    /// [`Nccl::join`] whose waits (for the other ranks to join, and in every collective)
    /// give up after `timeout` (a zero one is an error).
    pub fn join_with_timeout(
        device: usize,
        rank: usize,
        size: usize,
        id: &NcclId,
        timeout: Duration,
    ) -> Result<Nccl> {
        let function = "Nccl::join";
        check_timeout(function, timeout)?;
        if rank >= size {
            return Err(Error::out_of_range(
                function,
                "rank",
                format_args!("a rank below size ({size})"),
                rank,
            ));
        }
        library(function)?;
        let nccl = Nccl::unjoined(rank, size, stream_on(function, device)?, device, timeout);
        nccl.start_init(function, id)?;
        nccl.poll(function, "initialization", Instant::now(), || Ok(true))?;
        Ok(nccl)
    }

    /// The MPI job's ranks on NCCL: rank 0 makes the [`NcclId`] and broadcasts it over
    /// `mpi`, and every rank joins with its MPI rank and size, on GPU `device` (usually
    /// the rank's index on its node modulo the node's GPU count), with the timeout of
    /// `mpi` ([`crate::Mpi::timeout`]). Feature `mpi` too.
    #[cfg(feature = "mpi")]
    pub fn from_mpi(mpi: &crate::Mpi, device: usize) -> Result<Nccl> {
        let mut id = if mpi.rank() == 0 {
            NcclId::new()?.bytes().to_vec()
        } else {
            Vec::new()
        };
        mpi.broadcast(0, &mut id)?;
        let bytes: [u8; ID_BYTES] = id.try_into().map_err(|got: Vec<u8>| {
            Error::shape(
                "Nccl::from_mpi",
                "id",
                format_args!("{ID_BYTES} bytes from rank 0"),
                got.len(),
            )
        })?;
        Nccl::join_with_timeout(
            device,
            mpi.rank(),
            mpi.size(),
            &NcclId::from_bytes(bytes),
            mpi.timeout(),
        )
    }

    /// The GPU this rank runs on.
    pub fn device(&self) -> usize {
        self.device
    }

    /// How long each wait for the other ranks may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A rank whose communicator is not made yet ([`Nccl::start_init`] makes it).
    fn unjoined(
        rank: usize,
        size: usize,
        stream: Arc<CudaStream>,
        device: usize,
        timeout: Duration,
    ) -> Nccl {
        Nccl {
            comm: Cell::new(std::ptr::null_mut()),
            rank,
            size,
            stream,
            device,
            timeout,
            aborted_at: Cell::new(None),
        }
    }

    /// Starts making this rank's communicator (non-blocking: [`Nccl::poll`] completes it).
    fn start_init(&self, function: &'static str, id: &NcclId) -> Result<()> {
        self.bind(function)?;
        let (Ok(size), Ok(rank)) = (i32::try_from(self.size), i32::try_from(self.rank)) else {
            return Err(Error::out_of_range(
                function,
                "size",
                "at most 2^31 - 1 ranks",
                self.size,
            ));
        };
        let mut comm = std::ptr::null_mut();
        let mut config = non_blocking_config();
        let id = sys::ncclUniqueId {
            internal: *id.0.internal(),
        };
        // SAFETY: `comm` and `config` outlive the call; NCCL copies the config and writes
        // the handle (null when it fails at once).
        let started =
            unsafe { calls::comm_init_rank_config(&mut comm, size, id, rank, &mut config) };
        self.comm.set(comm);
        // Not aborted here: inside `local`'s group an abort would make the group's end
        // block on the other ranks' initialization. Dropping the rank aborts it.
        started
            .map(drop)
            .map_err(|e| nccl_error(function, self.name(), e))
    }

    fn name(&self) -> String {
        format!(
            "nccl rank {} of {} on cuda:{}",
            self.rank, self.size, self.device
        )
    }

    /// Makes this rank's CUDA context current on the calling thread: NCCL launches on
    /// the current context.
    fn bind(&self, function: &'static str) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver_error(function, self.name(), e))
    }

    /// The live communicator, or the error that says which failure aborted it.
    fn live(&self, function: &'static str) -> Result<sys::ncclComm_t> {
        match self.aborted_at.get() {
            None => Ok(self.comm.get()),
            Some(step) => Err(Error::Device {
                function,
                device: self.name(),
                message: format!(
                    "the communicator was aborted when an earlier {step} failed; make a new one"
                ),
                cause: None,
            }),
        }
    }

    /// Aborts the communicator after a failure in `step` (NCCL's rule: a communicator
    /// with an error, or one abandoned in the middle of a collective, is aborted).
    fn abort(&self, step: &'static str) {
        let comm = self.comm.replace(std::ptr::null_mut());
        self.aborted_at.set(Some(step));
        if !comm.is_null() {
            // SAFETY: the handle is live and aborted once (null from now on); aborting
            // also stops the kernels still waiting for a peer.
            let _ = unsafe { calls::comm_abort(comm) };
        }
    }

    /// NCCL's error `e` in `step`, after aborting the communicator.
    fn fail(&self, function: &'static str, step: &'static str, e: NcclError) -> Error {
        let error = nccl_error(function, self.name(), e);
        self.abort(step);
        error
    }

    /// Polls NCCL's asynchronous state until NCCL has finished the calls made (the
    /// initialization, or enqueueing a collective) and `ready` says the rest is done, or
    /// until `timeout` has passed since `start`: then the communicator is aborted.
    fn poll(
        &self,
        function: &'static str,
        step: &'static str,
        start: Instant,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        let comm = self.live(function)?;
        loop {
            let mut state = sys::ncclResult_t::ncclSuccess;
            // SAFETY: `comm` is live; NCCL writes the state.
            let queried = unsafe { sys::ncclCommGetAsyncError(comm, &mut state) }.result();
            match queried.and_then(|_| state.result()) {
                Err(e) => return Err(self.fail(function, step, e)),
                Ok(NcclStatus::InProgress) => {}
                Ok(_) => {
                    if ready()? {
                        return Ok(());
                    }
                }
            }
            if start.elapsed() >= self.timeout {
                self.abort(step);
                return Err(Error::Device {
                    function,
                    device: self.name(),
                    message: format!(
                        "the {step} did not complete within the timeout of {:?}: a rank is \
                         dead, stalled, or not taking part (NCCL does not say which); the \
                         communicator is aborted",
                        self.timeout
                    ),
                    cause: None,
                });
            }
            // NCCL's proxy thread and the GPU make the progress, not this loop: after a
            // millisecond it sleeps, so that a rank waiting long (for a peer's evaluation)
            // does not keep a core busy.
            if start.elapsed() < POLL_SPIN {
                std::thread::yield_now();
            } else {
                std::thread::sleep(POLL_SLEEP);
            }
        }
    }

    /// Runs `enqueue` (NCCL calls on this rank's communicator and stream), then waits,
    /// within the timeout, until NCCL has enqueued them and the GPU has run them.
    fn collective(
        &self,
        function: &'static str,
        step: &'static str,
        enqueue: impl FnOnce(
            sys::ncclComm_t,
            sys::cudaStream_t,
        ) -> std::result::Result<NcclStatus, NcclError>,
    ) -> Result<()> {
        let comm = self.live(function)?;
        self.bind(function)?;
        let start = Instant::now();
        enqueue(comm, self.stream.cu_stream() as sys::cudaStream_t)
            .map_err(|e| self.fail(function, step, e))?;
        let finished = self
            .poll(function, step, start, || Ok(true))
            .and_then(|()| {
                let done = self
                    .stream
                    .record_event(None)
                    .map_err(|e| driver_error(function, self.name(), e))?;
                self.poll(function, step, start, || {
                    done.try_is_complete()
                        .map_err(|e| driver_error(function, self.name(), e))
                })
            });
        if finished.is_err() {
            // Whatever failed (NCCL, the timeout, CUDA's event), the collective may still
            // be in flight: only an abort makes the communicator's state known.
            self.abort(step);
        }
        finished
    }

    /// `bytes` in device memory, at least one byte long (NCCL and cudarc are simplest
    /// without empty buffers; the exchanged lengths say what is real).
    fn stage(&self, function: &'static str, bytes: &[u8], len: usize) -> Result<CudaSlice<u8>> {
        let mut padded = bytes.to_vec();
        padded.resize(len.max(1), 0);
        self.stream
            .clone_htod(&padded)
            .map_err(|e| driver_error(function, self.name(), e))
    }

    /// `len` (at least one) zeroed bytes of device memory.
    fn zeroed(&self, function: &'static str, len: usize) -> Result<CudaSlice<u8>> {
        self.stream
            .alloc_zeros::<u8>(len.max(1))
            .map_err(|e| driver_error(function, self.name(), e))
    }

    /// A device buffer's bytes on the host, once the stream has finished with it.
    fn fetch(&self, function: &'static str, buffer: &CudaSlice<u8>) -> Result<Vec<u8>> {
        let bytes = self
            .stream
            .clone_dtoh(buffer)
            .map_err(|e| driver_error(function, self.name(), e))?;
        self.stream
            .synchronize()
            .map_err(|e| driver_error(function, self.name(), e))?;
        Ok(bytes)
    }

    /// `ncclAllGather` of `send` (every rank the same length) into `receive`.
    fn all_gather_device(
        &self,
        function: &'static str,
        send: &CudaSlice<u8>,
        receive: &mut CudaSlice<u8>,
    ) -> Result<()> {
        let (from, _read) = send.device_ptr(&self.stream);
        let (to, _written) = receive.device_ptr_mut(&self.stream);
        let count = send.len();
        // SAFETY: both buffers live on this rank's stream until the collective completes
        // (`collective` waits); `receive` holds `count` bytes per rank.
        self.collective(function, "all-gather", |comm, stream| unsafe {
            calls::all_gather(
                from as _,
                to as _,
                count,
                sys::ncclDataType_t::ncclUint8,
                comm,
                stream,
            )
        })
    }

    /// `ncclBroadcast` of `buffer` from `root`, in place.
    fn broadcast_device(
        &self,
        function: &'static str,
        root: usize,
        buffer: &mut CudaSlice<u8>,
    ) -> Result<()> {
        let count = buffer.len();
        let (pointer, _written) = buffer.device_ptr_mut(&self.stream);
        // SAFETY: as in `all_gather_device`; the root is below the size (checked).
        self.collective(function, "broadcast", |comm, stream| unsafe {
            calls::broadcast(
                pointer as _,
                pointer as _,
                count,
                sys::ncclDataType_t::ncclUint8,
                root as i32,
                comm,
                stream,
            )
        })
    }

    /// Every rank's `values`, indexed by rank (all ranks pass the same count).
    fn gather_lengths(&self, function: &'static str, values: &[u64]) -> Result<Vec<u64>> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let send = self.stage(function, &bytes, bytes.len())?;
        let mut receive = self.zeroed(function, bytes.len().max(1) * self.size)?;
        self.all_gather_device(function, &send, &mut receive)?;
        Ok(self
            .fetch(function, &receive)?
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect())
    }

    fn usize_of(&self, function: &'static str, len: u64) -> Result<usize> {
        usize::try_from(len).map_err(|_| Error::Device {
            function,
            device: self.name(),
            message: format!("a peer sends {len} bytes, more than this process can hold"),
            cause: None,
        })
    }
}

impl Collective for Nccl {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_gather(&self, send: &[u8]) -> Result<Vec<Vec<u8>>> {
        let function = "Nccl::all_gather";
        self.live(function)?;
        let lengths = self.gather_lengths(function, &[send.len() as u64])?;
        let block = self.usize_of(function, lengths.iter().copied().max().unwrap_or(0))?;
        let block = block.max(1);
        let staged = self.stage(function, send, block)?;
        let mut receive = self.zeroed(function, block * self.size)?;
        self.all_gather_device(function, &staged, &mut receive)?;
        let all = self.fetch(function, &receive)?;
        all.chunks_exact(block)
            .zip(lengths)
            .map(|(chunk, len)| Ok(chunk[..self.usize_of(function, len)?].to_vec()))
            .collect()
    }

    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let function = "Nccl::all_to_all";
        check_all_to_all(function, "send", send.len(), self.size)?;
        self.live(function)?;
        let size = self.size;
        let mine: Vec<u64> = send.iter().map(|m| m.len() as u64).collect();
        // Row r: what rank r sends to each rank.
        let matrix = self.gather_lengths(function, &mine)?;
        let incoming = (0..size)
            .map(|source| self.usize_of(function, matrix[source * size + self.rank]))
            .collect::<Result<Vec<_>>>()?;
        let staged = send
            .iter()
            .map(|m| self.stage(function, m, m.len()))
            .collect::<Result<Vec<_>>>()?;
        let mut receive = incoming
            .iter()
            .map(|&len| self.zeroed(function, len))
            .collect::<Result<Vec<_>>>()?;
        {
            let sends: Vec<_> = staged.iter().map(|b| b.device_ptr(&self.stream)).collect();
            let receives: Vec<_> = receive
                .iter_mut()
                .map(|b| b.device_ptr_mut(&self.stream))
                .collect();
            self.collective(function, "all-to-all", |comm, stream| {
                calls::group_start()?;
                let mut enqueued = Ok(NcclStatus::Success);
                for peer in 0..size {
                    let peer_id = peer as i32;
                    let uint8 = sys::ncclDataType_t::ncclUint8;
                    if !send[peer].is_empty() {
                        // SAFETY: the staged buffer holds `send[peer].len()` bytes and lives
                        // until the collective completes.
                        enqueued = enqueued.and(unsafe {
                            calls::send(
                                sends[peer].0 as _,
                                send[peer].len(),
                                uint8,
                                peer_id,
                                comm,
                                stream,
                            )
                        });
                    }
                    if incoming[peer] > 0 {
                        // SAFETY: the receive buffer holds `incoming[peer]` bytes and lives
                        // until the collective completes.
                        enqueued = enqueued.and(unsafe {
                            calls::recv(
                                receives[peer].0 as _,
                                incoming[peer],
                                uint8,
                                peer_id,
                                comm,
                                stream,
                            )
                        });
                    }
                }
                // The group is ended whatever happened inside it, so that NCCL's group
                // state is clean after an error.
                let ended = calls::group_end();
                enqueued.and(ended)
            })?;
        }
        receive
            .iter()
            .zip(&incoming)
            .map(|(buffer, &len)| {
                let mut bytes = self.fetch(function, buffer)?;
                bytes.truncate(len);
                Ok(bytes)
            })
            .collect()
    }

    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        let function = "Nccl::broadcast";
        check_root(function, root, self.size)?;
        self.live(function)?;
        let mut length = self.stage(function, &(data.len() as u64).to_le_bytes(), 8)?;
        self.broadcast_device(function, root, &mut length)?;
        let length = self.fetch(function, &length)?;
        let len = u64::from_le_bytes(length[..8].try_into().unwrap_or_default());
        let len = self.usize_of(function, len)?;
        let mut staged = self.stage(function, data, len)?;
        self.broadcast_device(function, root, &mut staged)?;
        let mut bytes = self.fetch(function, &staged)?;
        bytes.truncate(len);
        *data = bytes;
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        let function = "Nccl::barrier";
        self.live(function)?;
        let mut token = self.stage(function, &[1], 1)?;
        let count = token.len();
        {
            let (pointer, _written) = token.device_ptr_mut(&self.stream);
            // SAFETY: as in `all_gather_device`: one byte, reduced in place.
            self.collective(function, "barrier", |comm, stream| unsafe {
                calls::all_reduce(
                    pointer as _,
                    pointer as _,
                    count,
                    sys::ncclDataType_t::ncclUint8,
                    sys::ncclRedOp_t::ncclMax,
                    comm,
                    stream,
                )
            })?;
        }
        self.fetch(function, &token).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_hex_and_bad_text_is_an_error() {
        let bytes: [u8; ID_BYTES] = std::array::from_fn(|i| (i * 37 + 5) as u8);
        let id = NcclId::from_bytes(bytes);
        let hex = id.to_hex();
        assert_eq!(hex.len(), 256);
        assert_eq!(NcclId::from_hex(&hex).unwrap().bytes(), bytes);
        assert_eq!(
            NcclId::from_hex(&format!(" {hex}\n")).unwrap().bytes(),
            bytes
        );
        for bad in [&hex[..254], "zz", &format!("{}zz", &hex[..254])] {
            let message = NcclId::from_hex(bad).unwrap_err().to_string();
            assert!(message.contains("NcclId::from_hex"), "{message}");
        }
    }
}
