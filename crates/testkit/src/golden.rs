//! The cross-device golden test of the kernels: fixed inputs through
//! every kernel family of the device traits, in `f32` and `f64`, with the bits of every
//! output hashed into one value per family and element type. The hashes are committed
//! here ([`KERNEL_HASHES`]) and every device must give them: the Cpu at every instruction
//! set and thread count (`crates/core/tests/golden.rs`, which adds the slice-level
//! reductions), on x86-64 and on aarch64, and the Cuda device (`rlgrad-cuda`'s
//! `tests/golden.rs`, run by the GPU bundle). The canonical orders fix every rounding, so
//! neither the vector width, nor the thread count, nor the processor shows in the bits.
//!
//! The families are written once, against the kernel traits ([`GoldenDevice`]): inputs
//! are uploaded, each kernel writes into a fresh device buffer, and the output is
//! downloaded and hashed ([`BitsHash`]).
//!
//! ```
//! use rlgrad_testkit::golden::{self, KERNEL_HASHES};
//! use rlgrad_core::{Cpu, Par};
//!
//! let rows = golden::kernel_families::<f32, _>(&Cpu::new(Par::Seq))?;
//! let rows: Vec<_> = rows.into_iter().map(|(family, hash)| (family, "f32", hash)).collect();
//! assert!(golden::mismatches(KERNEL_HASHES, &rows).is_empty());
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! # When a hash differs
//!
//! A mismatch names the family, the element type and the device (or instruction set and
//! thread setting), with the hash it got and the one committed.
//!
//! - **Nobody meant to change that kernel's results: it is a determinism bug.** A kernel
//!   version for one instruction set or device (or a thread split, or a platform's libm or
//!   FMA) left the canonical order. Do not update the constant: find the version that
//!   differs (a run where every setting disagrees with the constant but agrees with the
//!   others points at a change on all paths).
//! - **A kernel's canonical order (or its formula) was changed on purpose**, documented in
//!   its doc comment: update that family's constants. Run
//!   `cargo test -p rlgrad-core --test golden -- --nocapture`, which prints one
//!   `golden <family> <dtype>: <hex>` line per family, and copy the new values into
//!   [`KERNEL_HASHES`]. Check that the other families kept their hashes, and say in the
//!   commit which canonical order changed and why.
//!
//! NaN results are hashed as one value whatever their sign and payload: IEEE 754 leaves
//! those to the hardware (x86 produces a negative quiet NaN for `0 / 0` where aarch64
//! produces a positive one), and rlgrad does not promise them.

use std::sync::OnceLock;

use rlgrad_core::kernels::cell::{LstmBackward, LstmForward};
use rlgrad_core::kernels::optim::{
    Adagrad, Adam, AdamTorch, Flavor, Momentum, Rmsprop, Sgd, Update,
};
use rlgrad_core::kernels::recurrence::{Episodes, TimeMajor, Truncation, VtraceParams};
use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm, PadOrder, Sequences};
use rlgrad_core::kernels::{
    BinaryOp, CellKernel, CopyKernel, ElementwiseKernel, MatmulKernel, OptimKernel,
    RecurrenceKernel, ReduceKernel, ReduceOp, SequenceKernel, UnaryOp,
};
use rlgrad_core::{Device, Dims, Float, Layout, Result, Rng, Shape, View};

/// The committed hashes of [`kernel_families`] (and of the Cpu's slice-level
/// `reduce_slices` family): `(family, dtype, hash)`.
pub const KERNEL_HASHES: &[(&str, &str, u64)] = &[
    ("unary", "f32", 0x2e722f7908df17e7),
    ("unary", "f64", 0x45058f1cf7ddc575),
    ("binary", "f32", 0x93d9e6f2ee834b21),
    ("binary", "f64", 0x02f1b2fa5cabe933),
    ("select", "f32", 0xb15dd29970093582),
    ("select", "f64", 0x484fb3e7e9ffc62e),
    ("reduce", "f32", 0xaf1c79a5047baeb5),
    ("reduce", "f64", 0x45d758694d9732f7),
    ("reduce_slices", "f32", 0xd312745b6648762e),
    ("reduce_slices", "f64", 0xea2ad675f3d597d6),
    ("copy", "f32", 0xe1537266ab402be5),
    ("copy", "f64", 0x8bf2c118a3249851),
    ("matmul", "f32", 0x473c75cf16fe7f55),
    ("matmul", "f64", 0xa2d945a69b5ee818),
    ("recurrence", "f32", 0xb095f84e538be996),
    ("recurrence", "f64", 0x598775540980a401),
    ("sequence", "f32", 0x57a8818171010b3d),
    ("sequence", "f64", 0x85735da9fdca7fed),
    ("optim", "f32", 0x8f7f11dc6c341230),
    ("optim", "f64", 0x0c94b3e40b42328a),
    ("cell", "f32", 0xc46bddb88aba62de),
    ("cell", "f64", 0x090eb8cb6ab21285),
];

/// FNV-1a ([`rlgrad_core::Fingerprint`]) over the bits of float values: a hash small enough to
/// commit, fixed forever and the same on every platform, for golden tests of output bits. Every NaN
/// hashes as one value: rlgrad promises the bits of numbers, not NaN payloads (a NaN
/// made fresh has another sign bit on aarch64 than on x86-64).
///
/// ```
/// use rlgrad_testkit::golden::BitsHash;
/// let mut hash = BitsHash::new();
/// hash.values(&[1.0f32, -0.0, f32::NAN]);
/// let mut other = BitsHash::new();
/// other.values(&[1.0f32, 0.0, -f32::NAN]);
/// assert_ne!(hash.finish(), other.finish(), "-0 and +0 differ; the NaNs do not");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BitsHash(rlgrad_core::Fingerprint);

impl BitsHash {
    /// The hash of nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mixes in the 8 bytes of `word`, little-endian.
    pub fn word(&mut self, word: u64) {
        self.0.write_u64(word);
    }

    /// Mixes in the length of `values`, then every value's bits in order, each as a
    /// 64-bit word.
    pub fn values<T: Float>(&mut self, values: &[T]) {
        self.word(values.len() as u64);
        for &v in values {
            self.word(if v.is_nan() {
                u64::MAX
            } else {
                v.to_bits_u64()
            });
        }
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// One line per row of `got` that is not the committed row of `golden` (`(family, dtype,
/// hash)`), naming both hashes; empty when every row matches.
pub fn mismatches(golden: &[(&str, &str, u64)], got: &[(&str, &str, u64)]) -> Vec<String> {
    got.iter()
        .filter_map(|&(name, dtype, hash)| {
            let want = golden
                .iter()
                .find(|&&(n, d, _)| n == name && d == dtype)
                .map(|&(_, _, hash)| hash);
            (want != Some(hash)).then(|| {
                format!(
                    "{name} {dtype}: got {hash:#018x}, want {}",
                    want.map_or("no committed hash".to_owned(), |w| format!("{w:#018x}"))
                )
            })
        })
        .collect()
}

/// Every kernel trait of rlgrad-core: what [`kernel_families`] runs. Implemented for every
/// device that implements them all (the Cpu, and rlgrad-cuda's Cuda).
pub trait GoldenDevice<T: Float>:
    ElementwiseKernel<T>
    + ReduceKernel<T>
    + CopyKernel<T>
    + MatmulKernel<T>
    + RecurrenceKernel<T>
    + SequenceKernel<T>
    + OptimKernel<T>
    + CellKernel<T>
{
}

impl<T: Float, D> GoldenDevice<T> for D where
    D: ElementwiseKernel<T>
        + ReduceKernel<T>
        + CopyKernel<T>
        + MatmulKernel<T>
        + RecurrenceKernel<T>
        + SequenceKernel<T>
        + OptimKernel<T>
        + CellKernel<T>
{
}

/// Every family's `(name, hash)` in `T` on `device`, in the order of [`KERNEL_HASHES`]
/// (without the Cpu-only `reduce_slices`); an error when the device fails a kernel.
pub fn kernel_families<T: Float, D: GoldenDevice<T>>(
    device: &D,
) -> Result<Vec<(&'static str, u64)>> {
    Ok(vec![
        ("unary", unary::<T, D>(device)?.finish()),
        ("binary", binary::<T, D>(device)?.finish()),
        ("select", select::<T, D>(device)?.finish()),
        ("reduce", reduce_kernel::<T, D>(device)?.finish()),
        ("copy", copy::<T, D>(device)?.finish()),
        ("matmul", matmul::<T, D>(device)?.finish()),
        ("recurrence", recurrences::<T, D>(device)?.finish()),
        ("sequence", sequences::<T, D>(device)?.finish()),
        ("optim", optimizers::<T, D>(device)?.finish()),
        ("cell", cells::<T, D>(device)?.finish()),
    ])
}

/// The seed of the inputs.
const SEED: u64 = 23;

/// Elements enough for the elementwise, reduction and optimizer kernels to split their
/// work into more than one piece at `Par::rayon(3)` (pieces of 16K to 32K elements; the
/// parallel setting sets every grain to 1), and odd, so that no vector width divides it.
pub const LONG: usize = 70_001;

/// `2^e` for the exponents used here, exactly.
fn two_to(e: i64) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// Samples in the pool of inputs: more than the longest input.
const POOL_LEN: usize = 1 << 20;

/// Standard normal samples, each with an exponent uniform in `-12..=12`, drawn once per
/// process from one stream: every input below is a slice of them (drawing each input
/// afresh, for each setting and element type, cost most of the test's time).
fn pool() -> &'static [(f64, i64)] {
    static POOL: OnceLock<Vec<(f64, i64)>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut rng = Rng::new(SEED, "golden inputs");
        (0..POOL_LEN)
            .map(|_| (rng.normal_f64(), rng.below(25) as i64 - 12))
            .collect()
    })
}

/// `len` consecutive samples of the pool from a start that `name` picks, so that inputs
/// of different names differ.
fn draws(name: &str, len: usize) -> &'static [(f64, i64)] {
    let mut hash = BitsHash::new();
    for byte in name.bytes() {
        hash.word(u64::from(byte));
    }
    let start = (hash.finish() % (POOL_LEN - len + 1) as u64) as usize;
    &pool()[start..start + len]
}

/// `len` values named `name`: normal samples scaled by `2^e` with `e` uniform in
/// `-12..=12`, so that the results of sums and products depend on their order of
/// rounding; every 97th value is `+0` and the one 48 after it `-0`. Inputs of the same
/// name and length are the same on every machine.
pub fn spread<T: Float>(name: &str, len: usize) -> Vec<T> {
    draws(name, len)
        .iter()
        .enumerate()
        .map(|(i, &(z, e))| match i % 97 {
            0 => T::zero(),
            48 => -T::zero(),
            _ => T::from_f64(z * two_to(e)),
        })
        .collect()
}

/// `len` normal samples of standard deviation `std` named `name`.
fn normal<T: Float>(name: &str, len: usize, std: f64) -> Vec<T> {
    draws(name, len)
        .iter()
        .map(|&(z, _)| T::from_f64(z * std))
        .collect()
}

/// Magnitudes on every branch of libm's `exp`, `expm1`, `tanh`, `log` and `pow` (in
/// `f32` and `f64`) and of the lane versions of `expf`, `tanhf` and the sigmoid, in
/// increasing order.
const BRANCH_POINTS: &[f64] = &[
    // Zero, subnormals and the smallest normals of f64, then of f32.
    0.0,
    5e-324,
    1e-310,
    f64::MIN_POSITIVE,
    1e-300,
    1e-45,
    1e-40,
    f32::MIN_POSITIVE as f64,
    1e-30,
    // The tiny-argument shortcuts (tanh below 2^-55, exp below 2^-28 and 2^-13, expm1f
    // below 2^-25).
    1e-20,
    2e-17,
    3e-17,
    2e-9,
    4e-9,
    2e-8,
    3.5e-8,
    1e-5,
    1.2e-4,
    1.3e-4,
    1e-3,
    0.1,
    // Either side of tanh's thresholds (0.2554, 0.5493) and of the reductions' (0.5 ln 2,
    // 1.5 ln 2).
    0.2554,
    0.2555,
    0.3465,
    0.3466,
    0.5,
    0.5493,
    0.5494,
    0.9,
    1.0,
    1.0397,
    1.0398,
    1.1,
    2.0,
    5.0,
    // The end of tanhf's lane range (9), of expm1f's (27 ln 2), tanh's saturation (22).
    8.99,
    9.0,
    9.01,
    15.0,
    18.714,
    18.716,
    20.0,
    22.0,
    22.1,
    30.0,
    50.0,
    // expf: the end of its lane range, overflow, the subnormal results, underflow.
    87.33,
    87.34,
    88.72,
    88.73,
    100.0,
    103.97,
    103.98,
    110.0,
    // exp: the subnormal results, overflow, underflow.
    708.39,
    708.4,
    709.78,
    709.79,
    745.13,
    745.14,
    // Huge finite values, up to the largest of f32 and of f64.
    1e3,
    1e5,
    1e10,
    1e30,
    3e38,
    f32::MAX as f64,
    1e100,
    1e300,
    f64::MAX,
];

/// The inputs of the transcendental functions: [`BRANCH_POINTS`] with both signs, where
/// finite in `T`, in increasing magnitude (so that the small ones share groups of 16 lanes
/// without a fallback value), then `LONG` normal samples of standard deviation 4 (most
/// groups in the lanes' fast ranges, some with a value that sends them to libm).
fn transcendental_inputs<T: Float>() -> Vec<T> {
    let mut x: Vec<T> = BRANCH_POINTS
        .iter()
        .flat_map(|&v| [T::from_f64(v), -T::from_f64(v)])
        .filter(|v| v.is_finite())
        .collect();
    x.extend(normal::<T>("transcendental", LONG, 4.0));
    x
}

/// A row-major layout of `dims`.
fn dense(dims: &[usize]) -> Layout {
    Layout::contiguous(Shape::from(dims))
}

/// A view of `dims` with `strides` (in elements) from element `offset`.
fn strided(dims: &[usize], strides: &[usize], offset: usize) -> Layout {
    Layout::from_parts(Shape::from(dims), Dims::from_slice(strides), offset)
}

/// `T::from_f64`, shorter.
fn c<T: Float>(v: f64) -> T {
    T::from_f64(v)
}

/// What `kernel` writes into a fresh buffer of `len` elements on `device`, on the host.
fn output<T: Float, D: Device>(
    device: &D,
    len: usize,
    kernel: impl FnOnce(&mut D::Buffer<T>) -> Result<()>,
) -> Result<Vec<T>> {
    let mut out = device.alloc_zeros(len)?;
    kernel(&mut out)?;
    device.download(&out)
}

/// Every [`UnaryOp`] (each variant; a new one must be added here), over a dense input
/// (the lane versions of exp, tanh and sigmoid for `f32` on the Cpu) and a transposed
/// view of it (the scalar formulas).
fn unary<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let ops = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Tanh,
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Square,
        UnaryOp::Powf(c(0.5)),
        UnaryOp::Powf(c(-1.5)),
        UnaryOp::Powf(c(3.0)),
        UnaryOp::Powf(c(2.7)),
        UnaryOp::Clamp {
            min: c(-2.5),
            max: c(0.75),
        },
        UnaryOp::AddScalar(c(0.1)),
        UnaryOp::SubScalar(c(0.3)),
        UnaryOp::ScalarSub(c(1.7)),
        UnaryOp::MulScalar(c(-0.7)),
        UnaryOp::DivScalar(c(3.0)),
        UnaryOp::ScalarDiv(c(0.9)),
    ];
    let host = transcendental_inputs::<T>();
    let x = device.upload(&host)?;
    let layouts = [
        dense(&[host.len()]),
        // Column-major [37, 29] from element 5: strided runs.
        strided(&[37, 29], &[1, 37], 5),
    ];
    let mut hash = BitsHash::new();
    for op in ops {
        for layout in &layouts {
            hash.values(&output(device, layout.numel(), |out| {
                device.unary(op, View::new(&x, layout), out)
            })?);
        }
    }
    Ok(hash)
}

/// `(lhs, rhs)` of the binary ops on `device`: spread values where every fifth `rhs`
/// equals its `lhs` (so that the comparisons are sometimes true).
fn binary_inputs<T: Float, D: Device>(
    device: &D,
    len: usize,
) -> Result<(D::Buffer<T>, D::Buffer<T>)> {
    let a = spread::<T>("binary lhs", len);
    let mut b = spread::<T>("binary rhs", len);
    for i in (0..len).step_by(5) {
        b[i] = a[i];
    }
    Ok((device.upload(&a)?, device.upload(&b)?))
}

/// Every [`BinaryOp`] over dense operands, a row broadcast along the rows (a bias), a
/// column broadcast, a scalar, and two non-contiguous views.
fn binary<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let ops = BinaryOp::ALL;
    let (a, b) = binary_inputs::<T, D>(device, LONG)?;
    let cases = [
        (dense(&[LONG]), dense(&[LONG])),
        // [7, 143] plus a row of 143 from element 11 repeated on every row.
        (dense(&[7, 143]), strided(&[7, 143], &[0, 1], 11)),
        // The same with the operands swapped.
        (strided(&[7, 143], &[0, 1], 11), dense(&[7, 143])),
        // [7, 143] plus a column of 7 repeated along each row.
        (dense(&[7, 143]), strided(&[7, 143], &[1, 0], 3)),
        // One value broadcast to [3, 5, 67].
        (strided(&[3, 5, 67], &[0, 0, 0], 17), dense(&[3, 5, 67])),
        // A transposed [29, 37] against every other element of a [29, 74].
        (
            strided(&[29, 37], &[1, 29], 2),
            strided(&[29, 37], &[74, 2], 1),
        ),
    ];
    let mut hash = BitsHash::new();
    for op in ops {
        for (la, lb) in &cases {
            hash.values(&output(device, la.numel(), |out| {
                device.binary(op, View::new(&a, la), View::new(&b, lb), out)
            })?);
        }
    }
    Ok(hash)
}

/// Select with a condition holding `+0`, `-0` (both false) and nonzero values, dense and
/// through broadcast and transposed views.
fn select<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let condition: Vec<T> = spread::<T>("select condition", LONG)
        .into_iter()
        .enumerate()
        .map(|(i, v)| if i % 3 == 0 { T::zero() } else { v })
        .collect();
    let condition = device.upload(&condition)?;
    let (on_true, on_false) = binary_inputs::<T, D>(device, LONG)?;
    let cases = [
        [dense(&[LONG]), dense(&[LONG]), dense(&[LONG])],
        [
            strided(&[41, 53], &[1, 41], 0),
            strided(&[41, 53], &[0, 1], 7),
            dense(&[41, 53]),
        ],
        [
            dense(&[41, 53]),
            strided(&[41, 53], &[53, 1], 100),
            strided(&[41, 53], &[1, 0], 9),
        ],
    ];
    let mut hash = BitsHash::new();
    for [lc, lt, lf] in &cases {
        hash.values(&output(device, lc.numel(), |out| {
            device.select(
                View::new(&condition, lc),
                View::new(&on_true, lt),
                View::new(&on_false, lf),
                out,
            )
        })?);
    }
    Ok(hash)
}

/// Every [`ReduceOp`] over everything and along each axis, of dense data (one long enough
/// to split over tasks) and of a transposed view.
fn reduce_kernel<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Var { ddof: 0 },
        ReduceOp::Var { ddof: 1 },
        ReduceOp::Min,
        ReduceOp::Max,
    ];
    let x = device.upload(&spread::<T>("reduce", LONG))?;
    let layouts = [
        dense(&[LONG]),
        // Axis 1 is longer than a leaf and has 17 columns side by side; axis 2 is short.
        dense(&[3, 131, 17]),
        // Two long rows: fewer outputs than tasks, so each reduction splits.
        dense(&[2, 35_000]),
        // A transposed [67, 45] from element 1.
        strided(&[67, 45], &[1, 67], 1),
    ];
    let mut hash = BitsHash::new();
    for op in ops {
        for layout in &layouts {
            let view = View::new(&x, layout);
            hash.values(&output(device, 1, |out| {
                device.reduce(op, view, None, out)
            })?);
            for (axis, &size) in layout.shape().dims().iter().enumerate() {
                hash.values(&output(device, layout.numel() / size, |out| {
                    device.reduce(op, view, Some(axis), out)
                })?);
            }
        }
    }
    Ok(hash)
}

/// Copies of strided and broadcast views, index_select and index_add (with repeated
/// indices, which accumulate in order) along each axis, and concatenation.
fn copy<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let x = device.upload(&spread::<T>("copy", LONG))?;
    let mut hash = BitsHash::new();
    for layout in [
        dense(&[LONG]),
        strided(&[37, 29], &[1, 37], 5),
        strided(&[5, 7, 33], &[0, 33, 1], 9),
        strided(&[11, 13], &[3, 40], 2),
    ] {
        hash.values(&output(device, layout.numel(), |out| {
            device.copy(View::new(&x, &layout), out)
        })?);
    }
    let cube = strided(&[6, 9, 35], &[1, 6 * 35, 6], 4);
    let view = View::new(&x, &cube);
    let indices = [4, 0, 4, 2, 5, 4, 1, 0, 3, 3, 4];
    for axis in 0..3 {
        let dims = cube.shape().dims();
        let picks: Vec<usize> = indices.iter().map(|&i| i % dims[axis]).collect();
        let rest: usize = dims.iter().product::<usize>() / dims[axis];
        hash.values(&output(device, rest * picks.len(), |out| {
            device.index_select(view, axis, &picks, out)
        })?);
        // Scatter the slices of the view into 3 slots: every slot gets several.
        let spread_to: Vec<usize> = (0..dims[axis]).map(|i| (i * 7 + 1) % 3).collect();
        hash.values(&output(device, rest * 3, |out| {
            device.index_add(view, axis, &spread_to, 3, out)
        })?);
    }
    let parts = [
        dense(&[4, 9, 35]),
        strided(&[4, 9, 35], &[1, 4 * 35, 4], 500),
        strided(&[4, 9, 35], &[0, 35, 1], 3),
    ];
    for axis in 0..3 {
        let mut grown = [4, 9, 35];
        grown[axis] *= 3;
        let views: Vec<_> = parts.iter().map(|l| View::new(&x, l)).collect();
        hash.values(&output(device, grown.iter().product(), |out| {
            device.concat(&views, axis, out)
        })?);
    }
    Ok(hash)
}

/// Products at many shapes: the RL shapes, one row, one column, `k = 1`, `k` across the
/// 256 block, `m` across the 96 block, narrow outputs (computed transposed), transposed
/// operands, a batch with a broadcast operand, and the linear layer: fused where the
/// device fuses it, else the product, the bias and the activation one after the other
/// (the same bits either way: [`MatmulKernel::matmul_bias`]).
fn matmul<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let a = device.upload(&spread::<T>("matmul lhs", 130_000))?;
    let b = device.upload(&spread::<T>("matmul rhs", 130_000))?;
    let bias = device.upload(&spread::<T>("matmul bias", 1000))?;
    let mut hash = BitsHash::new();
    let shapes = [
        (256, 3, 400),
        (256, 400, 300),
        (256, 300, 1),
        (100, 64, 64),
        (1, 37, 53),
        (53, 37, 1),
        (1, 1, 1),
        (7, 1, 9),
        (97, 300, 33),
        (130, 513, 15),
        (5, 1000, 3),
        (300, 257, 97),
        (1, 700, 1),
    ];
    for (m, k, n) in shapes {
        // Row-major operands, then each one transposed (read column-major from an
        // offset) where the product is small: the large ones cost most of the test's time
        // at the Cpu's baseline (software FMA on x86-64) and under qemu.
        let layouts = [
            (dense(&[m, k]), dense(&[k, n])),
            (strided(&[m, k], &[1, m], 3), dense(&[k, n])),
            (dense(&[m, k]), strided(&[k, n], &[1, k], 1)),
        ];
        let variants = if m * k * n <= 1 << 22 { 3 } else { 1 };
        for (la, lb) in &layouts[..variants] {
            hash.values(&output(device, m * n, |out| {
                device.matmul(View::new(&a, la), View::new(&b, lb), out)
            })?);
        }
    }
    // A batch of 3 [45, 70] x [70, 19], the right operand shared (stride 0).
    let (la, lb) = (dense(&[3, 45, 70]), strided(&[3, 70, 19], &[0, 19, 1], 2));
    hash.values(&output(device, 3 * 45 * 19, |out| {
        device.matmul(View::new(&a, &la), View::new(&b, &lb), out)
    })?);
    let layers = [
        ((256, 3, 400), Some(UnaryOp::Relu)),
        // The TD3 hidden layer at 100 rows (the Cpu's epilogue runs per block of 96 rows).
        ((100, 400, 300), Some(UnaryOp::Tanh)),
        ((256, 300, 1), None),
        ((100, 64, 64), Some(UnaryOp::Sigmoid)),
        ((130, 513, 15), Some(UnaryOp::Tanh)),
    ];
    for ((m, k, n), activation) in layers {
        let (la, lb, lbias) = (dense(&[m, k]), dense(&[k, n]), dense(&[n]));
        let (lhs, rhs, row) = (
            View::new(&a, &la),
            View::new(&b, &lb),
            View::new(&bias, &lbias),
        );
        let mut out = device.alloc_zeros(m * n)?;
        if !device.matmul_bias(lhs, rhs, row, activation, &mut out)? {
            let (rows, bias_rows) = (dense(&[m, n]), strided(&[m, n], &[0, 1], 0));
            let mut product = device.alloc_zeros(m * n)?;
            device.matmul(lhs, rhs, &mut product)?;
            let biased = View::new(&product, &rows);
            device.binary(
                BinaryOp::Add,
                biased,
                View::new(&bias, &bias_rows),
                &mut out,
            )?;
            if let Some(activation) = activation {
                device.unary(activation, View::new(&out, &rows), &mut product)?;
                out = product;
            }
        }
        hash.values(&device.download(&out)?);
    }
    Ok(hash)
}

/// Episode-end flags named `name`, as the `0`/`1` values device kernels read: set where
/// a standard normal sample exceeds `above` (2.0: about 2.3% of the steps, 1.8: about
/// 3.6%).
fn flags<T: Float>(name: &str, len: usize, above: f64) -> Vec<T> {
    draws(name, len)
        .iter()
        .map(|&(z, _)| if z > above { T::one() } else { T::zero() })
        .collect()
}

/// Per-step discounts: `0` where `terminated` is set, else `gamma`.
fn discounts<T: Float>(gamma: T, terminated: &[T]) -> Vec<T> {
    terminated
        .iter()
        .map(|&end| if end != T::zero() { T::zero() } else { gamma })
        .collect()
}

/// The inputs of a GAE on a device.
struct Gae<'a, T: Float, D: Device> {
    layout: TimeMajor,
    rewards: &'a D::Buffer<T>,
    values: &'a D::Buffer<T>,
    bootstrap: &'a D::Buffer<T>,
    lambda: T,
}

impl<T: Float, D: GoldenDevice<T>> Gae<'_, T, D> {
    /// Hashes the advantages, then the returns, of these inputs with `episodes`.
    fn advantages_and_returns(
        &self,
        device: &D,
        episodes: Episodes<'_, D::Buffer<T>, T>,
        hash: &mut BitsHash,
    ) -> Result<()> {
        let len = self.layout.t * self.layout.b;
        let mut advantages = device.alloc_zeros::<T>(len)?;
        let mut returns = device.alloc_zeros::<T>(len)?;
        device.gae(
            self.layout,
            self.rewards,
            self.values,
            self.bootstrap,
            episodes,
            self.lambda,
            &mut advantages,
            Some(&mut returns),
        )?;
        hash.values(&device.download(&advantages)?);
        hash.values(&device.download(&returns)?);
        Ok(())
    }
}

/// Every estimator of [`RecurrenceKernel`] with each kind of episode boundary on odd
/// `[T, B]` shapes, and the primitive and GAE on one wide enough to split over tasks.
fn recurrences<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let mut hash = BitsHash::new();
    let (gamma, lambda) = (c::<T>(0.99), c::<T>(0.95));
    let (t, b) = (40, 13_109);
    let (layout, len) = (TimeMajor::new(t, b), t * b);
    let rewards = device.upload(&normal::<T>("rewards", len, 1.0))?;
    let values = device.upload(&normal::<T>("values", len, 2.0))?;
    let bootstrap = device.upload(&normal::<T>("bootstrap", b, 2.0))?;
    let terminated = flags::<T>("terminated", len, 2.0);
    let cuts = device.upload(&discounts(gamma, &terminated))?;
    let terminated = device.upload(&terminated)?;
    hash.values(&output(device, len, |out| {
        device.linear_recurrence(layout, &rewards, &cuts, &bootstrap, out)
    })?);
    let episodes = Episodes::Flags {
        gamma,
        terminated: &terminated,
        truncation: None,
    };
    let gae = Gae::<T, D> {
        layout,
        rewards: &rewards,
        values: &values,
        bootstrap: &bootstrap,
        lambda,
    };
    gae.advantages_and_returns(device, episodes, &mut hash)?;
    for (t, b) in [(1, 1), (13, 37), (50, 131)] {
        let (layout, len) = (TimeMajor::new(t, b), t * b);
        let rewards = device.upload(&normal::<T>("rewards", len, 1.0))?;
        let values = device.upload(&normal::<T>("values", len, 2.0))?;
        let next_values = device.upload(&normal::<T>("next values", len, 2.0))?;
        let bootstrap = device.upload(&normal::<T>("bootstrap", b, 2.0))?;
        let final_values = device.upload(&normal::<T>("final values", len, 2.0))?;
        let rhos: Vec<T> = normal::<T>("rhos", len, 0.7)
            .into_iter()
            .map(|v| v.exp_portable())
            .collect();
        let rhos = device.upload(&rhos)?;
        let terminated = flags::<T>("terminated", len, 2.0);
        let cuts = device.upload(&discounts(gamma, &terminated))?;
        let terminated = device.upload(&terminated)?;
        let truncated = device.upload(&flags::<T>("truncated", len, 1.8))?;
        hash.values(&output(device, len, |out| {
            device.linear_recurrence(layout, &rewards, &cuts, &bootstrap, out)
        })?);
        let every_kind: [Episodes<'_, D::Buffer<T>, T>; 4] = [
            Episodes::Constant { gamma },
            Episodes::Discounts(&cuts),
            Episodes::Flags {
                gamma,
                terminated: &terminated,
                truncation: None,
            },
            Episodes::Flags {
                gamma,
                terminated: &terminated,
                truncation: Some(Truncation {
                    truncated: &truncated,
                    final_values: &final_values,
                }),
            },
        ];
        let gae = Gae::<T, D> {
            layout,
            rewards: &rewards,
            values: &values,
            bootstrap: &bootstrap,
            lambda,
        };
        for episodes in every_kind {
            hash.values(&output(device, len, |out| {
                device.discounted_returns(layout, &rewards, episodes, &bootstrap, out)
            })?);
            gae.advantages_and_returns(device, episodes, &mut hash)?;
            hash.values(&output(device, len, |out| {
                device.gae(
                    layout, &rewards, &values, &bootstrap, episodes, lambda, out, None,
                )
            })?);
            hash.values(&output(device, len, |out| {
                device.lambda_returns(layout, &rewards, &next_values, episodes, lambda, out)
            })?);
            for n in [1, 3, 100] {
                hash.values(&output(device, len, |out| {
                    device.n_step_returns(layout, &rewards, &next_values, episodes, n, out)
                })?);
            }
            let params = VtraceParams {
                lambda,
                clip_rho: c(1.0),
                clip_pg_rho: c(1.3),
            };
            let (mut vs, mut pg) = (device.alloc_zeros(len)?, device.alloc_zeros(len)?);
            device.vtrace(
                layout, &rewards, &values, &bootstrap, &rhos, episodes, params, &mut vs, &mut pg,
            )?;
            hash.values(&device.download(&vs)?);
            hash.values(&device.download(&pg)?);
        }
    }
    Ok(hash)
}

/// The ragged-sequence kernels of [`SequenceKernel`] on a small batch (empty sequences,
/// one step, padding past the longest) with one and three features, and a large one that
/// splits over tasks with one.
fn sequences<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let mut rng = Rng::new(SEED, "sequence lengths");
    let large: Vec<usize> = (0..301).map(|_| rng.below(513) as usize).collect();
    let batches = [
        Sequences::new(&[5, 0, 17, 1, 17, 9, 3], Some(19))?,
        Sequences::new(&large, Some(512))?,
    ];
    let mut hash = BitsHash::new();
    for (seqs, feature_counts) in batches.iter().zip([&[1, 3][..], &[1]]) {
        for &features in feature_counts {
            let packed = seqs.total() * features;
            let padded_len = seqs.padded_steps() * features;
            let flat = device.upload(&spread::<T>("packed", packed))?;
            for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
                // Into a buffer whose padding is not zero yet, then into a fresh one.
                let mut padded = device.upload(&vec![c::<T>(1e30); padded_len])?;
                device.pad(seqs, features, order, &flat, &mut padded)?;
                hash.values(&device.download(&padded)?);
                hash.values(&output(device, padded_len, |out| {
                    device.pad(seqs, features, order, &flat, out)
                })?);
                // Nonzero values in the padding, which unpad must not copy.
                let mut garbage = spread::<T>("padded", padded_len);
                for _ in 0..2 {
                    let padded = device.upload(&garbage)?;
                    hash.values(&output(device, packed, |out| {
                        device.unpad(seqs, features, order, &padded, out)
                    })?);
                    garbage.reverse();
                }
            }
            let x = device.upload(&spread::<T>("masked x", padded_len))?;
            let other = device.upload(&spread::<T>("masked other", padded_len))?;
            let grad = device.upload(&spread::<T>("masked grad", padded_len))?;
            let terms = [
                MaskedTerm::Value,
                MaskedTerm::SquaredDeviation { mean: c(0.25) },
                MaskedTerm::Product {
                    other: &other,
                    shift: c(-0.5),
                },
            ];
            for term in terms {
                hash.values(&[device.masked_sum(seqs, features, &x, term)?]);
            }
            let sums = output(device, seqs.batch(), |out| {
                device.sequence_sums(seqs, features, &x, out)
            })?;
            hash.values(&sums);
            let sums = device.upload(&sums)?;
            let maps = [
                MaskedMap::Fill(c(0.3)),
                MaskedMap::PerSequence(&sums),
                MaskedMap::Scale {
                    shift: c(0.1),
                    scale: c(-3.0),
                },
                MaskedMap::Standardize {
                    mean: c(0.1),
                    denominator: c(1.7),
                },
                MaskedMap::StandardizeBackward {
                    grad: &grad,
                    grad_mean: c(0.01),
                    mean: c(0.1),
                    denominator: c(1.7),
                    coefficient: c(0.003),
                },
            ];
            for map in maps {
                // Over a buffer holding 7s: the padding must come out `+0`.
                let mut out = device.upload(&vec![c::<T>(7.0); padded_len])?;
                device.masked_map(seqs, features, Some(&x), map, &mut out)?;
                hash.values(&device.download(&out)?);
            }
        }
    }
    Ok(hash)
}

/// The step scalars of Adam at step `t` (1-based), computed on the host in `f64` as the
/// optimizers do.
fn adam_scalars(t: i32, lr: f64, beta1: f64, beta2: f64) -> (f64, f64, f64) {
    let bc1 = 1.0 - beta1.powi(t);
    let bc2 = 1.0 - beta2.powi(t);
    (lr / bc1, bc2.sqrt(), lr * bc2.sqrt() / bc1)
}

/// Every fused update rule of [`OptimKernel`] (each flavor, with and without weight
/// decay, momentum, Nesterov, amsgrad and centering), three steps each, on two
/// odd-sized parameters and a long one.
fn optimizers<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let rules = |t: i32| -> Vec<Update<T>> {
        let (step_size, bc2_sqrt, alpha) = adam_scalars(t, 1e-3, 0.9, 0.999);
        let adam = |weight_decay: f64, decoupled_keep: f64, amsgrad: bool| {
            Update::Adam(Adam::Torch(AdamTorch {
                step_size: c(step_size),
                bias_correction2_sqrt: c(bc2_sqrt),
                one_minus_beta1: c(0.1),
                beta2: c(0.999),
                one_minus_beta2: c(1.0 - 0.999),
                eps: c(1e-8),
                weight_decay: c(weight_decay),
                decoupled_keep: c(decoupled_keep),
                amsgrad,
            }))
        };
        let rmsprop = |flavor, momentum: f64, centered, weight_decay: f64| {
            Update::Rmsprop(Rmsprop {
                flavor,
                lr: c(1e-2),
                alpha: c(0.99),
                one_minus_alpha: c(1.0 - 0.99),
                eps: c(1e-8),
                momentum: c(momentum),
                centered,
                weight_decay: c(weight_decay),
            })
        };
        let mut rules = vec![
            Update::Sgd(Sgd {
                lr: c(0.1),
                weight_decay: c(0.0),
            }),
            Update::Sgd(Sgd {
                lr: c(0.1),
                weight_decay: c(1e-2),
            }),
            adam(0.0, 1.0, false),
            adam(1e-2, 1.0, true),
            adam(0.0, 1.0 - 1e-3 * 1e-2, false),
            Update::Adam(Adam::Keras {
                alpha: c(alpha),
                lr: c(1e-3),
                one_minus_beta1: c(0.1),
                one_minus_beta2: c(1.0 - 0.999),
                eps: c(1e-7),
                weight_decay: c(0.0),
                amsgrad: false,
            }),
            Update::Adam(Adam::Keras {
                alpha: c(alpha),
                lr: c(1e-3),
                one_minus_beta1: c(0.1),
                one_minus_beta2: c(1.0 - 0.999),
                eps: c(1e-7),
                weight_decay: c(4e-3),
                amsgrad: true,
            }),
            Update::Adagrad(Adagrad::Torch {
                clr: c(1e-2 / (1.0 + f64::from(t - 1) * 1e-3)),
                eps: c(1e-10),
                weight_decay: c(1e-2),
            }),
            Update::Adagrad(Adagrad::Keras {
                lr: c(1e-2),
                eps: c(1e-7),
                weight_decay: c(0.0),
            }),
            Update::Momentum(Momentum::Keras {
                lr: c(1e-2),
                momentum: c(0.9),
                nesterov: false,
                weight_decay: c(0.0),
            }),
            Update::Momentum(Momentum::Keras {
                lr: c(1e-2),
                momentum: c(0.9),
                nesterov: true,
                weight_decay: c(1e-3),
            }),
            Update::Momentum(Momentum::Core {
                lr: c(1e-2),
                momentum: c(0.9),
            }),
        ];
        for nesterov in [false, true] {
            rules.push(Update::Momentum(Momentum::Torch {
                lr: c(1e-2),
                momentum: c(0.9),
                dampening: c(if nesterov { 0.0 } else { 0.1 }),
                nesterov,
                weight_decay: c(1e-2),
                first_step: t == 1,
            }));
        }
        for flavor in [Flavor::Torch, Flavor::Keras] {
            for (momentum, centered, weight_decay) in [
                (0.0, false, 0.0),
                (0.0, true, 1e-2),
                (0.9, false, 1e-2),
                (0.9, true, 0.0),
            ] {
                rules.push(rmsprop(flavor, momentum, centered, weight_decay));
            }
        }
        rules
    };
    let initial = [
        spread::<T>("param", 1001),
        spread::<T>("other param", 1001),
        spread::<T>("long param", LONG),
    ];
    // Their gradients at steps 1 to 3.
    let grads = (1..=3)
        .map(|t| {
            (0..initial.len())
                .map(|i| {
                    device.upload(&spread::<T>(
                        &format!("grad {t} of param {i}"),
                        initial[i].len(),
                    ))
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    let mut hash = BitsHash::new();
    for rule in 0..rules(1).len() {
        let slot_count = rules(1)[rule].slot_names().len();
        let mut params = Vec::with_capacity(initial.len());
        let mut slots = Vec::with_capacity(initial.len());
        for param in &initial {
            params.push(device.upload(param)?);
            slots.push(
                (0..slot_count)
                    .map(|_| device.alloc_zeros(param.len()))
                    .collect::<Result<Vec<_>>>()?,
            );
        }
        for (t, grads) in (1..).zip(&grads) {
            let update = rules(t)[rule];
            for ((param, slots), grad) in params.iter_mut().zip(&mut slots).zip(grads) {
                let mut slots: Vec<&mut D::Buffer<T>> = slots.iter_mut().collect();
                device.update(&update, param, grad, &mut slots)?;
            }
        }
        for (param, slots) in params.iter().zip(&slots) {
            hash.values(&device.download(param)?);
            for slot in slots {
                hash.values(&device.download(slot)?);
            }
        }
    }
    Ok(hash)
}

/// The fused LSTM cell's forward and backward, on a small batch and one that splits over
/// tasks, with pre-activations on every branch of the lane sigmoid and tanh.
fn cells<T: Float, D: GoldenDevice<T>>(device: &D) -> Result<BitsHash> {
    let mut hash = BitsHash::new();
    for (batch, hidden) in [(1, 1), (5, 37), (64, 257)] {
        let units = batch * hidden;
        let mut gates = normal::<T>("gates", 4 * units, 3.0);
        // Large pre-activations (saturated gates, the lanes' fallbacks) here and there.
        let extremes = [20.0, -20.0, 100.0, -100.0, 1e-30, 9.5, -95.0];
        for (i, g) in gates.iter_mut().enumerate().step_by(29) {
            *g = c(extremes[i % extremes.len()]);
        }
        let gates = device.upload(&gates)?;
        let cell_state = device.upload(&normal::<T>("cell state", units, 2.0))?;
        let (mut cache, mut state) = (
            device.alloc_zeros(5 * units)?,
            device.alloc_zeros(2 * units)?,
        );
        device.lstm_cell(
            batch,
            hidden,
            LstmForward {
                gates: &gates,
                c: &cell_state,
                cache: &mut cache,
                state: &mut state,
            },
        )?;
        hash.values(&device.download(&cache)?);
        hash.values(&device.download(&state)?);
        let grad_state = device.upload(&spread::<T>("grad state", 2 * units))?;
        let (mut grad_gates, mut grad_c) =
            (device.alloc_zeros(4 * units)?, device.alloc_zeros(units)?);
        device.lstm_cell_backward(
            batch,
            hidden,
            LstmBackward {
                cache: &cache,
                c: &cell_state,
                grad_state: &grad_state,
                grad_gates: &mut grad_gates,
                grad_c: &mut grad_c,
            },
        )?;
        hash.values(&device.download(&grad_gates)?);
        hash.values(&device.download(&grad_c)?);
    }
    Ok(hash)
}
