//! The cross-device golden test on the GPU: every kernel family of
//! [`rlgrad_testkit::golden`] through the Cuda device, in `f32` and `f64`, must hash to the
//! committed [`rlgrad_testkit::golden::KERNEL_HASHES`], the hashes the Cpu gives at every
//! instruction set and thread count and on aarch64 (`rlgrad-core`'s `tests/golden.rs`;
//! only its slice-level `reduce_slices` family has no device version). Without a GPU the
//! test prints that it was skipped (or fails, with `RLGRAD_REQUIRE_GPU=1`).

use rlgrad_core::Float;
use rlgrad_cuda::Cuda;
use rlgrad_testkit::golden::{self, KERNEL_HASHES};

/// The `(family, dtype, hash)` rows of every family in `T` on `gpu`.
fn rows<T: Float>(gpu: &Cuda, dtype: &'static str) -> Vec<(&'static str, &'static str, u64)> {
    golden::kernel_families::<T, _>(gpu)
        .unwrap_or_else(|e| panic!("a kernel failed on {dtype}: {e}"))
        .into_iter()
        .map(|(family, hash)| (family, dtype, hash))
        .collect()
}

#[test]
fn every_kernel_family_gives_the_committed_bits_on_the_gpu() {
    let gpu = match Cuda::new(0) {
        Ok(gpu) => gpu,
        Err(why) => {
            rlgrad_cuda::skip("GPU", &why);
            return;
        }
    };
    let mut got = rows::<f32>(&gpu, "f32");
    got.extend(rows::<f64>(&gpu, "f64"));
    for (family, dtype, hash) in &got {
        println!("golden {family} {dtype}: {hash:#018x}");
    }
    let differing = golden::mismatches(KERNEL_HASHES, &got);
    assert!(
        differing.is_empty(),
        "{} of {} golden hashes differ on {} (a determinism bug unless the Cpu's hashes \
         changed on purpose, see rlgrad_testkit::golden):\n{}",
        differing.len(),
        got.len(),
        gpu.model(),
        differing.join("\n")
    );
}
