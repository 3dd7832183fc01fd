//! The Mpi backend's timeout under `mpirun -np W` (`cargo xtask test` runs W = 1..4; at
//! W = 1 there is no peer to miss and the fault is skipped with a message): the last rank
//! skips a barrier, the others fail after the timeout with an error naming the
//! collective, the timeout and their rank, and at once on every later collective; the
//! last rank then enters the barrier late, which completes the leaked requests, so every
//! rank finalizes MPI and exits cleanly. Outside mpirun it says so and passes.
//!
//! A test without the libtest harness, like `tests/mpi.rs`: MPI wants one thread.

use std::thread;
use std::time::{Duration, Instant};

use rlgrad_dist::{Collective, Mpi};

const TIMEOUT: Duration = Duration::from_secs(1);

/// How much later than the timeout a timed-out collective may return: the polling pause
/// is a millisecond, the rest is a scheduler on a busy machine.
const SLACK: Duration = Duration::from_millis(250);

fn main() {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() && std::env::var_os("PMI_SIZE").is_none()
    {
        println!(
            "mpi_timeout: skipped, not started by mpirun or srun (cargo xtask test runs it under mpirun -np 1..4)"
        );
        return;
    }
    let zero = Mpi::with_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(zero.argument(), Some("timeout"));
    let comm = Mpi::with_timeout(TIMEOUT).expect("MPI initializes");
    assert_eq!(comm.timeout(), TIMEOUT);
    let (rank, size) = (comm.rank(), comm.size());
    // A collective that every rank enters meets no timeout.
    assert_eq!(
        comm.all_gather(&[rank as u8]).expect("all-gather").len(),
        size
    );
    if size == 1 {
        println!("mpi_timeout W=1: a missing rank needs W >= 2; skipped");
        return;
    }
    let last = size - 1;
    if rank == last {
        // Enters late: the others' leaked barrier requests complete, so that MPI_Finalize
        // does not wait on them.
        thread::sleep(TIMEOUT + SLACK);
        comm.barrier().expect("the late barrier completes");
    } else {
        let start = Instant::now();
        let err = comm.barrier().expect_err("the last rank skips the barrier");
        let took = start.elapsed();
        let text = err.to_string();
        for part in [
            "Mpi::barrier".to_owned(),
            format!("mpi rank {rank} of {size}"),
            format!("within the timeout of {TIMEOUT:?}"),
            "unusable".to_owned(),
        ] {
            assert!(text.contains(&part), "`{part}` not in: {text}");
        }
        assert!(took >= TIMEOUT && took < TIMEOUT + SLACK, "took {took:?}");
        let start = Instant::now();
        let again = comm
            .all_gather(&[1])
            .expect_err("the communicator is broken");
        assert!(start.elapsed() < Duration::from_millis(10));
        assert!(
            again.to_string().contains(
                "a previous collective (Mpi::barrier) timed out; the communicator is unusable"
            ),
            "{again}"
        );
        if rank == 0 {
            println!(
                "mpi_timeout W={size}: a skipped barrier fails after {took:?} (timeout {TIMEOUT:?}), later collectives at once ... ok"
            );
        }
    }
    if rank == 0 {
        println!("mpi_timeout W={size}: a zero timeout is refused before MPI starts ... ok");
        println!("mpi_timeout W={size}: 2 passed, 0 failed");
    }
}
