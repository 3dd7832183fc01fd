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
