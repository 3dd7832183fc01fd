//! The `Nccl` backend on a GPU (feature `nccl`; the GPU bundle runs these tests): the
//! collectives' semantics and errors at W = 1, through both constructors, the canonical
//! all-reduce and a short Adam training with the bits of one worker's accumulation, and
//! two ranks as threads: on two GPUs when the machine has them, else on one GPU twice,
//! which NCCL refuses (it allows one rank per GPU; the test then says it did not run, with
//! NCCL's reason), and the timeout: a rank that never joins makes the joining one fail after
//! its timeout, and the GPU stays usable. Without a GPU or the NCCL library each test prints
//! that it was skipped (or fails, with `RLGRAD_REQUIRE_GPU=1`).

use std::time::{Duration, Instant};

use rlgrad_dist::{Collective, Nccl, NcclId, all_reduce};

mod common;

use common::{accumulate, bits32, data, train_accumulating, train_distributed, value};

/// The ranks of `Nccl::local(devices)`, or `None` after the skip line.
fn local_or_skip(devices: &[usize]) -> Option<Vec<Nccl>> {
    match Nccl::local(devices) {
        Ok(ranks) => Some(ranks),
        Err(why) => {
            rlgrad_cuda::skip("GPU", &why);
            None
        }
    }
}

/// `f(rank)` on every rank, each on a thread of its own (NCCL's collectives return once
/// every rank has called them), in rank order.
fn on_threads<R: Send>(
    ranks: Vec<Nccl>,
    f: impl Fn(&Nccl) -> rlgrad_core::Result<R> + Sync,
) -> Vec<R> {
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|comm| scope.spawn(move || f(&comm)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank panicked").expect("a rank failed"))
            .collect()
    })
}

/// What every backend must do with bytes, checked on `comm` (any world size): the
/// results depend only on the ranks' messages.
fn check_collectives(comm: &Nccl) -> rlgrad_core::Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let message =
        |r: usize| -> Vec<u8> { (0..(r * 3 + 1) % 7).map(|i| (r * 16 + i) as u8).collect() };
    let gathered = comm.all_gather(&message(rank))?;
    assert_eq!(gathered, (0..size).map(message).collect::<Vec<_>>());
    assert_eq!(comm.all_gather(&[])?, vec![Vec::<u8>::new(); size]);
    // Rank r sends `[r, to, ...]` of length (r + to) % 4 to rank `to` (empty ones too).
    let letter = |from: usize, to: usize| -> Vec<u8> {
        [from as u8, to as u8, 9, 9][..(from + to) % 4].to_vec()
    };
    let received = comm.all_to_all(&(0..size).map(|to| letter(rank, to)).collect::<Vec<_>>())?;
    assert_eq!(
        received,
        (0..size).map(|from| letter(from, rank)).collect::<Vec<_>>()
    );
    for root in 0..size {
        let mut data = if rank == root {
            vec![7u8; 1000 + root]
        } else {
            vec![1, 2]
        };
        comm.broadcast(root, &mut data)?;
        assert_eq!(data, vec![7u8; 1000 + root]);
        let mut empty = if rank == root {
            Vec::new()
        } else {
            vec![5u8; 3]
        };
        comm.broadcast(root, &mut empty)?;
        assert!(empty.is_empty());
    }
    comm.barrier()?;
    // Bad arguments fail on every rank before any communication.
    let message = comm.broadcast(size, &mut vec![1]).unwrap_err().to_string();
    assert!(message.contains("Nccl::broadcast"), "{message}");
    let message = comm
        .all_to_all(&vec![vec![1u8]; size + 1])
        .unwrap_err()
        .to_string();
    assert!(message.contains("Nccl::all_to_all"), "{message}");
    Ok(())
}

/// The canonical all-reduce on `comm` for a few microbatch counts and lengths (the sharded
/// and the replicated routes) must give single-worker accumulation's bits.
fn check_all_reduce(comm: &Nccl) -> rlgrad_core::Result<()> {
    for (microbatches, len) in [(8, 5000), (13, 40), (6, 20000)] {
        let leaf = |i: usize| -> Vec<f32> { (0..len).map(|j| value(i as u64, j)).collect() };
        let got = all_reduce(comm, microbatches, len, |i| Ok(leaf(i)))?;
        assert_eq!(
            bits32(&got),
            bits32(&accumulate(microbatches, leaf)),
            "M={microbatches} len={len} W={} rank {}",
            comm.size(),
            comm.rank()
        );
    }
    Ok(())
}

#[test]
fn one_rank_moves_bytes_as_every_backend_and_trains_to_the_bits_of_accumulation() {
    let Some(mut ranks) = local_or_skip(&[0]) else {
        return;
    };
    let comm = ranks.pop().expect("one rank");
    assert_eq!((comm.rank(), comm.size(), comm.device()), (0, 1, 0));
    assert_eq!(comm.timeout(), Nccl::DEFAULT_TIMEOUT);
    check_collectives(&comm).unwrap();
    check_all_reduce(&comm).unwrap();
    let data = data();
    assert_eq!(
        train_distributed(&comm, &data).unwrap(),
        train_accumulating(&data).unwrap()
    );
    // The multi-process constructor, joined by one rank.
    let id = NcclId::new().unwrap();
    let joined = Nccl::join(0, 0, 1, &NcclId::from_hex(&id.to_hex()).unwrap()).unwrap();
    check_collectives(&joined).unwrap();
    let message = Nccl::join(0, 1, 1, &id).unwrap_err().to_string();
    assert!(message.contains("Nccl::join"), "{message}");
}

#[test]
fn two_ranks_on_threads_give_the_bits_of_one_worker() {
    // Two GPUs where there are two; else GPU 0 twice, which NCCL may refuse.
    let ranks = match Nccl::local(&[0, 1]) {
        Ok(ranks) => ranks,
        Err(two_gpus) => match Nccl::local(&[0, 0]) {
            Ok(ranks) => ranks,
            Err(one_gpu) => {
                if Nccl::local(&[0]).is_err() {
                    rlgrad_cuda::skip("GPU", &one_gpu);
                } else {
                    // Not run, whatever RLGRAD_REQUIRE_GPU says: it promises a GPU, not two.
                    let why = format!(
                        "NCCL runs W = 2 on neither two GPUs ({two_gpus}) nor one GPU twice \
                         ({one_gpu})"
                    );
                    if let Ok(line) = rlgrad_cuda::skip_outcome(false, "second GPU", &why) {
                        println!("{line}");
                    }
                }
                return;
            }
        },
    };
    let data = data();
    let expected = train_accumulating(&data).unwrap();
    let fingerprints = on_threads(ranks, |comm| {
        check_collectives(comm)?;
        check_all_reduce(comm)?;
        train_distributed(comm, &data)
    });
    assert_eq!(fingerprints, vec![expected; 2]);
}

#[test]
fn a_rank_that_never_joins_times_out_and_the_gpu_stays_usable() {
    let Some(mut ranks) = local_or_skip(&[0]) else {
        return;
    };
    let other = ranks.pop().expect("one rank");
    let timeout = Duration::from_millis(1500);
    // Rank 0 of 2 joins; rank 1 never does.
    let id = NcclId::new().unwrap();
    let start = Instant::now();
    let message = Nccl::join_with_timeout(0, 0, 2, &id, timeout)
        .unwrap_err()
        .to_string();
    let waited = start.elapsed();
    println!("the join gave up after {waited:?} (timeout {timeout:?}): {message}");
    assert!(
        message.contains("Nccl::join")
            && message.contains("initialization")
            && message.contains("1.5s")
            && message.contains("rank 0 of 2"),
        "{message}"
    );
    assert!(
        waited >= timeout && waited < timeout + Duration::from_secs(30),
        "{waited:?}"
    );
    // Another communicator on the same GPU is untouched, and a new one works.
    check_collectives(&other).unwrap();
    let fresh = Nccl::local_with_timeout(&[0], Duration::from_secs(60))
        .unwrap()
        .pop()
        .expect("one rank");
    assert_eq!(fresh.timeout(), Duration::from_secs(60));
    check_collectives(&fresh).unwrap();
}

#[test]
fn bad_arguments_are_errors_without_a_gpu_too() {
    let message = Nccl::local(&[]).unwrap_err().to_string();
    assert!(message.contains("Nccl::local"), "{message}");
    let message = Nccl::local_with_timeout(&[0], Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("Nccl::local") && message.contains("timeout"),
        "{message}"
    );
    let zeros = NcclId::from_hex(&"00".repeat(128)).unwrap();
    let message = Nccl::join_with_timeout(0, 0, 1, &zeros, Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("Nccl::join") && message.contains("timeout"),
        "{message}"
    );
    let message = Nccl::join(0, 2, 2, &zeros).unwrap_err().to_string();
    assert!(
        message.contains("Nccl::join") && message.contains("rank"),
        "{message}"
    );
    let message = NcclId::from_hex("12ab").unwrap_err().to_string();
    assert!(message.contains("NcclId::from_hex"), "{message}");
}
