//! The Mpi backend's timeout under `mpirun -np W` (`cargo xtask test` runs W = 1..4 with
//! each collective; at W = 1 there is no peer to miss and the fault is skipped with a
//! message). The collective is the first argument: `barrier` (the default), `all_gather`,
//! `all_to_all` or `broadcast`.
//!
//! The last rank skips the collective; the others fail after the timeout with an error
//! naming the collective, the timeout and their rank, and at once on every later
//! collective. The last rank then enters the collective late, so MPI completes the
//! leaked requests of the others, writing into their leaked buffers: a barrier
//! completes, and a broadcast from the late rank may (a root only sends); a collective
//! that exchanges lengths first gets them and then times out on the bytes, which no rank
//! sends any more. Every rank then finalizes MPI, with requests still pending, and exits.
//! Outside mpirun it says so and passes.
//!
//! A test without the libtest harness, like `tests/mpi.rs`: MPI wants one thread.

use std::thread;
use std::time::{Duration, Instant};

use rlgrad_core::Result;
use rlgrad_dist::{Collective, Mpi};

const TIMEOUT: Duration = Duration::from_secs(1);

/// How much later than the timeout a timed-out collective may return: the polling pause
/// is a millisecond, the rest is a scheduler on a busy machine.
const SLACK: Duration = Duration::from_millis(250);

/// Runs the collective `name` with small messages; its function's name in errors.
fn call(comm: &Mpi, name: &str) -> (&'static str, Result<()>) {
    let size = comm.size();
    match name {
        "barrier" => ("Mpi::barrier", comm.barrier()),
        "all_gather" => ("Mpi::all_gather", comm.all_gather(&[1; 8]).map(drop)),
        "all_to_all" => (
            "Mpi::all_to_all",
            comm.all_to_all(&vec![vec![2; 8]; size]).map(drop),
        ),
        // From the last rank, the one that skips: a root does not wait for the others.
        "broadcast" => ("Mpi::broadcast", comm.broadcast(size - 1, &mut vec![3; 8])),
        _ => panic!(
            "mpi_timeout: the collective `{name}` is not one of barrier, all_gather, all_to_all, broadcast"
        ),
    }
}

fn main() {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() && std::env::var_os("PMI_SIZE").is_none()
    {
        println!(
            "mpi_timeout: skipped, not started by mpirun or srun (cargo xtask test runs it under mpirun -np 1..4)"
        );
        return;
    }
    let name = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "barrier".to_owned());
    let zero = Mpi::with_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(zero.argument(), Some("timeout"));
    let comm = Mpi::with_timeout(TIMEOUT).expect("MPI initializes");
    assert_eq!(comm.timeout(), TIMEOUT);
    let (rank, size) = (comm.rank(), comm.size());
    // A collective that every rank enters meets no timeout.
    let (function, every) = call(&comm, &name);
    every.unwrap_or_else(|e| panic!("{function} on every rank: {e}"));
    if size == 1 {
        println!("mpi_timeout W=1 {name}: a missing rank needs W >= 2; skipped");
        return;
    }
    let start = Instant::now();
    let late = rank == size - 1;
    if late {
        thread::sleep(TIMEOUT + SLACK);
    }
    let (_, result) = call(&comm, &name);
    let took = start.elapsed();
    if late {
        // The others' leaked requests complete with the late rank's: a barrier completes,
        // and so do the lengths of the other collectives; their bytes then never come
        // (the others have left), except at a broadcast's root, which only sends.
        match (name.as_str(), result) {
            ("barrier" | "broadcast", Ok(())) => {}
            (_, Err(e))
                if e.to_string().contains("within the timeout")
                    && !e.to_string().contains("length") => {}
            (_, other) => panic!("mpi_timeout: {function} entered late gave {other:?}"),
        }
        return;
    }
    let text = result
        .expect_err("the last rank skips the collective")
        .to_string();
    for part in [
        function.to_owned(),
        format!("mpi rank {rank} of {size}"),
        format!("within the timeout of {TIMEOUT:?}"),
        "unusable".to_owned(),
    ] {
        assert!(text.contains(&part), "`{part}` not in: {text}");
    }
    // Not before the timeout; how long after depends on the machine (CI oversubscribes
    // its cores), so the time is printed, not asserted.
    assert!(took >= TIMEOUT, "took {took:?}");
    let (_, after) = call(&comm, "barrier");
    let after = after.expect_err("the communicator is broken");
    let expected =
        format!("a previous collective ({function}) timed out; the communicator is unusable");
    assert!(after.to_string().contains(&expected), "{after}");
    if rank == 0 {
        println!(
            "mpi_timeout W={size} {name}: the skipped collective fails after {took:?} (timeout \
             {TIMEOUT:?}), later collectives at once ... ok"
        );
        println!("mpi_timeout W={size} {name}: a zero timeout is refused before MPI starts ... ok");
        println!("mpi_timeout W={size} {name}: 2 passed, 0 failed");
    }
}
