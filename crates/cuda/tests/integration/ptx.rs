//! Every kernel source compiles through NVRTC, wherever `libnvrtc` can be loaded: no GPU
//! is needed, so a syntax error in a `.cu` file fails CI (`.ci/run` installs NVIDIA's
//! `nvidia-cuda-nvrtc` wheel for this). Checked here without a GPU: no family but matmul
//! has a fused multiply-add (FMA contraction is off), every kernel is in the image, and
//! ptxas's report for the H100's cubin shows no kernel using local memory (no stack
//! frame, no spill). Without NVRTC the tests print that they were skipped (or fail, with
//! `RLGRAD_REQUIRE_GPU=1`).

use rlgrad_cuda::{Arch, Family, Image, Target, nvrtc_available};

/// `compile` of every family, on as many threads as the machine has (NVRTC and ptxas take
/// most of CI's time in this crate), the results in `Family::ALL`'s order.
fn each_family<R: Send>(compile: impl Fn(Family) -> R + Sync) -> Vec<(Family, R)> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads.min(Family::ALL.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&family) = Family::ALL.get(i) else {
                        break;
                    };
                    let result = compile(family);
                    done.lock()
                        .expect("no compile panicked")
                        .push((i, family, result));
                }
            });
        }
    });
    let mut done = done.into_inner().expect("no compile panicked");
    done.sort_by_key(|&(i, _, _)| i);
    done.into_iter()
        .map(|(_, family, result)| (family, result))
        .collect()
}

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
    // Every family for the oldest architecture NVRTC 13 targets; the H100's PTX with the
    // version directive pinned to what a CUDA 13.0 driver accepts, for one family (the
    // directive's rewrite is the same for all; the cubin test compiles them all for sm_90).
    let oldest = Target::Ptx {
        arch: Arch::from_number(75),
        isa: None,
    };
    let pinned = Target::Ptx {
        arch: Arch::from_number(90),
        isa: Some((9, 0)),
    };
    let ptx_of = |family: Family, target: Target| {
        let compiled = family
            .compile(target)
            .unwrap_or_else(|e| panic!("{} for {target:?}: {e}", family.name()));
        let Image::Ptx(ptx) = compiled.image else {
            panic!("{target:?} gave a cubin");
        };
        ptx
    };
    assert!(ptx_of(Family::Elementwise, pinned).contains("\n.version 9.0\n"));
    for (family, ptx) in each_family(|family| ptx_of(family, oldest)) {
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
    println!("PTX: every kernel source compiled by NVRTC");
}

#[test]
fn every_kernel_compiles_to_a_cubin_without_local_memory() {
    if !nvrtc_or_skip() {
        return;
    }
    let (mut report, mut using_local_memory) = (Vec::new(), Vec::new());
    let cubins = each_family(|family| {
        family
            .compile(Target::Cubin(Arch::from_number(90)))
            .unwrap_or_else(|e| panic!("{} for sm_90: {e}", family.name()))
    });
    for (family, compiled) in cubins {
        assert!(matches!(&compiled.image, Image::Cubin(b) if b.starts_with(b"\x7fELF")));
        let resources = compiled.resources();
        let typed = family
            .kernels()
            .iter()
            .flat_map(|kernel| ["f32", "f64"].map(|suffix| format!("{kernel}_{suffix}")));
        let names = typed.chain(family.byte_kernels().iter().map(|k| (*k).to_owned()));
        for name in names {
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
    println!("sm_90 cubins:\n  {}", report.join("\n  "));
    assert!(
        using_local_memory.is_empty(),
        "kernels using local memory on sm_90: {using_local_memory:?}"
    );
}
