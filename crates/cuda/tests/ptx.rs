//! Every kernel source compiles through NVRTC, wherever `libnvrtc` can be loaded: no GPU
//! is needed, so a syntax error in a `.cu` file fails CI (`.ci/run` installs NVIDIA's
//! `nvidia-cuda-nvrtc` wheel for this), and no family but matmul has a fused multiply-add
//! (FMA contraction is off). Without NVRTC the test prints that it was skipped (or fails, with
//! `RLGRAD_REQUIRE_GPU=1`).

use rlgrad_cuda::{Family, nvrtc_available};

#[test]
fn every_kernel_source_compiles_to_ptx() {
    if let Err(why) = nvrtc_available() {
        return rlgrad_cuda::skip("NVRTC", &why);
    }
    // The oldest architecture NVRTC 13 targets and the H100's.
    for arch in [None, Some("compute_90")] {
        for family in Family::ALL {
            let ptx = family
                .compile(arch)
                .unwrap_or_else(|e| panic!("{} for {arch:?}: {e}", family.name()));
            // FMA contraction is off: only matmul's canonical formula has fused multiply-adds.
            let fused = ptx.contains("fma.rn");
            assert_eq!(
                fused,
                family == Family::Matmul,
                "{}: fma.rn in PTX",
                family.name()
            );
            for kernel in family.kernels() {
                for suffix in ["f32", "f64"] {
                    let entry = format!(".entry {kernel}_{suffix}(");
                    assert!(ptx.contains(&entry), "{}.cu lacks {entry}", family.name());
                }
            }
        }
    }
    println!("PTX: every kernel source compiled by NVRTC");
}
