//! The `Nccl` backend: one rank per GPU on NVIDIA's NCCL, through cudarc.

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DriverError};
use cudarc::nccl::{Comm, Id, ReduceOp, group_end, group_start, result::NcclError};
use rlgrad_core::{Error, Result};

use crate::collective::{Collective, check_all_to_all, check_root};

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
/// `Nccl` is `Send` but not `Sync`: a communicator may move to another thread, but NCCL
/// forbids two threads calling it at once. NCCL's collectives block without a timeout (the
/// `Mpi` backend's time out, through MPI's non-blocking collectives): a rank that dies or
/// stalls stalls the others.
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
    comm: Comm,
    stream: Arc<CudaStream>,
    device: usize,
}

// SAFETY: an NCCL communicator and its stream are handles that any thread may use, one
// thread at a time (NCCL's rule; the CUDA context is made current on the calling thread
// before every call). `Nccl` is not `Sync`, so no two threads can call it at once.
unsafe impl Send for Nccl {}

impl fmt::Debug for Nccl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nccl")
            .field("rank", &self.comm.rank())
            .field("size", &self.comm.world_size())
            .field("device", &self.device)
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
    }
}

fn driver_error(function: &'static str, device: String, e: DriverError) -> Error {
    Error::Device {
        function,
        device,
        message: format!("CUDA failed: {e}"),
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

impl Nccl {
    /// One rank per entry of `devices` (GPU ordinals; rank `r` on `devices[r]`), for
    /// workers as threads of this process (`ncclCommInitAll`): move each into its thread.
    /// An error when the libraries cannot be loaded, a GPU cannot be opened, or NCCL
    /// refuses the list (NCCL allows one rank per GPU in a communicator).
    pub fn local(devices: &[usize]) -> Result<Vec<Nccl>> {
        let function = "Nccl::local";
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
        let comms = Comm::from_devices(streams.clone())
            .map_err(|e| nccl_error(function, format!("GPUs {devices:?}"), e))?;
        Ok(comms
            .into_iter()
            .zip(streams)
            .zip(devices)
            .map(|((comm, stream), &device)| Nccl {
                comm,
                stream,
                device,
            })
            .collect())
    }

    /// Rank `rank` of `size` on GPU `device`, joining the communicator that `id` names
    /// (`ncclCommInitRank`): every rank calls it with the same `id` and `size`, and it
    /// returns once all have. An error for `rank >= size`, or when the libraries, the GPU
    /// or NCCL fail.
    pub fn join(device: usize, rank: usize, size: usize, id: &NcclId) -> Result<Nccl> {
        let function = "Nccl::join";
        library(function)?;
        if rank >= size {
            return Err(Error::out_of_range(
                function,
                "rank",
                format_args!("a rank below size ({size})"),
                rank,
            ));
        }
        let stream = stream_on(function, device)?;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver_error(function, format!("cuda:{device}"), e))?;
        let comm = Comm::from_rank(stream.clone(), rank, size, id.0)
            .map_err(|e| nccl_error(function, format!("rank {rank} on cuda:{device}"), e))?;
        Ok(Nccl {
            comm,
            stream,
            device,
        })
    }

    /// The MPI job's ranks on NCCL: rank 0 makes the [`NcclId`] and broadcasts it over
    /// `mpi`, and every rank joins with its MPI rank and size, on GPU `device` (usually
    /// the rank's index on its node modulo the node's GPU count). Feature `mpi` too.
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
        Nccl::join(device, mpi.rank(), mpi.size(), &NcclId::from_bytes(bytes))
    }

    /// The GPU this rank runs on.
    pub fn device(&self) -> usize {
        self.device
    }

    fn name(&self) -> String {
        format!("nccl rank {} on cuda:{}", self.comm.rank(), self.device)
    }

    /// Makes this rank's CUDA context current on the calling thread: NCCL launches on
    /// the current context.
    fn bind(&self, function: &'static str) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| driver_error(function, self.name(), e))
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

    /// Every rank's `values`, indexed by rank (all ranks pass the same count).
    fn gather_lengths(&self, function: &'static str, values: &[u64]) -> Result<Vec<u64>> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let send = self.stage(function, &bytes, bytes.len())?;
        let mut receive = self
            .stream
            .alloc_zeros::<u8>(bytes.len().max(1) * self.size())
            .map_err(|e| driver_error(function, self.name(), e))?;
        self.comm
            .all_gather(&send, &mut receive)
            .map_err(|e| nccl_error(function, self.name(), e))?;
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
        })
    }
}

impl Collective for Nccl {
    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn size(&self) -> usize {
        self.comm.world_size()
    }

    fn all_gather(&self, send: &[u8]) -> Result<Vec<Vec<u8>>> {
        let function = "Nccl::all_gather";
        self.bind(function)?;
        let lengths = self.gather_lengths(function, &[send.len() as u64])?;
        let block = self.usize_of(function, lengths.iter().copied().max().unwrap_or(0))?;
        let block = block.max(1);
        let staged = self.stage(function, send, block)?;
        let mut receive = self
            .stream
            .alloc_zeros::<u8>(block * self.size())
            .map_err(|e| driver_error(function, self.name(), e))?;
        self.comm
            .all_gather(&staged, &mut receive)
            .map_err(|e| nccl_error(function, self.name(), e))?;
        let all = self.fetch(function, &receive)?;
        all.chunks_exact(block)
            .zip(lengths)
            .map(|(chunk, len)| Ok(chunk[..self.usize_of(function, len)?].to_vec()))
            .collect()
    }

    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let function = "Nccl::all_to_all";
        check_all_to_all(function, "send", send.len(), self.size())?;
        self.bind(function)?;
        let size = self.size();
        let mine: Vec<u64> = send.iter().map(|m| m.len() as u64).collect();
        // Row r: what rank r sends to each rank.
        let matrix = self.gather_lengths(function, &mine)?;
        let incoming = (0..size)
            .map(|source| self.usize_of(function, matrix[source * size + self.rank()]))
            .collect::<Result<Vec<_>>>()?;
        let staged = send
            .iter()
            .map(|m| self.stage(function, m, m.len()))
            .collect::<Result<Vec<_>>>()?;
        let mut receive = incoming
            .iter()
            .map(|&len| {
                self.stream
                    .alloc_zeros::<u8>(len.max(1))
                    .map_err(|e| driver_error(function, self.name(), e))
            })
            .collect::<Result<Vec<_>>>()?;
        group_start().map_err(|e| nccl_error(function, self.name(), e))?;
        let mut enqueued = Ok(());
        for peer in 0..size {
            let peer_id = peer as i32;
            if !send[peer].is_empty() {
                enqueued = enqueued.and(self.comm.send(&staged[peer], peer_id));
            }
            if incoming[peer] > 0 {
                enqueued = enqueued.and(self.comm.recv(&mut receive[peer], peer_id).map(drop));
            }
        }
        // The group is ended whatever happened inside it, so that NCCL is usable after an
        // error.
        let ended = group_end().map(drop);
        enqueued
            .and(ended)
            .map_err(|e| nccl_error(function, self.name(), e))?;
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
        check_root(function, root, self.size())?;
        self.bind(function)?;
        let mut length = self.stage(function, &(data.len() as u64).to_le_bytes(), 8)?;
        self.comm
            .broadcast_in_place(&mut length, root as i32)
            .map_err(|e| nccl_error(function, self.name(), e))?;
        let length = self.fetch(function, &length)?;
        let len = u64::from_le_bytes(length[..8].try_into().unwrap_or_default());
        let len = self.usize_of(function, len)?;
        let mut staged = self.stage(function, data, len)?;
        self.comm
            .broadcast_in_place(&mut staged, root as i32)
            .map_err(|e| nccl_error(function, self.name(), e))?;
        let mut bytes = self.fetch(function, &staged)?;
        bytes.truncate(len);
        *data = bytes;
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        let function = "Nccl::barrier";
        self.bind(function)?;
        let mut token = self.stage(function, &[1], 1)?;
        self.comm
            .all_reduce_in_place(&mut token, &ReduceOp::Max)
            .map_err(|e| nccl_error(function, self.name(), e))?;
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
