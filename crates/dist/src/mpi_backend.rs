//! The `Mpi` backend: one process per rank on the system MPI, through rsmpi.

use std::fmt;

use mpi::Count;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use rlgrad_core::{Error, Result};

use crate::collective::{Collective, check_all_to_all, check_root};

/// The world communicator of an MPI job (feature `mpi`): one process per rank, started by
/// `mpirun -np W program` (or Slurm's `srun`).
///
/// Messages are bytes (`MPI_BYTE`) moved by `MPI_Allgatherv`, `MPI_Alltoallv`,
/// `MPI_Bcast` and `MPI_Barrier`, each preceded by an exchange of the lengths; MPI adds no
/// floats, so the results are those of every other backend. MPI is finalized when the
/// value is dropped. MPI's collectives block without a timeout: when a rank dies, Open
/// MPI's `mpirun` ends the whole job (its default), so the others do not hang; a rank
/// that stalls without dying stalls the job.
///
/// ```no_run
/// use rlgrad_dist::{Collective, Mpi};
/// let comm = Mpi::init()?;
/// println!("rank {} of {}", comm.rank(), comm.size());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Mpi {
    world: SimpleCommunicator,
    // Dropped after `world`: finalizes MPI.
    _universe: Universe,
}

impl fmt::Debug for Mpi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.world.rank())
            .field("size", &self.world.size())
            .finish_non_exhaustive()
    }
}

impl Mpi {
    /// Initializes MPI and returns the world communicator. An error when MPI was
    /// initialized already in this process (one `Mpi` per process).
    pub fn init() -> Result<Mpi> {
        let universe = mpi::initialize().ok_or_else(|| Error::Device {
            function: "Mpi::init",
            device: "mpi".to_owned(),
            message: "MPI is initialized already in this process (one Mpi per process)".to_owned(),
        })?;
        Ok(Mpi {
            world: universe.world(),
            _universe: universe,
        })
    }

    fn count(&self, function: &'static str, n: usize) -> Result<Count> {
        Count::try_from(n).map_err(|_| Error::Device {
            function,
            device: format!("mpi rank {}", self.world.rank()),
            message: format!(
                "a message of {n} bytes is longer than MPI's count type allows ({})",
                Count::MAX
            ),
        })
    }

    /// Receives the blocks `counts` from every rank into one buffer and splits it.
    fn split(buffer: Vec<u8>, counts: &[Count]) -> Vec<Vec<u8>> {
        let mut at = 0;
        counts
            .iter()
            .map(|&c| {
                let c = c as usize;
                at += c;
                buffer[at - c..at].to_vec()
            })
            .collect()
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
                })?;
                Ok(d)
            })
            .collect()
    }
}

/// `len` zero bytes in a heap allocation even when `len == 0`: the pointer of an empty
/// `Vec<u8>` is `1`, which Open MPI reads as `MPI_IN_PLACE`.
fn heap(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(1));
    v.resize(len, 0);
    v
}

impl Collective for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn all_gather(&self, send: &[u8]) -> Result<Vec<Vec<u8>>> {
        let function = "Mpi::all_gather";
        let mine = self.count(function, send.len())?;
        let mut counts = vec![0 as Count; self.size()];
        self.world.all_gather_into(&mine, &mut counts[..]);
        let displs = Self::displacements(function, &counts)?;
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut buffer = heap(total);
        let send_copy;
        let send = if send.is_empty() {
            send_copy = heap(0);
            &send_copy[..]
        } else {
            send
        };
        {
            let mut partition = PartitionMut::new(&mut buffer[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(send, &mut partition);
        }
        Ok(Self::split(buffer, &counts))
    }

    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let function = "Mpi::all_to_all";
        check_all_to_all(function, send, self.size())?;
        let send_counts = send
            .iter()
            .map(|m| self.count(function, m.len()))
            .collect::<Result<Vec<_>>>()?;
        let mut recv_counts = vec![0 as Count; self.size()];
        self.world
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let send_displs = Self::displacements(function, &send_counts)?;
        let recv_displs = Self::displacements(function, &recv_counts)?;
        let mut flat = heap(0);
        for m in send {
            flat.extend_from_slice(m);
        }
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let mut buffer = heap(total);
        {
            let outgoing = Partition::new(&flat[..], &send_counts[..], &send_displs[..]);
            let mut incoming =
                PartitionMut::new(&mut buffer[..], &recv_counts[..], &recv_displs[..]);
            self.world
                .all_to_all_varcount_into(&outgoing, &mut incoming);
        }
        Ok(Self::split(buffer, &recv_counts))
    }

    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        let function = "Mpi::broadcast";
        check_root(function, root, self.size())?;
        let process = self.world.process_at_rank(root as mpi::Rank);
        let mut len = data.len() as u64;
        process.broadcast_into(&mut len);
        let len = usize::try_from(len).map_err(|_| Error::Device {
            function,
            device: format!("mpi rank {}", self.world.rank()),
            message: format!("rank {root} broadcasts {len} bytes, more than this process can hold"),
        })?;
        self.count(function, len)?;
        data.resize(len, 0);
        if len > 0 {
            process.broadcast_into(&mut data[..]);
        }
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        self.world.barrier();
        Ok(())
    }
}
