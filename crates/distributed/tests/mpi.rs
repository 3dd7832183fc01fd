//! The Mpi backend under `mpirun -np W` (W = 1..4 in `cargo xtask test`): collectives,
//! the microbatch all-reduce, the statistics and a short training run give the bits of
//! the single-worker computation, which does not depend on W. Run outside mpirun (plain
//! `cargo test --features mpi`), it says so and passes: a single process proves nothing.
//!
//! A test without the libtest harness: MPI wants one thread to initialize it and make its
//! calls. Rank 0 prints each check and `mpi W=<size>: N passed, 0 failed`; a failure
//! ends the job with a non-zero status.

mod common;

use common::{accumulate, bits32, data, train_accumulating, train_distributed, value};
use rlgrad_core::{DType, Par, Result, reduce};
use rlgrad_dist::{
    Collective, Mpi, ParamSpec, all_reduce, check_same_params, global_mean_var, global_standardize,
    owned_range,
};

fn collectives(comm: &Mpi) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let gathered = comm.all_gather(&vec![rank as u8; rank])?;
    assert_eq!(gathered.len(), size);
    for (from, g) in gathered.iter().enumerate() {
        assert_eq!(g, &vec![from as u8; from]);
    }
    let sent: Vec<Vec<u8>> = (0..size)
        .map(|to| vec![(rank * 10 + to) as u8; to + 1])
        .collect();
    let got = comm.all_to_all(&sent)?;
    for (from, g) in got.iter().enumerate() {
        assert_eq!(g, &vec![(from * 10 + rank) as u8; rank + 1]);
    }
    // The packed forms, which the large reductions use, deliver the same messages.
    let lengths: Vec<usize> = sent.iter().map(Vec::len).collect();
    assert_eq!(
        comm.all_to_all_packed(sent.concat(), &lengths)?
            .into_messages(),
        got
    );
    assert_eq!(
        comm.all_gather_packed(vec![rank as u8; rank])?
            .into_messages(),
        gathered
    );
    // Refused before any rank sends a byte, so every rank gets the same error.
    let count = comm.all_to_all_packed(Vec::new(), &vec![0; size + 1]);
    assert_eq!(count.unwrap_err().argument(), Some("lengths"));
    let sum = comm.all_to_all_packed(vec![0; size + 1], &vec![1; size]);
    assert_eq!(sum.unwrap_err().argument(), Some("lengths"));
    let mut data = if rank == size - 1 {
        vec![4, 5, 6]
    } else {
        Vec::new()
    };
    comm.broadcast(size - 1, &mut data)?;
    assert_eq!(data, [4, 5, 6]);
    comm.barrier()?;
    assert_eq!(
        comm.broadcast(size, &mut data).unwrap_err().argument(),
        Some("root")
    );
    Ok(())
}

fn microbatch_sums(comm: &Mpi) -> Result<()> {
    // The last two send messages of more than a MiB, which the backend keeps and reuses:
    // the second writes into the first's buffers, whose stale bytes must not show.
    for (microbatches, len) in [(13, 40), (12, 9000), (7, 20000), (6, 300_000), (5, 300_000)] {
        let leaf = |i: usize| -> Vec<f32> { (0..len).map(|j| value(i as u64, j)).collect() };
        let got = all_reduce(comm, microbatches, len, |i| Ok(leaf(i)))?;
        assert_eq!(
            bits32(&got),
            bits32(&accumulate(microbatches, leaf)),
            "M={microbatches} len={len}"
        );
    }
    Ok(())
}

fn statistics(comm: &Mpi) -> Result<()> {
    let x: Vec<f64> = (0..10_007).map(|i| f64::from(value(9, i)) * 3.0).collect();
    let mine = &x[owned_range(x.len(), comm.size(), comm.rank())?];
    let (m, v) = global_mean_var(comm, mine, 1)?;
    let (em, ev) = reduce::mean_var(&x, 1, Par::Seq)?;
    assert_eq!((m.to_bits(), v.to_bits()), (em.to_bits(), ev.to_bits()));
    let standardized = global_standardize(comm, mine, 1e-8, 0)?;
    let whole = rlgrad_returns::standardize(&x, 1e-8, 0)?;
    let at = owned_range(x.len(), comm.size(), comm.rank())?.start;
    for (k, s) in standardized.iter().enumerate() {
        assert_eq!(s.to_bits(), whole[at + k].to_bits());
    }
    Ok(())
}

fn training(comm: &Mpi) -> Result<()> {
    let data = data();
    assert_eq!(train_distributed(comm, &data)?, train_accumulating(&data)?);
    Ok(())
}

fn mismatched_parameters(comm: &Mpi) -> Result<()> {
    if comm.size() == 1 {
        return Ok(());
    }
    let last = comm.size() - 1;
    let bias = if comm.rank() == last { 3 } else { 4 };
    let specs = [
        ParamSpec::new("fc.weight", [4, 2]),
        ParamSpec::new("fc.bias", [bias]),
    ];
    let err = check_same_params(comm, &specs, DType::F32).unwrap_err();
    let expected = format!("rank {last}'s `fc.bias` [3]");
    assert!(err.to_string().contains(&expected), "{err}");
    Ok(())
}

/// One check of the job, run by every rank.
type Check = fn(&Mpi) -> Result<()>;

fn main() {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() && std::env::var_os("PMI_SIZE").is_none()
    {
        println!(
            "mpi: skipped, not started by mpirun or srun (cargo xtask test runs it under mpirun -np 1..4)"
        );
        return;
    }
    let comm = Mpi::init().expect("MPI initializes");
    let checks: [(&str, Check); 5] = [
        ("collectives", collectives),
        ("microbatch sums equal accumulation", microbatch_sums),
        ("statistics equal the single-process ones", statistics),
        ("training equals accumulation", training),
        ("mismatched parameters name the rank", mismatched_parameters),
    ];
    // A failure ends this process with a non-zero status, and mpirun then ends the job:
    // carrying on would leave the other ranks waiting in a collective.
    for (name, check) in checks {
        if let Err(e) = check(&comm) {
            eprintln!("mpi rank {}: {name}: {e}", comm.rank());
            std::process::exit(1);
        }
        comm.barrier().expect("barrier");
        if comm.rank() == 0 {
            println!("mpi W={}: {name} ... ok", comm.size());
        }
    }
    if comm.rank() == 0 {
        println!("mpi W={}: {} passed, 0 failed", comm.size(), checks.len());
    }
}
