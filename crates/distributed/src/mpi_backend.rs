//! The `Mpi` backend: one process per rank on the system MPI, through rsmpi.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::mem;
use std::thread;
use std::time::{Duration, Instant};

use mpi::Count;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::request::{Request, Scope, scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use rlgrad_core::{Error, Result};

use crate::collective::{Collective, Packed, check_all_to_all, check_root, check_timeout};

/// The world communicator of an MPI job (feature `mpi`): one process per rank, started by
/// `mpirun -np W program` (or Slurm's `srun`).
///
/// Messages are bytes (`MPI_BYTE`) moved by `MPI_Allgatherv`, `MPI_Alltoallv`,
/// `MPI_Bcast` and `MPI_Barrier`, each preceded by an exchange of the lengths; MPI adds no
/// floats, so the results are those of every other backend. MPI is finalized when the
/// value is dropped.
///
/// It keeps the buffers of large messages (1 MiB or more, the four largest) between
/// collectives and receives into them, since writing freshly mapped memory costs as much
/// as the copy: a process reducing a 16M-float gradient on 2 ranks holds about 160 MiB
/// of them (32 MiB each way in the all-to-all, 32 MiB sent and 64 MiB received by the
/// all-gather) until the value is dropped.
///
/// Each collective waits at most [`Mpi::timeout`] ([`Mpi::DEFAULT_TIMEOUT`], ten minutes,
/// unless [`Mpi::with_timeout`] sets another) for the other ranks: it starts the
/// non-blocking form (`MPI_Iallgatherv`, `MPI_Ialltoallv`, `MPI_Ibcast`, `MPI_Ibarrier`)
/// and tests it until it completes, yielding the core between tests, as MPI's blocking
/// collectives poll (MPI moves a collective's data only inside such calls, so tests
/// spaced out would slow a large one down). The timeout bounds how long a rank waits for
/// the others to *arrive*, including whatever they do before the call (an evaluation,
/// writing a checkpoint): set it above the longest such gap. When a rank stalls (or never calls the
/// collective), the others fail after the timeout with an error naming the collective,
/// the timeout, their own rank and the world size; MPI does not tell which rank is
/// missing. When a rank dies, Open MPI's `mpirun` ends the whole job (its default)
/// before that.
///
/// MPI cannot cancel a collective: after a timeout the request and its buffers are
/// leaked on purpose (MPI may still write them when the late rank arrives; a broadcast
/// that times out moving the bytes leaves its `data` empty), and every later collective
/// of this value fails at once.
/// Dropping it then still finalizes MPI, which waits for the other ranks; a program that
/// must stop at once ends with [`std::process::exit`] and `mpirun` ends the job.
///
/// ```no_run
/// use rlgrad_dist::{Collective, Mpi};
/// let comm = Mpi::init()?;
/// println!("rank {} of {}", comm.rank(), comm.size());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Mpi {
    world: SimpleCommunicator,
    timeout: Duration,
    // The collective that timed out: the communicator is unusable from then on.
    broken: Cell<Option<&'static str>>,
    // Message buffers kept between collectives (`recycle`), their pages mapped already.
    pool: RefCell<Vec<Vec<u8>>>,
    // Dropped after `world`: finalizes MPI.
    _universe: Universe,
}

impl fmt::Debug for Mpi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.world.rank())
            .field("size", &self.world.size())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Mpi {
    /// The timeout of [`Mpi::init`]: ten minutes, above the time a rank spends between two
    /// collectives in a training loop that checkpoints and evaluates, so that only a
    /// stalled or missing rank reaches it.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

    /// Initializes MPI and returns the world communicator, whose collectives time out
    /// after [`Mpi::DEFAULT_TIMEOUT`]. An error when MPI was initialized already in this
    /// process (one `Mpi` per process).
    pub fn init() -> Result<Mpi> {
        Self::with_timeout(Self::DEFAULT_TIMEOUT)
    }

    /// [`Mpi::init`] whose collectives wait at most `timeout` for the other ranks.
    /// Errors: a zero `timeout` (checked before MPI is initialized), MPI initialized
    /// already in this process.
    pub fn with_timeout(timeout: Duration) -> Result<Mpi> {
        let function = "Mpi::with_timeout";
        check_timeout(function, timeout)?;
        let universe = mpi::initialize().ok_or_else(|| Error::Device {
            function,
            device: "mpi".to_owned(),
            message: "MPI is initialized already in this process (one Mpi per process)".to_owned(),
            cause: None,
        })?;
        Ok(Mpi {
            world: universe.world(),
            timeout,
            broken: Cell::new(None),
            pool: RefCell::new(Vec::new()),
            _universe: universe,
        })
    }

    /// Buffers shorter than this are freed, not kept: allocating them costs little.
    const POOLED_MIN: usize = 1 << 20;
    /// How many message buffers are kept between collectives, at most (the receive
    /// and send buffers of the two collectives of a large all-reduce).
    const POOLED: usize = 4;

    /// A receive buffer of `len` bytes, never at the dangling pointer of an empty vector
    /// (see [`heap`]): a pooled one when it fits, whose pages are mapped already, else
    /// zeros. A pooled buffer keeps the bytes of its last message, which MPI overwrites:
    /// only the part beyond them is zeroed (a memset of 64 MiB costs about 5 ms).
    fn receive_buffer(&self, len: usize) -> Vec<u8> {
        if len < Self::POOLED_MIN {
            return heap(len);
        }
        match self.pooled(len) {
            Some(mut buffer) => {
                buffer.resize(len, 0);
                buffer
            }
            None => heap(len),
        }
    }

    /// The smallest pooled buffer of at least `capacity` bytes, with its last contents.
    fn pooled(&self, capacity: usize) -> Option<Vec<u8>> {
        let mut pool = self.pool.borrow_mut();
        let fitting = (0..pool.len())
            .filter(|&i| pool[i].capacity() >= capacity)
            .min_by_key(|&i| pool[i].capacity())?;
        Some(pool.swap_remove(fitting))
    }

    /// The timeout of each collective.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// rsmpi's world communicator, for what the [`Collective`] trait does not offer
    /// (point-to-point messages, MPI's own `MPI_Allreduce` to compare against, a
    /// sub-communicator). Collectives called on it directly have no timeout, and ranks
    /// must call them in the same order as this value's own.
    pub fn communicator(&self) -> &SimpleCommunicator {
        &self.world
    }

    fn fail(&self, function: &'static str, message: String) -> Error {
        Error::Device {
            function,
            device: format!("mpi rank {} of {}", self.world.rank(), self.world.size()),
            message,
            cause: None,
        }
    }

    /// An error when an earlier collective timed out: its request may still complete and
    /// would pair with the next collective of the other ranks.
    fn check_usable(&self, function: &'static str) -> Result<()> {
        match self.broken.get() {
            None => Ok(()),
            Some(earlier) => Err(self.fail(
                function,
                format!(
                    "a previous collective ({earlier}) timed out; the communicator is unusable"
                ),
            )),
        }
    }

    /// Tests `request` until it completes or the timeout passes. On a timeout the request
    /// is taken out of its scope and forgotten, the communicator is marked broken, and
    /// the caller must leak the request's buffers ([`Mpi::settle`]).
    fn wait<'a, D: ?Sized, S: Scope<'a>>(
        &self,
        function: &'static str,
        step: &str,
        mut request: Request<'a, D, S>,
    ) -> Result<()> {
        let start = Instant::now();
        loop {
            request = match request.test() {
                Ok(_) => return Ok(()),
                Err(pending) => pending,
            };
            let waited = start.elapsed();
            if waited >= self.timeout {
                // SAFETY: the raw request is never completed, and the caller leaks the
                // buffers MPI may still use, so nothing it points to is freed.
                let _ = unsafe { request.into_raw() };
                self.broken.set(Some(function));
                return Err(self.fail(
                    function,
                    format!(
                        "not every rank entered the {step} within the timeout of {:?}: a \
                         rank is dead, stalled, or not calling this collective (MPI does not \
                         say which); MPI cannot cancel it, so the communicator is unusable \
                         from now on",
                        self.timeout
                    ),
                ));
            }
            thread::yield_now();
        }
    }

    /// `buffers` after [`Mpi::wait`]: returned when it succeeded, leaked when it timed
    /// out, since MPI may still read or write them.
    fn settle<B>(waited: Result<()>, buffers: B) -> Result<B> {
        match waited {
            Ok(()) => Ok(buffers),
            Err(e) => {
                mem::forget(buffers);
                Err(e)
            }
        }
    }

    fn count(&self, function: &'static str, n: usize) -> Result<Count> {
        Count::try_from(n).map_err(|_| {
            self.fail(
                function,
                format!(
                    "a message of {n} bytes is longer than MPI's count type allows ({})",
                    Count::MAX
                ),
            )
        })
    }

    fn displacements(function: &'static str, counts: &[Count]) -> Result<Vec<Count>> {
        let mut at: Count = 0;
        counts
            .iter()
            .map(|&c| {
                let d = at;
                at = at.checked_add(c).ok_or_else(|| Error::Device {
                    function,
                    device: "mpi".to_owned(),
                    message: format!(
                        "the messages of one collective add up to more bytes than MPI's count type allows ({})",
                        Count::MAX
                    ),
                    cause: None,
                })?;
                Ok(d)
            })
            .collect()
    }
}

/// `len` zero bytes in a heap allocation even when `len == 0`: the pointer of an empty
/// `Vec<u8>` is `1`, which Open MPI reads as `MPI_IN_PLACE`.
/// (Zeroed by the allocator, so that pages of a large buffer are first touched when MPI
/// writes them, not by a memset before.)
fn heap(len: usize) -> Vec<u8> {
    let mut v = vec![0; len.max(1)];
    v.truncate(len);
    v
}

/// `bytes`, moved to a heap allocation when empty (see [`heap`]).
fn on_heap(bytes: Vec<u8>) -> Vec<u8> {
    if bytes.is_empty() { heap(0) } else { bytes }
}

/// MPI's counts as lengths.
fn lengths(counts: &[Count]) -> Vec<usize> {
    counts.iter().map(|&c| c as usize).collect()
}

impl Collective for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn all_gather(&self, send: &[u8]) -> Result<Vec<Vec<u8>>> {
        Ok(self.all_gather_packed(send.to_vec())?.into_messages())
    }

    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        check_all_to_all("Mpi::all_to_all", "send", send.len(), self.size())?;
        let lengths: Vec<usize> = send.iter().map(Vec::len).collect();
        Ok(self
            .all_to_all_packed(send.concat(), &lengths)?
            .into_messages())
    }

    fn all_gather_packed(&self, send: Vec<u8>) -> Result<Packed> {
        let function = "Mpi::all_gather";
        self.check_usable(function)?;
        let mine = vec![self.count(function, send.len())?];
        let mut counts = vec![0 as Count; self.size()];
        let waited = scope(|scope| {
            let request = self
                .world
                .immediate_all_gather_into(scope, &mine[..], &mut counts[..]);
            self.wait(function, "exchange of lengths", request)
        });
        let (_, counts) = Self::settle(waited, (mine, counts))?;
        let displs = Self::displacements(function, &counts)?;
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut buffer = self.receive_buffer(total);
        // Owned here: after a timeout MPI may still read it, and it is leaked.
        let outgoing = on_heap(send);
        let mut partition = PartitionMut::new(&mut buffer[..], &counts[..], &displs[..]);
        let waited = scope(|scope| {
            let request =
                self.world
                    .immediate_all_gather_varcount_into(scope, &outgoing[..], &mut partition);
            self.wait(function, "all-gather", request)
        });
        let (buffer, counts, _, outgoing) =
            Self::settle(waited, (buffer, counts, displs, outgoing))?;
        self.recycle(outgoing);
        Packed::new(function, buffer, &lengths(&counts))
    }

    fn all_to_all_packed(&self, send: Vec<u8>, lengths_out: &[usize]) -> Result<Packed> {
        let function = "Mpi::all_to_all";
        self.check_usable(function)?;
        check_all_to_all(function, "lengths", lengths_out.len(), self.size())?;
        let send = Packed::new(function, send, lengths_out)?;
        let send_counts = lengths_out
            .iter()
            .map(|&n| self.count(function, n))
            .collect::<Result<Vec<_>>>()?;
        let mut recv_counts = vec![0 as Count; self.size()];
        let waited = scope(|scope| {
            let request =
                self.world
                    .immediate_all_to_all_into(scope, &send_counts[..], &mut recv_counts[..]);
            self.wait(function, "exchange of lengths", request)
        });
        let (send_counts, recv_counts) = Self::settle(waited, (send_counts, recv_counts))?;
        let send_displs = Self::displacements(function, &send_counts)?;
        let recv_displs = Self::displacements(function, &recv_counts)?;
        let flat = on_heap(send.into_bytes());
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let mut buffer = self.receive_buffer(total);
        let outgoing = Partition::new(&flat[..], &send_counts[..], &send_displs[..]);
        let mut incoming = PartitionMut::new(&mut buffer[..], &recv_counts[..], &recv_displs[..]);
        let waited = scope(|scope| {
            let request =
                self.world
                    .immediate_all_to_all_varcount_into(scope, &outgoing, &mut incoming);
            self.wait(function, "all-to-all", request)
        });
        let (buffer, recv_counts, _, flat, ..) = Self::settle(
            waited,
            (
                buffer,
                recv_counts,
                recv_displs,
                flat,
                send_counts,
                send_displs,
            ),
        )?;
        self.recycle(flat);
        Packed::new(function, buffer, &lengths(&recv_counts))
    }

    /// A pooled buffer when one is large enough (the smallest such), else a new one.
    fn message_buffer(&self, capacity: usize) -> Vec<u8> {
        match self.pooled(capacity) {
            Some(mut buffer) => {
                buffer.clear();
                buffer
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// Keeps buffers of 1 MiB or more, the four largest.
    fn recycle(&self, buffer: Vec<u8>) {
        if buffer.capacity() < Self::POOLED_MIN {
            return;
        }
        let mut pool = self.pool.borrow_mut();
        pool.push(buffer);
        if pool.len() > Self::POOLED {
            let smallest = (0..pool.len())
                .min_by_key(|&i| pool[i].capacity())
                .expect("a full pool");
            pool.swap_remove(smallest);
        }
    }

    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        let function = "Mpi::broadcast";
        self.check_usable(function)?;
        check_root(function, root, self.size())?;
        let process = self.world.process_at_rank(root as mpi::Rank);
        let mut len = vec![data.len() as u64];
        let waited = scope(|scope| {
            let request = process.immediate_broadcast_into(scope, &mut len[..]);
            self.wait(function, "broadcast of the length", request)
        });
        let len = Self::settle(waited, len)?[0];
        let len = usize::try_from(len).map_err(|_| {
            self.fail(
                function,
                format!("rank {root} broadcasts {len} bytes, more than this process can hold"),
            )
        })?;
        self.count(function, len)?;
        data.resize(len, 0);
        if len > 0 {
            let waited = scope(|scope| {
                let request = process.immediate_broadcast_into(scope, &mut data[..]);
                self.wait(function, "broadcast", request)
            });
            // On a timeout the bytes are leaked and the caller keeps an empty vector.
            let taken = Self::settle(waited, mem::take(data))?;
            *data = taken;
        }
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        let function = "Mpi::barrier";
        self.check_usable(function)?;
        self.wait(function, "barrier", self.world.immediate_barrier())
    }
}
