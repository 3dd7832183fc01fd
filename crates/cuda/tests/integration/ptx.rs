//! Every kernel source compiles through NVRTC, wherever `libnvrtc` can be loaded: no GPU
//! is needed, so a syntax error in a `.cu` file fails CI (`.ci/run` installs NVIDIA's
//! `nvidia-cuda-nvrtc` wheel for this). Checked here without a GPU: no family but matmul
//! has a fused multiply-add (FMA contraction is off), every kernel is in the image, and
//! ptxas's report for the H100's cubin shows no kernel using local memory (no stack
//! frame, no spill). Without NVRTC the tests print that they were skipped (or fail, with
//! `RLGRAD_REQUIRE_GPU=1`).

use rlgrad_cuda::{Arch, Family, Image, Target, nvrtc_available};

fn nvrtc_or_skip() -> bool {
    match nvrtc_available() {
        Ok(()) => true,
        Err(why) => {
            rlgrad_cuda::skip("NVRTC", &why);
            false
        }
    }
}

#[test]
fn every_kernel_source_compiles_to_ptx() {
    if !nvrtc_or_skip() {
        return;
    }
    // The oldest architecture NVRTC 13 targets, and the H100's with the version directive
    // pinned to what a CUDA 13.0 driver accepts.
    for target in [
        Target::Ptx {
            arch: Arch::from_number(75),
            isa: None,
        },
        Target::Ptx {
            arch: Arch::from_number(90),
            isa: Some((9, 0)),
        },
    ] {
        for family in Family::ALL {
            let compiled = family
                .compile(target)
                .unwrap_or_else(|e| panic!("{} for {target:?}: {e}", family.name()));
            let Image::Ptx(ptx) = compiled.image else {
                panic!("{target:?} gave a cubin");
            };
            if let Target::Ptx { isa: Some(_), .. } = target {
                assert!(ptx.contains("\n.version 9.0\n"), "{}", family.name());
            }
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

#[test]
fn every_kernel_compiles_to_a_cubin_without_local_memory() {
    if !nvrtc_or_skip() {
        return;
    }
    let (mut report, mut using_local_memory) = (Vec::new(), Vec::new());
    for family in Family::ALL {
        let target = Target::Cubin(Arch::from_number(90));
        let compiled = family
            .compile(target)
            .unwrap_or_else(|e| panic!("{} for sm_90: {e}", family.name()));
        assert!(matches!(&compiled.image, Image::Cubin(b) if b.starts_with(b"\x7fELF")));
        let resources = compiled.resources();
        for kernel in family.kernels() {
            for suffix in ["f32", "f64"] {
                let name = format!("{kernel}_{suffix}");
                let found = resources
                    .iter()
                    .find(|r| r.kernel == name)
                    .unwrap_or_else(|| panic!("no ptxas report for {name}:\n{}", compiled.log));
                report.push(format!(
                    "{name}: {} registers, {} B stack, {} B spilled, {} B shared",
                    found.registers, found.stack_frame, found.spill_stores, found.shared
                ));
                if (found.stack_frame, found.spill_stores, found.spill_loads) != (0, 0, 0) {
                    using_local_memory.push(name);
                }
            }
        }
    }
    println!("sm_90 cubins:\n  {}", report.join("\n  "));
    assert!(
        using_local_memory.is_empty(),
        "kernels using local memory on sm_90: {using_local_memory:?}"
    );
}
