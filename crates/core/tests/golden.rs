//! The cross-ISA golden test of the kernels: every kernel family of
//! [`rlgrad_testkit::golden`] on the Cpu device, plus the slice-level reductions of
//! [`rlgrad_core::reduce`], in `f32` and `f64`, with the bits of every output hashed into
//! one value per family and element type. They must be the committed
//! [`rlgrad_testkit::golden::KERNEL_HASHES`] at every instruction set this CPU supports
//! ([`rlgrad_core::cpu::simd::Isa::ALL`], through the process-wide cap
//! [`rlgrad_core::cpu::simd::set_max_isa`]), at `Par::Seq` and `Par::rayon(3)`, and on
//! every platform the suite runs on (x86-64 at SSE2, AVX2 and AVX-512; aarch64 NEON under
//! qemu). rlgrad-cuda's `tests/golden.rs` holds the Cuda device to the same hashes.
//!
//! What to do when a hash differs, and how to update one on purpose: the docs of
//! [`rlgrad_testkit::golden`].
//!
//! The test is one `#[test]` function because the instruction-set cap is process-wide: a
//! second test in this binary, running in parallel, would change the cap under it.

use rlgrad_core::{Cpu, Float, Par, reduce};
use rlgrad_testkit::golden::{self, BitsHash, KERNEL_HASHES, LONG, spread};
use rlgrad_testkit::strategies;

/// The slice-level canonical reductions of [`rlgrad_core::reduce`]: sums, means,
/// variances and extrema at lengths around the leaf and lane sizes, and the mapped,
/// column, gathered and segmented sums.
fn reduce_slices<T: Float>(par: Par) -> BitsHash {
    let x = spread::<T>("reduce slices", LONG);
    let y = spread::<T>("reduce slices other", LONG);
    let mut hash = BitsHash::new();
    for len in [2, 15, 17, 63, 65, 1023, 1025, 4097, LONG] {
        let x = &x[..len];
        let (mean, var) = reduce::mean_var(x, 1, par).unwrap();
        hash.values(&[
            reduce::sum(x, par),
            reduce::sum_map(x, par, |v| v * v),
            reduce::mean(x, par).unwrap(),
            reduce::var(x, 0, par).unwrap(),
            mean,
            var,
            reduce::min(x, par).unwrap(),
            reduce::max(x, par).unwrap(),
        ]);
    }
    for (rows, cols) in [(1, 1), (65, 17), (1000, 33), (3001, 23)] {
        let mut out = vec![T::zero(); cols];
        reduce::sum_columns(
            &x[..rows * cols],
            rows,
            cols,
            par,
            |v, column| v * c_of::<T>(column),
            &mut out,
        );
        hash.values(&out);
    }
    // The squares of `x[..a]` then the products of `x` and `y` from `b`, as if laid end
    // to end.
    let (a, b) = (40_000, 1_000);
    let gathered = reduce::sum_gathered(
        LONG,
        par,
        |_| (),
        |_, range, out| {
            for (i, o) in range.zip(out) {
                *o = if i < a {
                    x[i] * x[i]
                } else {
                    x[i - a + b] * y[i - a + b]
                };
            }
        },
    );
    hash.values(&[gathered]);
    // Segments of a padded [B, 1000] batch: empty ones, a full one, short ones.
    let stride = 1000;
    let mut offsets = vec![0];
    for (k, len) in [3, 0, 1000, 1, 999, 0, 64, 65, 517, 2, 1000]
        .into_iter()
        .enumerate()
    {
        assert!((k + 1) * stride <= LONG, "x holds every row of the batch");
        offsets.push(offsets[k] + len);
    }
    hash.values(&[
        reduce::sum_segments_plain(par, &offsets, stride, &x).unwrap(),
        reduce::sum_segments(par, &offsets, stride, &x, &y, |v, w| (v - w) * w).unwrap(),
    ]);
    hash
}

/// `column + 1`: the factor of a column-dependent map for [`reduce::sum_columns`].
fn c_of<T: Float>(column: usize) -> T {
    T::from_usize(column + 1)
}

/// Every family's hash in `T`, on a Cpu with `par`.
fn families<T: Float>(par: Par) -> Vec<(&'static str, u64)> {
    let mut rows = golden::kernel_families::<T, _>(&Cpu::new(par))
        .unwrap_or_else(|e| panic!("the Cpu failed a kernel: {e}"));
    rows.push(("reduce_slices", reduce_slices::<T>(par).finish()));
    rows
}

#[test]
fn every_kernel_family_gives_the_committed_bits_at_every_isa_and_thread_count() {
    strategies::assert_golden_hashes(KERNEL_HASHES, |par| {
        // The two element types side by side (the cap and the grains are process-wide,
        // and the same for both): the Seq half would otherwise leave a core idle.
        let (f32_rows, f64_rows) = std::thread::scope(|scope| {
            let f64_rows = scope.spawn(|| families::<f64>(par));
            (families::<f32>(par), f64_rows.join().unwrap())
        });
        let f32_rows = f32_rows.into_iter().map(|(f, h)| (f, "f32", h));
        let f64_rows = f64_rows.into_iter().map(|(f, h)| (f, "f64", h));
        f32_rows.chain(f64_rows).collect()
    });
}
