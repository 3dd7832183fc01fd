//! The [`Cuda`] device: one context and one stream per GPU, a caching allocator, the
//! kernel modules, and the [`Device`] implementation (allocate, upload, download).

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchArgs,
    LaunchConfig, PushKernelArg,
};
use rlgrad_core::{Device, Element, Error, Float, Result, View};

use crate::compile::Family;
use crate::target::{Arch, CudaVersion, Target};

/// A buffer of `len` elements of `E` in GPU memory (the [`Device::Buffer`] of [`Cuda`]).
pub struct CudaBuffer<E> {
    // Taken out once: by `Drop` (freed, or held while a step is logged) or `into_bytes`.
    bytes: ManuallyDrop<CudaSlice<u8>>,
    len: usize,
    element: PhantomData<E>,
}

impl<E> Drop for CudaBuffer<E> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and `bytes` is not touched after.
        crate::capture::dispose(unsafe { ManuallyDrop::take(&mut self.bytes) });
    }
}

impl<E> fmt::Debug for CudaBuffer<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CudaBuffer({} elements)", self.len)
    }
}

impl<E> CudaBuffer<E> {
    fn new(bytes: CudaSlice<u8>, len: usize) -> Self {
        Self {
            bytes: ManuallyDrop::new(bytes),
            len,
            element: PhantomData,
        }
    }

    /// The memory, for the cache.
    fn into_bytes(self) -> CudaSlice<u8> {
        let mut buffer = ManuallyDrop::new(self);
        // SAFETY: `buffer` is never dropped, so `bytes` is taken once.
        unsafe { ManuallyDrop::take(&mut buffer.bytes) }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// `Ok` when every element `view` addresses lies inside its buffer.
pub(crate) fn check_view<E>(
    function: &'static str,
    argument: &'static str,
    view: View<'_, CudaBuffer<E>>,
) -> Result<()> {
    rlgrad_core::check::inside_buffer(function, argument, view.layout, view.buffer.len())
}

/// `Ok` when `buffer` has `len` elements.
pub(crate) fn check_len<E>(
    function: &'static str,
    argument: &'static str,
    buffer: &CudaBuffer<E>,
    len: usize,
) -> Result<()> {
    if buffer.len() == len {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            argument,
            format_args!("{len} elements"),
            format_args!("{} elements", buffer.len()),
        ))
    }
}

/// A GPU. Cloning is cheap (a shared handle); [`Cuda::new`] hands out the same device for
/// the same ordinal, so every handle shares one stream, one allocator and one set of
/// compiled kernels.
///
/// All work is queued on the device's one stream, in call order: a kernel sees the
/// results of every call before it, and [`Device::download`] waits for them.
#[derive(Clone)]
pub struct Cuda {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    ordinal: usize,
    name: String,
    context: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    target: Target,
    driver: CudaVersion,
    total_memory: usize,
    multiprocessors: usize,
    modules: [OnceLock<Arc<CudaModule>>; Family::ALL.len()],
    functions: Mutex<HashMap<String, CudaFunction>>,
    resident: Mutex<HashMap<String, u32>>,
    pool: Mutex<Pool>,
    sequences: Mutex<crate::sequence::SequenceCache>,
    indices: Mutex<crate::copy::IndexCache>,
    /// The tiled products' tile edge when forced ([`Cuda::force_matmul_tile`]), else 0.
    matmul_tile: AtomicUsize,
    launches: AtomicU64,
    graph_launches: AtomicU64,
    uploads: AtomicU64,
    downloads: AtomicU64,
    /// The work of the step being logged, if any (`capture.rs`).
    pub(crate) log: Mutex<Option<crate::capture::Log>>,
    /// Held by the thread that runs a step, for the whole run (`capture.rs`).
    pub(crate) step_lock: Mutex<()>,
    /// That thread's number, 0 when no step runs.
    pub(crate) step_thread: AtomicU64,
}

/// What work asked of a GPU ([`Cuda::activity`]): kernel launches, host-to-device copies
/// and device-to-host copies, counted from the device's opening, by every handle and
/// thread. A download waits for the stream, so a training step that downloads nothing
/// lets the host queue the next step while the GPU runs this one, and only such a step
/// could be recorded as a CUDA graph. The bench reports them per training step.
///
/// ```
/// use rlgrad_cuda::{Activity, Cuda};
/// use rlgrad_core::Device;
/// if let Ok(gpu) = Cuda::new(0) {
///     let before = gpu.activity();
///     let x = gpu.upload(&[1.0f32, 2.0])?;
///     let _ = gpu.download(&x)?;
///     let step = gpu.activity().since(before);
///     assert_eq!((step.uploads, step.downloads), (1, 1));
/// }
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Activity {
    /// Kernels launched one by one (a captured step's replay launches none: see
    /// `graph_launches`).
    pub launches: u64,
    /// CUDA graphs launched: one per replayed or recorded run of a captured step
    /// ([`rlgrad_core::Step`]).
    pub graph_launches: u64,
    /// Copies from host memory (uploads of data, indices, lengths).
    pub uploads: u64,
    /// Copies to host memory, each a wait for the stream.
    pub downloads: u64,
}

impl Activity {
    /// What happened between `earlier` and this snapshot of the same device.
    pub fn since(self, earlier: Activity) -> Activity {
        Activity {
            launches: self.launches.wrapping_sub(earlier.launches),
            graph_launches: self.graph_launches.wrapping_sub(earlier.graph_launches),
            uploads: self.uploads.wrapping_sub(earlier.uploads),
            downloads: self.downloads.wrapping_sub(earlier.downloads),
        }
    }
}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cuda({}: {})", self.name(), self.inner.name)
    }
}

/// Free buffers by size in bytes, like PyTorch's CUDA caching allocator: a warmed-up
/// loop takes every buffer it needs from here.
#[derive(Default)]
struct Pool {
    free: HashMap<usize, Vec<CudaSlice<u8>>>,
    bytes: usize,
    limit: usize,
}

impl Pool {
    /// Frees every cached buffer (or holds them while a step is logged: its logged work
    /// may use them).
    fn empty(&mut self) {
        for slice in self.free.drain().flat_map(|(_, slices)| slices) {
            crate::capture::dispose(slice);
        }
        self.bytes = 0;
    }
}

static DEVICES: OnceLock<Mutex<HashMap<usize, Cuda>>> = OnceLock::new();

impl Cuda {
    /// The GPU with this ordinal (0 is the first), opened once per process. An error that
    /// says why when there is none: no CUDA driver library (`libcuda.so.1`), no NVRTC
    /// library, no device with this ordinal, or a driver that refuses the context.
    ///
    /// ```
    /// use rlgrad_cuda::Cuda;
    /// match Cuda::new(0) {
    ///     Ok(gpu) => println!("running on {gpu:?}"),
    ///     Err(why) => println!("no GPU: {why}"),
    /// }
    /// ```
    pub fn new(ordinal: usize) -> Result<Cuda> {
        let devices = DEVICES.get_or_init(Mutex::default);
        let mut devices = devices.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(device) = devices.get(&ordinal) {
            return Ok(device.clone());
        }
        let device = Self::open(ordinal)?;
        devices.insert(ordinal, device.clone());
        Ok(device)
    }

    fn open(ordinal: usize) -> Result<Cuda> {
        let fail = |message: String| Error::Device {
            function: "Cuda::new",
            device: format!("cuda:{ordinal}"),
            message,
            cause: None,
        };
        // cudarc panics when a library it needs is missing: ask first.
        // SAFETY: only tries to open the driver library by its candidate names.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(fail(
                "no CUDA driver library (libcuda.so.1): no NVIDIA driver on this machine"
                    .to_owned(),
            ));
        }
        crate::compile::nvrtc_available().map_err(|e| fail(e.to_string()))?;
        // A driver older than the CUDA 13 API cudarc was built for lacks symbols, which
        // cudarc reports by panicking: that, too, becomes an error.
        std::panic::catch_unwind(AssertUnwindSafe(|| Self::open_context(ordinal)))
            .map_err(|panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "the CUDA driver failed".to_owned());
                fail(why)
            })?
            .map_err(fail)
    }

    fn open_context(ordinal: usize) -> std::result::Result<Cuda, String> {
        let count = CudaContext::device_count().map_err(|e| format!("no CUDA device ({e})"))?;
        if ordinal >= count.max(0) as usize {
            return Err(format!(
                "no device with ordinal {ordinal}: {count} device(s) found"
            ));
        }
        let context = CudaContext::new(ordinal).map_err(|e| e.to_string())?;
        // SAFETY: every buffer of this device is allocated, used and freed on its one
        // stream (below), whose order already serializes all reads and writes; the event
        // tracking that cudarc does for multi-stream use is not needed, and no buffer was
        // allocated before this call.
        unsafe { context.disable_event_tracking() };
        let stream = context.new_stream().map_err(|e| e.to_string())?;
        let name = context.name().map_err(|e| e.to_string())?;
        let (major, minor) = context.compute_capability().map_err(|e| e.to_string())?;
        let total = context.total_mem().map_err(|e| e.to_string())?;
        let multiprocessors = context
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| e.to_string())?;
        let mut driver = 0;
        // SAFETY: writes one int through a valid pointer; the driver library is loaded.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) }
            .result()
            .map_err(|e| e.to_string())?;
        let nvrtc = crate::compile::nvrtc_version().ok_or("NVRTC's version is unreadable")?;
        let gpu = Arch {
            major: major.max(0) as u32,
            minor: minor.max(0) as u32,
        };
        let driver = CudaVersion::from_driver(driver.max(0) as u32);
        let target = Target::choose(gpu, driver, nvrtc, &crate::compile::nvrtc_archs())
            .map_err(|e| e.to_string())?;
        Ok(Cuda {
            inner: Arc::new(Inner {
                ordinal,
                name,
                context,
                stream,
                target,
                driver,
                total_memory: total,
                multiprocessors: multiprocessors.max(1) as usize,
                modules: std::array::from_fn(|_| OnceLock::new()),
                functions: Mutex::default(),
                resident: Mutex::default(),
                pool: Mutex::new(Pool {
                    limit: total / 2,
                    ..Pool::default()
                }),
                sequences: Mutex::default(),
                indices: Mutex::default(),
                matmul_tile: AtomicUsize::new(0),
                launches: AtomicU64::new(0),
                graph_launches: AtomicU64::new(0),
                uploads: AtomicU64::new(0),
                downloads: AtomicU64::new(0),
                log: Mutex::default(),
                step_lock: Mutex::default(),
                step_thread: AtomicU64::new(0),
            }),
        })
    }

    /// The launches, uploads and downloads of this device so far (see [`Activity`]).
    pub fn activity(&self) -> Activity {
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Activity {
            launches: count(&self.inner.launches),
            graph_launches: count(&self.inner.graph_launches),
            uploads: count(&self.inner.uploads),
            downloads: count(&self.inner.downloads),
        }
    }

    /// Copies `source` into `target` (equal lengths) with the driver's device-to-device
    /// copy: the memory-bandwidth yardstick of `rlgrad-gpu-bench`.
    pub fn copy_buffer<E: Element>(
        &self,
        source: &CudaBuffer<E>,
        target: &mut CudaBuffer<E>,
    ) -> Result<()> {
        check_len("Cuda::copy_buffer", "target", target, source.len)?;
        let bytes = source.len * E::DTYPE.size_in_bytes();
        if bytes == 0 {
            return Ok(());
        }
        let (from_address, to_address, count) = (self.ptr(source), self.ptr(target), bytes as u64);
        if self.logged_bytes(
            "Cuda::copy_buffer",
            "copy_bytes",
            &[&from_address, &to_address, &count],
            bytes,
        )? {
            return Ok(());
        }
        let from = source.bytes.slice(..bytes);
        let mut to = target.bytes.slice_mut(..bytes);
        self.check_step_thread("Cuda::copy_buffer")?;
        self.inner
            .stream
            .memcpy_dtod(&from, &mut to)
            .map_err(|e| self.driver_error("Cuda::copy_buffer", e))
    }

    /// What the kernels are compiled into for this GPU (a cubin for its architecture,
    /// or PTX; see [`Target`]).
    pub fn target(&self) -> Target {
        self.inner.target
    }

    /// The GPU's memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.inner.total_memory
    }

    /// The CUDA version of the driver (`cuDriverGetVersion`; 13.0 for driver 580).
    pub fn driver_version(&self) -> CudaVersion {
        self.inner.driver
    }

    /// The GPU's streaming multiprocessors (132 on an H100 SXM or H200).
    pub fn multiprocessors(&self) -> usize {
        self.inner.multiprocessors
    }

    /// Makes every tiled product from now on use tiles of `edge` x `edge` (32, 64 or 128),
    /// whatever the output's size; `None` goes back to the choice by size, which is a
    /// guess until a GPU run times it: `gpu-bench` times each tile on its GEMM shapes with
    /// this. Every tile runs the same chain of each output, so the bits do not change
    /// (the fused linear layer takes 64 for 128). An error for another edge.
    pub fn force_matmul_tile(&self, edge: Option<usize>) -> Result<()> {
        let forced = match edge {
            None => 0,
            Some(edge) if crate::matmul::Tile::of_edge(edge).is_some() => edge,
            Some(edge) => {
                return Err(Error::value(
                    "Cuda::force_matmul_tile",
                    "edge",
                    "32, 64 or 128 (or None: chosen by the output's size)",
                    edge,
                ));
            }
        };
        self.inner.matmul_tile.store(forced, Ordering::Relaxed);
        Ok(())
    }

    /// The tile [`Cuda::force_matmul_tile`] set, if any.
    pub(crate) fn forced_matmul_tile(&self) -> Option<crate::matmul::Tile> {
        crate::matmul::Tile::of_edge(self.inner.matmul_tile.load(Ordering::Relaxed))
    }

    /// The GPU's model name (`"NVIDIA H100 80GB HBM3"`).
    pub fn model(&self) -> &str {
        &self.inner.name
    }

    /// The most bytes the caching allocator keeps in free buffers (half of the GPU's
    /// memory unless [`Cuda::set_cache_limit`] says otherwise).
    pub fn cache_limit(&self) -> usize {
        self.pool().limit
    }

    /// Sets the most bytes the caching allocator keeps (0: no caching); buffers already
    /// cached beyond the new limit are freed.
    pub fn set_cache_limit(&self, bytes: usize) {
        let mut pool = self.pool();
        pool.limit = bytes;
        if pool.bytes > bytes {
            pool.empty();
        }
    }

    /// The bytes held by free buffers in the cache.
    pub fn cached_bytes(&self) -> usize {
        self.pool().bytes
    }

    /// Frees every cached buffer.
    pub fn clear_cache(&self) {
        self.pool().empty();
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.inner.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn error(&self, function: &'static str, message: impl fmt::Display) -> Error {
        Error::Device {
            function,
            device: self.name(),
            message: message.to_string(),
            cause: None,
        }
    }

    /// The driver's error `e` as this device's, kept as the error's source.
    pub(crate) fn driver_error(
        &self,
        function: &'static str,
        e: cudarc::driver::DriverError,
    ) -> Error {
        Error::Device {
            function,
            device: self.name(),
            message: e.to_string(),
            cause: Some(rlgrad_core::Cause::new(e)),
        }
    }

    /// `bytes` of device memory, from the cache when a free buffer of that size is
    /// there; contents unspecified. A failed allocation empties the cache and tries once
    /// more.
    fn raw_alloc(&self, function: &'static str, bytes: usize) -> Result<CudaSlice<u8>> {
        // cuMemAlloc refuses zero bytes: an empty buffer holds one unused word.
        let size = bytes.max(4);
        if let Some(slice) = self.take_cached(size) {
            return Ok(slice);
        }
        self.new_alloc(function, bytes)
    }

    /// `bytes` of new device memory (not the cache's), contents unspecified. A failed
    /// allocation empties the cache and tries once more.
    fn new_alloc(&self, function: &'static str, bytes: usize) -> Result<CudaSlice<u8>> {
        let size = bytes.max(4);
        // An allocation is ordered on the stream.
        self.check_step_thread(function)?;
        let allocate = || {
            // SAFETY: the memory is uninitialized, and every caller overwrites it (a
            // kernel writing every element, an upload, a memset) before reading it.
            unsafe { self.inner.stream.alloc::<u8>(size) }
        };
        allocate().or_else(|_| {
            self.clear_cache();
            allocate().map_err(|e| {
                self.error(function, format_args!("cannot allocate {bytes} bytes: {e}"))
            })
        })
    }

    fn take_cached(&self, size: usize) -> Option<CudaSlice<u8>> {
        let mut pool = self.pool();
        let slice = pool.free.get_mut(&size)?.pop()?;
        pool.bytes -= size;
        Some(slice)
    }

    fn give_back(&self, slice: CudaSlice<u8>) {
        let size = slice.len();
        let mut pool = self.pool();
        if pool.bytes.saturating_add(size) <= pool.limit {
            pool.bytes += size;
            pool.free.entry(size).or_default().push(slice);
        } else {
            drop(pool);
            crate::capture::dispose(slice);
        }
    }

    /// A buffer of `len` elements with unspecified contents: for outputs and scratch
    /// that a kernel overwrites entirely.
    pub(crate) fn uninit<E: Copy>(
        &self,
        function: &'static str,
        len: usize,
    ) -> Result<CudaBuffer<E>> {
        let bytes = len.checked_mul(std::mem::size_of::<E>()).ok_or_else(|| {
            self.error(
                function,
                format_args!("{len} elements overflow the address space"),
            )
        })?;
        Ok(CudaBuffer::new(self.raw_alloc(function, bytes)?, len))
    }

    /// A buffer of `len` bytes of new device memory, never one of the cache's (a captured
    /// step's staging buffer, written while the step's work that may use cached buffers
    /// is not launched yet).
    pub(crate) fn fresh(&self, function: &'static str, len: usize) -> Result<CudaBuffer<u8>> {
        Ok(CudaBuffer::new(self.new_alloc(function, len)?, len))
    }

    /// Hands a scratch buffer back to the cache (it is reused only by later work on the
    /// same stream, so kernels still queued that read it are unaffected).
    pub(crate) fn release<E>(&self, buffer: CudaBuffer<E>) {
        self.give_back(buffer.into_bytes());
    }

    /// The device address of a buffer, as a kernel parameter.
    pub(crate) fn ptr<E>(&self, buffer: &CudaBuffer<E>) -> u64 {
        let (address, _no_event_with_tracking_off) = buffer.bytes.device_ptr(&self.inner.stream);
        address
    }

    /// A scratch copy of host indices or lengths as `u64`, for kernels to read.
    pub(crate) fn upload_u64(
        &self,
        function: &'static str,
        values: impl ExactSizeIterator<Item = usize>,
    ) -> Result<CudaBuffer<u64>> {
        let host: Vec<u64> = values.map(|v| v as u64).collect();
        let mut buffer = self.uninit::<u64>(function, host.len())?;
        self.copy_in(function, bytes_of(&host), &mut buffer)?;
        Ok(buffer)
    }

    pub(crate) fn copy_in<E>(
        &self,
        function: &'static str,
        host: &[u8],
        buffer: &mut CudaBuffer<E>,
    ) -> Result<()> {
        if host.is_empty() || self.logged_upload(function, host, self.ptr(buffer))? {
            return Ok(());
        }
        let mut target = buffer.bytes.slice_mut(..host.len());
        self.check_step_thread(function)?;
        self.count_upload();
        self.inner
            .stream
            .memcpy_htod(host, &mut target)
            .map_err(|e| self.driver_error(function, e))
    }

    /// Sets every byte of `buffer` to zero (`+0` for floats).
    pub(crate) fn zero<E>(&self, function: &'static str, buffer: &mut CudaBuffer<E>) -> Result<()> {
        let (address, bytes) = (self.ptr(buffer), buffer.bytes.len());
        if self.logged_bytes(function, "zero_bytes", &[&address, &(bytes as u64)], bytes)? {
            return Ok(());
        }
        self.check_step_thread(function)?;
        self.inner
            .stream
            .memset_zeros(&mut *buffer.bytes)
            .map_err(|e| self.driver_error(function, e))
    }

    /// The loaded function `<name>_<f32|f64>` of `family`, compiling and loading the
    /// family's module the first time.
    pub(crate) fn function<T: Float>(&self, family: Family, name: &str) -> Result<CudaFunction> {
        self.kernel(family, format!("{name}_{}", T::DTYPE.name()))
    }

    /// The byte kernel `name` of copy.cu (`zero_bytes`, `copy_bytes`).
    pub(crate) fn byte_kernel(&self, name: &str) -> Result<CudaFunction> {
        self.kernel(Family::Copy, name.to_owned())
    }

    /// The loaded function `full` of `family`.
    fn kernel(&self, family: Family, full: String) -> Result<CudaFunction> {
        let mut functions = self
            .inner
            .functions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(function) = functions.get(&full) {
            return Ok(function.clone());
        }
        let module = self.module(family)?;
        let function = module
            .load_function(&full)
            .map_err(|e| self.error("Cuda::launch", format_args!("kernel {full}: {e}")))?;
        functions.insert(full, function.clone());
        Ok(function)
    }

    /// How many blocks of [`BLOCK`] threads of `<name>_<f32|f64>` the GPU keeps resident at
    /// once (its SMs times what the kernel's registers and shared memory leave room for):
    /// the size of a persistent grid.
    pub(crate) fn resident_blocks<T: Float>(&self, family: Family, name: &str) -> Result<u32> {
        let full = format!("{name}_{}", T::DTYPE.name());
        let mut resident = self
            .inner
            .resident
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(&blocks) = resident.get(&full) {
            return Ok(blocks);
        }
        let per_sm = self
            .function::<T>(family, name)?
            .occupancy_max_active_blocks_per_multiprocessor(BLOCK, 0, None)
            .map_err(|e| self.driver_error("Cuda::launch", e))?;
        let blocks = (per_sm.max(1) as usize * self.inner.multiprocessors).min(1 << 20) as u32;
        resident.insert(full, blocks);
        Ok(blocks)
    }

    /// The device's cache of sequence lengths and offsets (`sequence.rs`).
    pub(crate) fn index_cache(&self) -> std::sync::MutexGuard<'_, crate::copy::IndexCache> {
        self.inner.indices.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn sequence_cache(
        &self,
    ) -> std::sync::MutexGuard<'_, crate::sequence::SequenceCache> {
        self.inner
            .sequences
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn module(&self, family: Family) -> Result<Arc<CudaModule>> {
        let cell = &self.inner.modules[family.index()];
        if let Some(module) = cell.get() {
            return Ok(Arc::clone(module));
        }
        let image = family.image(self.inner.target)?;
        let module = self
            .inner
            .context
            .load_module(image.into_module_source())
            .map_err(|e| {
                self.error(
                    "Cuda::launch",
                    format_args!(
                        "{}.cu for {}: {e}",
                        family.name(),
                        self.inner.target.label()
                    ),
                )
            })?;
        Ok(Arc::clone(cell.get_or_init(|| module)))
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    pub(crate) fn count_launch(&self) {
        self.inner.launches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_upload(&self) {
        self.inner.uploads.fetch_add(1, Ordering::Relaxed);
    }

    /// The GPU's ordinal (0 is the first), as its buffers know it.
    pub(crate) fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    pub(crate) fn count_graph_launch(&self) {
        self.inner.graph_launches.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes the device's context current on this thread, for direct driver calls.
    pub(crate) fn bind(&self) -> Result<()> {
        self.inner
            .context
            .bind_to_thread()
            .map_err(|e| self.driver_error("Cuda", e))
    }

    /// Launches `function` with `args` on the device's stream, or logs it where a step is
    /// being logged (`capture.rs`).
    pub(crate) fn launch(
        &self,
        function: &'static str,
        kernel: &CudaFunction,
        config: LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        if self.logged_launch(function, kernel, config, args) {
            return Ok(());
        }
        let mut builder = self.inner.stream.launch_builder(kernel);
        for arg in args {
            arg.push(&mut builder);
        }
        self.check_step_thread(function)?;
        self.count_launch();
        // SAFETY: the arguments match the kernel's parameter list (each family's Rust file
        // passes them in the order of its `.cu` signature, pointers as u64 addresses of
        // buffers that outlive the queued work: they are owned by the caller or released
        // to this stream's cache, whose reuse is ordered after this kernel), and every
        // index a kernel computes stays inside the sizes the Rust side checked.
        unsafe { builder.launch(config) }
            .map(|_| ())
            .map_err(|e| self.driver_error(function, e))
    }
}

/// One kernel parameter.
pub(crate) trait KernelArg {
    fn push<'a>(&'a self, builder: &mut LaunchArgs<'a>);
    /// The parameter's bytes, as the kernel receives them (for a captured step's log).
    fn bytes(&self) -> &[u8];
}

/// The bytes of a plain-data kernel parameter.
///
/// # Safety
///
/// `T` has no padding (every byte of a value is initialized).
pub(crate) unsafe fn value_bytes<T: Copy>(value: &T) -> &[u8] {
    bytes_of(std::slice::from_ref(value))
}

impl KernelArg for u64 {
    fn push<'a>(&'a self, builder: &mut LaunchArgs<'a>) {
        builder.arg(self);
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: an integer has no padding.
        unsafe { value_bytes(self) }
    }
}

impl KernelArg for i32 {
    fn push<'a>(&'a self, builder: &mut LaunchArgs<'a>) {
        builder.arg(self);
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: an integer has no padding.
        unsafe { value_bytes(self) }
    }
}

/// A scalar of the element type, as the kernel's `T` parameter.
pub(crate) enum Scalar {
    F32(f32),
    F64(f64),
}

impl Scalar {
    pub(crate) fn of<T: Float>(value: T) -> Scalar {
        match T::DTYPE {
            rlgrad_core::DType::F32 => Scalar::F32(value.as_f64() as f32),
            _ => Scalar::F64(value.as_f64()),
        }
    }
}

impl KernelArg for Scalar {
    fn push<'a>(&'a self, builder: &mut LaunchArgs<'a>) {
        match self {
            Scalar::F32(v) => builder.arg(v),
            Scalar::F64(v) => builder.arg(v),
        };
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: a float has no padding.
        unsafe {
            match self {
                Scalar::F32(v) => value_bytes(v),
                Scalar::F64(v) => value_bytes(v),
            }
        }
    }
}

/// Threads per block of the one-dimensional kernels (`BLOCK` in common.cuh).
pub(crate) const BLOCK: u32 = 256;

/// A grid-stride launch over `n` elements: enough blocks to fill any GPU, no more.
pub(crate) fn grid(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as usize).clamp(1, 1 << 16) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn bytes_of<E: Copy>(values: &[E]) -> &[u8] {
    // SAFETY: the element types are plain integers and floats (rlgrad's sealed `Element`
    // types and u64) or, through `value_bytes`, parameters without padding, so their
    // memory is `size_of_val` initialized bytes, valid for the slice's lifetime.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

impl Device for Cuda {
    type Buffer<E: Element> = CudaBuffer<E>;

    /// The step's CUDA graphs (see [`CudaRecordings`](crate::CudaRecordings)).
    type Recordings = crate::capture::CudaRecordings;

    /// Logs the step's work and replays the recording that did the same work (with the
    /// parameters of this run), or records it (see [`rlgrad_core::Step`]).
    fn run_step<R>(
        &self,
        recordings: &mut crate::capture::CudaRecordings,
        step: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.run_captured(recordings, step)
    }

    fn name(&self) -> String {
        format!("cuda:{}", self.inner.ordinal)
    }

    fn alloc_zeros<E: Element>(&self, len: usize) -> Result<CudaBuffer<E>> {
        let mut buffer = self.uninit("Device::alloc_zeros", len)?;
        self.zero("Device::alloc_zeros", &mut buffer)?;
        Ok(buffer)
    }

    fn upload<E: Element>(&self, host: &[E]) -> Result<CudaBuffer<E>> {
        let mut buffer = self.uninit("Device::upload", host.len())?;
        self.copy_in("Device::upload", bytes_of(host), &mut buffer)?;
        Ok(buffer)
    }

    /// A buffer from the cache when one of the same size is free, else a new one.
    fn alloc_output<E: Element>(&self, len: usize) -> Result<Arc<CudaBuffer<E>>> {
        Ok(Arc::new(self.uninit("Device::alloc_output", len)?))
    }

    /// Keeps the buffer in the cache (within its limit) when it is the last reference.
    fn recycle<E: Element>(&self, buffer: Arc<CudaBuffer<E>>) {
        if let Ok(buffer) = Arc::try_unwrap(buffer) {
            self.release(buffer);
        }
    }

    fn download<E: Element>(&self, buffer: &CudaBuffer<E>) -> Result<Vec<E>> {
        self.before_host_read("Device::download")?;
        let mut host =
            rlgrad_core::cpu::alloc::try_zeroed::<E>(buffer.len, "Device::download", "buffer")?;
        if buffer.len > 0 {
            // SAFETY: as in `bytes_of`; every bit pattern is a valid value of these types,
            // so the kernel's bytes written here are valid elements.
            let target = unsafe {
                std::slice::from_raw_parts_mut(
                    host.as_mut_ptr().cast::<u8>(),
                    std::mem::size_of_val(host.as_slice()),
                )
            };
            let source = buffer.bytes.slice(..target.len());
            self.check_step_thread("Device::download")?;
            self.inner.downloads.fetch_add(1, Ordering::Relaxed);
            self.inner
                .stream
                .memcpy_dtoh(&source, target)
                .map_err(|e| self.error("Device::download", e))?;
        }
        self.synchronize()?;
        Ok(host)
    }

    fn buffer_len<E: Element>(&self, buffer: &CudaBuffer<E>) -> usize {
        buffer.len
    }

    fn synchronize(&self) -> Result<()> {
        self.before_host_read("Device::synchronize")?;
        self.check_step_thread("Device::synchronize")?;
        self.inner
            .stream
            .synchronize()
            .map_err(|e| self.error("Device::synchronize", e))
    }
}
