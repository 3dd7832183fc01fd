//! Shared helpers for rlgrad's criterion benches (the benches live in `benches/`).

use std::time::Duration;

use criterion::Criterion;
use rayon::prelude::*;

/// Criterion settings for memory-bound kernels: few samples, each long enough to span
/// many iterations, so a bench file finishes in about a minute on two cores.
pub fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

/// Copies `src` into `dst` with `threads` tasks: the memory-bandwidth yardstick that the
/// kernels' bytes are compared with (8 bytes per f32 element: one read, one write).
pub fn parallel_copy(dst: &mut [f32], src: &[f32], threads: usize) {
    let chunk = dst.len().div_ceil(threads.max(1)).max(1);
    dst.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The fastest read of `x` this machine does: per thread, 16 independent lanes over a
/// contiguous part, compiled for AVX-512 or AVX2 when the CPU has them. Its order of
/// additions depends on the thread count, so it is a bandwidth yardstick, not a sum rlgrad
/// would return.
pub fn read_ceiling(x: &[f32], threads: usize) -> f32 {
    let part = x.len().div_ceil(threads.max(1)).max(1);
    x.par_chunks(part)
        .map(lanes_widest)
        .collect::<Vec<f32>>()
        .iter()
        .sum()
}

#[inline(always)]
fn lanes(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    for group in x.chunks_exact(16) {
        for (a, &v) in acc.iter_mut().zip(group) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + x.chunks_exact(16).remainder().iter().sum::<f32>()
}

fn lanes_widest(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { lanes_avx512(x) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { lanes_avx2(x) };
        }
    }
    lanes(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn lanes_avx512(x: &[f32]) -> f32 {
    lanes(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn lanes_avx2(x: &[f32]) -> f32 {
    lanes(x)
}
