//! `Nccl::from_mpi` (features `mpi` and `nccl`) under `mpirun -np W`, one rank per GPU:
//! every rank joins the NCCL communicator with its MPI rank, size and timeout, and the
//! canonical all-reduce and a short Adam training over NCCL give single-worker
//! accumulation's bits. With fewer GPUs than ranks, NCCL refuses ranks sharing a GPU: every
//! rank must then fail promptly with NCCL's reason (never hang), and the run says that it
//! did not run. The GPU bundle runs it at W = 1 and 2 (`cargo xtask gpu-build`). Without a GPU or the NCCL library it prints that it was skipped (or fails,
//! with `RLGRAD_REQUIRE_GPU=1`).
//!
//! A test without the libtest harness: MPI wants one thread to initialize it and make its
//! calls.

mod common;

use std::time::Duration;

use common::{accumulate, bits32, data, train_accumulating, train_distributed, value};
use rlgrad_dist::{Collective, Mpi, Nccl, all_reduce};

fn main() {
    // `Nccl::local` checks that the libraries load before cudarc is asked anything.
    let gpus = match Nccl::local(&[0]) {
        Ok(_) => cudarc::driver::CudaContext::device_count().map_or(1, |count| count as usize),
        Err(why) => {
            rlgrad_cuda::skip("GPU", &why);
            return;
        }
    };
    let timeout = Duration::from_secs(60);
    let mpi = Mpi::with_timeout(timeout).expect("MPI initializes");
    let (rank, size) = (mpi.rank(), mpi.size());
    let comm = match Nccl::from_mpi(&mpi, rank % gpus) {
        Ok(comm) => comm,
        Err(refused) if size > gpus => {
            // NCCL allows one rank per GPU (unless told otherwise): the ranks sharing one
            // must fail, with its reason, rather than hang.
            let message = refused.to_string();
            assert!(message.contains("Nccl::join"), "{message}");
            if rank == 0 {
                // Not run, whatever RLGRAD_REQUIRE_GPU says: it promises a GPU, not two.
                let why = format!(
                    "W = {size} on {gpus} GPU(s): every rank failed at once, as NCCL allows \
                     one rank per GPU: {message}"
                );
                if let Ok(line) = rlgrad_cuda::skip_outcome(false, "GPU per rank", &why) {
                    println!("{line}");
                }
            }
            return;
        }
        Err(failed) => panic!("rank {rank} of {size} could not join: {failed}"),
    };
    assert_eq!(
        (comm.rank(), comm.size(), comm.timeout()),
        (rank, size, timeout)
    );
    let gathered = comm.all_gather(&[rank as u8; 3]).expect("all_gather");
    assert_eq!(
        gathered,
        (0..size).map(|r| vec![r as u8; 3]).collect::<Vec<_>>()
    );
    for (microbatches, len) in [(8, 5000), (13, 40)] {
        let leaf = |i: usize| -> Vec<f32> { (0..len).map(|j| value(i as u64, j)).collect() };
        let got = all_reduce(&comm, microbatches, len, |i| Ok(leaf(i))).expect("all_reduce");
        assert_eq!(bits32(&got), bits32(&accumulate(microbatches, leaf)));
    }
    let data = data();
    assert_eq!(
        train_distributed(&comm, &data).expect("training"),
        train_accumulating(&data).expect("accumulation")
    );
    comm.barrier().expect("barrier");
    if rank == 0 {
        println!("nccl_mpi W={size}: passed (from_mpi, all_gather, all_reduce, training)");
    }
}
