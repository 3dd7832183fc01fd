//! rlgrad's GEMM: the canonical order of [`crate::kernels::MatmulKernel`] (each output a
//! chain of fused multiply-adds over `k` in increasing order, starting from `-0`) at the
//! speed of a blocked, packed BLAS-style kernel.
//!
//! The canonical order fixes every rounding of every output, so the result does not
//! depend on the blocking, the thread count, the vector width or the device: a `k` block
//! continues the chains of the previous one from the output tile, and threads split the
//! output rows. The blocking follows BLIS: panels of `B` (`KC x NC`) and `A` (`MC x KC`)
//! are packed into per-thread buffers that are reused from call to call (so a warmed-up
//! loop allocates nothing), and an `MR x NR` microkernel keeps its tile of the output in
//! registers while it walks `k`. Tile sizes are picked per instruction set (AVX-512,
//! AVX2 + FMA, NEON on aarch64, baseline); the microkernel is plain Rust over fixed-size
//! arrays, compiled once per instruction set, with `mul_add` as the only arithmetic.

use std::cell::RefCell;

use super::elementwise::with_formula;
use super::lines::interleave;
use crate::cpu::grain::{Family, grain};
#[cfg(target_arch = "x86_64")]
use crate::cpu::simd::Isa;
use crate::kernels::UnaryOp;
use crate::{DType, Float, Par};

#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "x86_64")]
pub(super) mod x86;

/// A read-only strided matrix: element `(i, j)` is
/// `data[offset + i * row_stride + j * col_stride]` (a stride may be 0: a broadcast).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided<'a, T> {
    pub data: &'a [T],
    pub offset: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<T: Copy> Strided<'_, T> {
    /// The transposed view (no copy).
    fn transposed(self) -> Self {
        Self {
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }
}

/// What a product does to each output as it stores it (a linear layer's bias and
/// activation): `activation(acc + bias[j])`, the add one rounding and the activation its
/// canonical formula ([`UnaryOp::apply`]), so that the result is the bits of the three ops
/// run one after the other.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epilogue<'a, T> {
    /// One value per output column.
    pub bias: &'a [T],
    pub activation: Option<UnaryOp<T>>,
}

impl<T: Float> Epilogue<'_, T> {
    /// Applies the epilogue to `row`, whose first element is in column `first_col`.
    #[inline(always)]
    fn apply(&self, row: &mut [T], first_col: usize) {
        let bias = &self.bias[first_col..first_col + row.len()];
        match self.activation {
            None => add_bias(row, bias, |s| s),
            Some(activation) => {
                with_formula!(activation, |formula| add_bias::<T>(row, bias, formula))
            }
        }
    }
}

/// `row[j] = activation(row[j] + bias[j])`.
#[inline(always)]
fn add_bias<T: Float>(row: &mut [T], bias: &[T], activation: impl Fn(T) -> T) {
    for (x, &b) in row.iter_mut().zip(bias) {
        *x = activation(*x + b);
    }
}

/// `k` per packed block.
const KC: usize = 256;
/// Rows of `A` per packed block (a multiple of every `MR`).
const MC: usize = 96;
/// Columns of `B` per packed block (a multiple of every `NR`).
const NC: usize = 1024;
/// Elements of a block of a row-major `B` (`kc x nc`) up to which it is read in place
/// rather than packed (16K `f32`: 64 KiB, an L1 and a half).
const IN_PLACE_B: usize = 1 << 14;
/// A block of a row-major `B` up to this many elements (128K `f32`, half an L2) is also
/// read in place when `A` has at most [`IN_PLACE_ROWS`] rows: packing a block costs about
/// as much as 8 rows of `A` against it, which a product of a few hundred rows (every
/// layer of a batch-256 agent) does not win back. Taller products repay the packing
/// (measured: a `[400, 256]^T @ [256, 300]` is 4% faster packed), and wider blocks (rows
/// of 1024 `f32`, 4 KiB apart) read in place thrash the L1's sets.
const IN_PLACE_B_FEW_ROWS: usize = 1 << 17;
/// See [`IN_PLACE_B_FEW_ROWS`].
const IN_PLACE_ROWS: usize = 256;
/// Outputs narrower than this (and taller than wide) are computed as `c^T = b^T a^T`, so
/// that the microkernel's wide side runs along the long side of `c`.
const NARROW: usize = 16;
/// Products of at most this many rows (after that turn: the first layer's `x^T @ dy` and
/// `dy @ w^T` of an agent whose observations or actions have 3 or 4 values) run an `f32`
/// tile of 4 rows instead of the 8-row (AVX-512) or 6-row (AVX2) one, whose rows past the
/// product's would repeat its last row: 3 rows fill 3/4 of its multiply-adds instead of
/// 3/8 or 1/2. AVX-512's has 4 vectors a row (16 chains, 21 of the 32 registers); AVX2's
/// has 2, as its 16 registers hold no more than 12 chains beside a step of `B`.
#[cfg(target_arch = "x86_64")]
const SHORT_ROWS: usize = 4;

/// `c = a @ b` for `a: [m, k]`, `b: [k, n]` and a dense row-major `c: [m, n]`, in the
/// canonical order (`k >= 1`), then the `epilogue` if any (its bias holds `n` values).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: Float>(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    c: &mut [T],
    par: Par,
    epilogue: Option<Epilogue<'_, T>>,
) {
    debug_assert!(k >= 1 && c.len() == m * n);
    debug_assert!(epilogue.is_none_or(|e| e.bias.len() == n));
    let threads = par
        .for_work(m * n * k, grain(Family::Matmul))
        .threads()
        .min(m.div_ceil(MC / 4).max(1));
    if threads <= 1 {
        return dispatch(m, n, k, a, b, c, epilogue);
    }
    // Threads own whole rows of `c`: every output's chain is the same whoever runs it.
    let rows_per_task = m.div_ceil(threads).next_multiple_of(8);
    par.for_each_chunk_mut(c, rows_per_task * n, |task, rows| {
        let first = task * rows_per_task;
        let a = Strided {
            offset: a.offset + first * a.row_stride,
            ..a
        };
        dispatch(rows.len() / n, n, k, a, b, rows, epilogue);
    });
}

/// Runs the blocked product in the version for the widest instruction set with FMA,
/// with this thread's packing buffers. (The buffers are taken here, outside the
/// instruction-set versions, so that nothing between those and the microkernel is a call
/// that could be compiled without their features.)
fn dispatch<T: Float>(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    c: &mut [T],
    epilogue: Option<Epilogue<'_, T>>,
) {
    // Every output is the same chain in either orientation; pick the one without waste
    // (a matrix-vector product and an outer product have kernels of their own).
    // (A product of few steps of a row-major `B` runs row by row in either orientation.)
    let transpose = n < NARROW && m > n && n > 1 && k > 1 && !runs_few_steps(k, n, b.col_stride, 1);
    // The blocked product of a row-major `c` applies the epilogue to each block of rows
    // once its last `k` block is done, and the product of few steps to each row, while the
    // rows are in cache; other outputs (written transposed, matrix-vector products) get it
    // in a pass at the end.
    let in_tiles = !transpose && n > 1;
    let original_n = n;
    let (m, n, a, b, c_strides) = if transpose {
        (n, m, b.transposed(), a.transposed(), (1, n))
    } else {
        (m, n, a, b, (n, 1))
    };
    // (A matrix-vector product packs blocks of `GEMV_ROWS` rows of `A` in the same buffer.)
    let (kc, nc) = (KC.min(k), NC.min(n.next_multiple_of(64)).max(GEMV_ROWS));
    with_pack::<T, _>(kc * nc, |b_pack| {
        let operands = Operands {
            m,
            n,
            k,
            a,
            b,
            b_pack,
            c_strides,
            epilogue: epilogue.filter(|_| in_tiles),
        };
        run_blocked(operands, c);
    });
    if let Some(epilogue) = epilogue.filter(|_| !in_tiles) {
        for row in c.chunks_exact_mut(original_n) {
            epilogue.apply(row, 0);
        }
    }
}

/// The blocked product in the version for the widest instruction set with FMA.
#[inline(always)]
fn run_blocked<T: Float>(operands: Operands<'_, T>, c: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    match crate::cpu::simd::isa() {
        // SAFETY: `isa` never exceeds what the CPU supports: AVX-512F and FMA here.
        Isa::Avx512 => return unsafe { x86::avx512(operands, c) },
        // SAFETY: as above, AVX2 and FMA.
        Isa::Avx2 => return unsafe { x86::avx2(operands, c) },
        Isa::Baseline => {}
    }
    #[cfg(target_arch = "aarch64")]
    neon::blocked(operands, c);
    #[cfg(not(target_arch = "aarch64"))]
    blocked::<T, Portable, 4, 8>(operands, c);
}

/// The inputs of one blocked product, the packing buffer of `B` it uses, the strides of
/// its output (`(n, 1)` for row-major `c`, `(1, m)` for `c` written transposed), and the
/// epilogue it applies to its blocks of rows (only with a row-major `c`).
struct Operands<'a, T> {
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'a, T>,
    b: Strided<'a, T>,
    b_pack: &'a mut [T],
    c_strides: (usize, usize),
    epilogue: Option<Epilogue<'a, T>>,
}

/// The per-thread packing buffers of `B`, reused from call to call.
#[derive(Default)]
struct Packs {
    f32: Vec<f32>,
    f64: Vec<f64>,
}

thread_local! {
    static PACKS: RefCell<Packs> = RefCell::default();
}

/// Bytes to which packed panels are aligned: a cache line, so that no vector load of a
/// panel (a whole AVX-512 register at most) straddles two lines.
const PACK_ALIGN: usize = 64;

/// Calls `f` with this thread's packing buffer for `T`, `len` long and starting on a
/// [`PACK_ALIGN`] boundary.
#[inline(always)]
fn with_pack<T: Float, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    PACKS.with(|packs| {
        let mut packs = packs.borrow_mut();
        let packs = &mut *packs;
        let pack: &mut dyn std::any::Any = match T::DTYPE {
            DType::F32 => &mut packs.f32,
            _ => &mut packs.f64,
        };
        let pack: &mut Vec<T> = pack.downcast_mut().expect("the buffer of T's type");
        let room = len + PACK_ALIGN / size_of::<T>();
        if pack.len() < room {
            pack.resize(room, T::zero());
        }
        // The allocator aligns to at least `T`, so the offset is less than a line (`min`
        // only keeps the slice in bounds if `align_offset` ever declined to compute one).
        let offset = pack.as_ptr().align_offset(PACK_ALIGN).min(room - len);
        f(&mut pack[offset..offset + len])
    })
}

/// The blocked product with the `MR x NR` microkernel `K` (`MR` divides [`MC`],
/// `NR` divides 64 and [`NC`]).
#[inline(always)]
fn blocked<T: Float, K: Microkernel<T, MR, NR>, const MR: usize, const NR: usize>(
    operands: Operands<'_, T>,
    c: &mut [T],
) {
    let Operands {
        m,
        n,
        k,
        a,
        b,
        b_pack,
        c_strides: (row_stride, col_stride),
        epilogue,
    } = operands;
    debug_assert!(epilogue.is_none() || (col_stride == 1 && n > 1));
    if runs_few_steps(k, n, b.col_stride, col_stride) {
        let strides = (row_stride, col_stride);
        return few_steps(m, n, k, a, b, c, strides, epilogue);
    }
    if n == 1 {
        return matrix_vector(m, k, a, b, c, row_stride, b_pack);
    }
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            // A small row-major `B` (see `IN_PLACE_B`) is read where it lies (it
            // stays in cache anyway, and packing it cost as much as a tenth of a small
            // product); only a last panel narrower than `NR` is packed, padded with zeros.
            let in_place = b.col_stride == 1
                && (kc * nc <= IN_PLACE_B
                    || (m <= IN_PLACE_ROWS && kc * nc <= IN_PLACE_B_FEW_ROWS));
            let whole = if in_place { nc / NR * NR } else { 0 };
            pack_b::<T, NR>(b, pc, kc, jc + whole, nc - whole, b_pack);
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                for jr in (0..nc).step_by(NR) {
                    let b_panel = if jr < whole {
                        let start = b.offset + pc * b.row_stride + jc + jr;
                        BPanel {
                            data: &b.data[start..start + (kc - 1) * b.row_stride + NR],
                            step: b.row_stride,
                        }
                    } else {
                        BPanel {
                            data: &b_pack[(jr - whole) * kc..(jr - whole + NR) * kc],
                            step: NR,
                        }
                    };
                    for ir in (0..mc).step_by(MR) {
                        let rows = MR.min(mc - ir);
                        let a_rows = ARows::new(a, ic + ir, rows, pc, kc);
                        let tile = Tile {
                            row: ic + ir,
                            col: jc + jr,
                            rows,
                            cols: NR.min(nc - jr),
                            row_stride,
                            col_stride,
                        };
                        tile_product::<T, K, MR, NR>(kc, a_rows, b_panel, c, tile, pc == 0);
                    }
                }
                // The last `k` block of these rows is done: the epilogue runs over them
                // while they are in cache, a row of the block at a time.
                if let Some(epilogue) = epilogue.filter(|_| pc + kc == k) {
                    for row in ic..ic + mc {
                        let start = row * row_stride + jc;
                        epilogue.apply(&mut c[start..start + nc], jc);
                    }
                }
            }
        }
    }
}

/// Products of at most this many steps (`k`: a first layer's 3 or 4 inputs, or the
/// outer product of `k = 1`) run [`few_steps`] instead of the tiles: with so few
/// multiply-adds per output, a tile's set-up and stores cost more than its FMAs.
const FEW_STEPS: usize = 4;

/// Whether a product of `k` steps into `n` columns runs as [`few_steps`] instead of in
/// tiles: an outer product (`k = 1`), or at most [`FEW_STEPS`] steps of a row-major `B`
/// (`b_col_stride` 1) into a row-major `C` of more than one column. The orientation is
/// chosen with the same test, so that such a product is never transposed away from it.
fn runs_few_steps(k: usize, n: usize, b_col_stride: usize, c_col_stride: usize) -> bool {
    k == 1 || (k <= FEW_STEPS && n > 1 && b_col_stride == 1 && c_col_stride == 1)
}

/// `c = a @ b` for `k <=` [`FEW_STEPS`], row by row: each output is its whole chain over
/// the `k` steps, written once (`k` a constant of the loop, so that it runs on full
/// vectors of outputs), with `B`'s `k` rows (a few KB) in L1; then the `epilogue` on the
/// row while it is in cache (only with a row-major `c`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn few_steps<T: Float>(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    c: &mut [T],
    strides: (usize, usize),
    epilogue: Option<Epilogue<'_, T>>,
) {
    match k {
        1 => few_steps_of::<T, 1>(m, n, a, b, c, strides, epilogue),
        2 => few_steps_of::<T, 2>(m, n, a, b, c, strides, epilogue),
        3 => few_steps_of::<T, 3>(m, n, a, b, c, strides, epilogue),
        4 => few_steps_of::<T, 4>(m, n, a, b, c, strides, epilogue),
        _ => unreachable!("few_steps runs products of 1 to FEW_STEPS steps"),
    }
}

/// [`few_steps`] for `k = K`.
#[inline(always)]
fn few_steps_of<T: Float, const K: usize>(
    m: usize,
    n: usize,
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    c: &mut [T],
    (row_stride, col_stride): (usize, usize),
    epilogue: Option<Epilogue<'_, T>>,
) {
    debug_assert!(epilogue.is_none() || col_stride == 1);
    for i in 0..m {
        let a_row: [T; K] =
            std::array::from_fn(|p| a.data[a.offset + i * a.row_stride + p * a.col_stride]);
        if col_stride == 1 && b.col_stride == 1 {
            let b_rows: [&[T]; K] = std::array::from_fn(|p| {
                let start = b.offset + p * b.row_stride;
                &b.data[start..start + n]
            });
            let row = &mut c[i * row_stride..i * row_stride + n];
            for (j, out) in row.iter_mut().enumerate() {
                let mut acc = T::neg_zero();
                for (&ap, b_row) in a_row.iter().zip(&b_rows) {
                    acc = ap.mul_add(b_row[j], acc);
                }
                *out = acc;
            }
            if let Some(epilogue) = epilogue {
                epilogue.apply(row, 0);
            }
        } else {
            for j in 0..n {
                let b_at = |p: usize| b.data[b.offset + p * b.row_stride + j * b.col_stride];
                let chain = (0..K).fold(T::neg_zero(), |acc, p| a_row[p].mul_add(b_at(p), acc));
                c[i * row_stride + j * col_stride] = chain;
            }
            if let Some(epilogue) = epilogue {
                epilogue.apply(&mut c[i * row_stride..i * row_stride + n], 0);
            }
        }
    }
}

/// Rows of a matrix-vector product computed side by side: their chains over `k` are
/// independent, so each step is a few vector fused multiply-adds that overlap.
const GEMV_ROWS: usize = 64;

/// `c = a @ b` for `n = 1`: the chain of each row over `k`, [`GEMV_ROWS`] rows at a time.
/// Columns of rows side by side in memory (a transposed `a`) are read where they lie; the
/// rows of a row-major `f32` `a` on a CPU with AVX-512 go through register transposes
/// straight into the chains; other rows are first copied column by column into `pack`,
/// as many steps at a time as it holds.
#[inline(always)]
fn matrix_vector<T: Float>(
    m: usize,
    k: usize,
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    c: &mut [T],
    row_stride: usize,
    pack: &mut [T],
) {
    let x_at = |p: usize| b.data[b.offset + p * b.row_stride];
    let steps = pack.len() / GEMV_ROWS;
    assert!(steps >= 1, "a packing buffer of at least one step");
    let step = |acc: &mut [T; GEMV_ROWS], column: &[T; GEMV_ROWS], x: T| {
        *acc = std::array::from_fn(|r| column[r].mul_add(x, acc[r]));
    };
    for first in (0..m).step_by(GEMV_ROWS) {
        let rows = GEMV_ROWS.min(m - first);
        // The missing rows of the last block repeat its last row (dropped below).
        let row_starts: [usize; GEMV_ROWS] =
            std::array::from_fn(|r| a.offset + (first + r.min(rows - 1)) * a.row_stride);
        let mut acc = [T::neg_zero(); GEMV_ROWS];
        if a.row_stride == 1 {
            let mut padded = [T::zero(); GEMV_ROWS];
            for p in 0..k {
                let start = row_starts[0] + p * a.col_stride;
                let column: &[T; GEMV_ROWS] = if rows == GEMV_ROWS {
                    a.data[start..start + GEMV_ROWS]
                        .try_into()
                        .expect("a block of GEMV_ROWS elements")
                } else {
                    padded[..rows].copy_from_slice(&a.data[start..start + rows]);
                    &padded
                };
                step(&mut acc, column, x_at(p));
            }
        } else if !row_major_f32(a, b, k, &row_starts, &mut acc) {
            for done in (0..k).step_by(steps) {
                let count = steps.min(k - done);
                let block = &mut pack[..count * GEMV_ROWS];
                let starts = row_starts.map(|start| start + done * a.col_stride);
                if a.col_stride == 1 {
                    interleave(crate::cpu::simd::isa(), a.data, &starts, block, GEMV_ROWS);
                } else {
                    for (r, &start) in starts.iter().enumerate() {
                        scatter_line(a.data, start, a.col_stride, block, GEMV_ROWS, r);
                    }
                }
                for (p, column) in block.as_chunks::<GEMV_ROWS>().0.iter().enumerate() {
                    step(&mut acc, column, x_at(done + p));
                }
            }
        }
        for (r, &value) in acc.iter().enumerate().take(rows) {
            c[(first + r) * row_stride] = value;
        }
    }
}

/// The rows of a row-major `f32` `a` starting at `row_starts` times a contiguous `b`,
/// written into `acc`, when the CPU has AVX2 or AVX-512 (`false`, and `acc` untouched,
/// otherwise).
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn row_major_f32<T: Float>(
    a: Strided<'_, T>,
    b: Strided<'_, T>,
    k: usize,
    row_starts: &[usize; GEMV_ROWS],
    acc: &mut [T; GEMV_ROWS],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let (Some(data), Some(x), Some(acc)) = (
        crate::cpu::lanes::as_f32(a.data),
        crate::cpu::lanes::as_f32(&b.data[b.offset..]),
        crate::cpu::lanes::as_f32_mut(acc),
    ) && a.col_stride == 1
        && b.row_stride == 1
    {
        let rows = match crate::cpu::simd::isa() {
            // SAFETY: `isa` never exceeds what the CPU supports: AVX-512F and FMA here.
            Isa::Avx512 => unsafe { x86::row_major_matrix_vector(data, row_starts, &x[..k]) },
            // SAFETY: as above, AVX2 and FMA.
            Isa::Avx2 => unsafe { x86::row_major_matrix_vector_avx2(data, row_starts, &x[..k]) },
            Isa::Baseline => return false,
        };
        acc.copy_from_slice(&rows);
        return true;
    }
    false
}

/// Writes `count` elements of `data` from `start` with `stride` (0: one value repeated)
/// into `lane` of consecutive steps of `steps` (each step `width` long).
#[inline(always)]
fn scatter_line<T: Copy>(
    data: &[T],
    start: usize,
    stride: usize,
    steps: &mut [T],
    width: usize,
    lane: usize,
) {
    let count = steps.len() / width;
    if stride == 0 {
        let value = data[start];
        steps
            .chunks_exact_mut(width)
            .for_each(|step| step[lane] = value);
    } else {
        let line = data[start..start + (count - 1) * stride + 1]
            .iter()
            .step_by(stride);
        for (step, &v) in steps.chunks_exact_mut(width).zip(line) {
            step[lane] = v;
        }
    }
}

/// `B[pc.., jc..]` (`kc x nc`) into panels of `NR` columns, each `kc` steps of `NR`
/// values; columns past `nc` are zero.
#[inline(always)]
fn pack_b<T: Float, const NR: usize>(
    b: Strided<'_, T>,
    pc: usize,
    kc: usize,
    jc: usize,
    nc: usize,
    pack: &mut [T],
) {
    for (panel, chunk) in pack[..nc.next_multiple_of(NR) * kc]
        .chunks_exact_mut(NR * kc)
        .enumerate()
    {
        let first = panel * NR;
        if b.col_stride == 1 && first + NR <= nc {
            for (p, step) in chunk.chunks_exact_mut(NR).enumerate() {
                let start = b.offset + (pc + p) * b.row_stride + jc + first;
                step.copy_from_slice(&b.data[start..start + NR]);
            }
            continue;
        }
        let lanes = NR.min(nc - first);
        if b.row_stride == 1 {
            // A transposed `B` (the weight of `g @ W^T`): its columns are the lines.
            let starts: [usize; NR] =
                std::array::from_fn(|lane| b.offset + pc + (jc + first + lane) * b.col_stride);
            interleave(crate::cpu::simd::isa(), b.data, &starts[..lanes], chunk, NR);
        } else {
            for lane in 0..lanes {
                let start = b.offset + pc * b.row_stride + (jc + first + lane) * b.col_stride;
                scatter_line(b.data, start, b.row_stride, chunk, NR, lane);
            }
        }
        for step in chunk.chunks_exact_mut(NR) {
            step[lanes..].fill(T::zero());
        }
    }
}

/// Where a microkernel's tile sits in `c`.
#[derive(Clone, Copy)]
struct Tile {
    row: usize,
    col: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl Tile {
    /// The index in `c` of element `(i, j)` of the tile.
    #[inline(always)]
    fn index(&self, i: usize, j: usize) -> usize {
        (self.row + i) * self.row_stride + (self.col + j) * self.col_stride
    }
}

/// `MR` rows of `A` read in place: element `(i, p)` is `data[starts[i] + p * step]`, for
/// `p < steps` (checked when made). The microkernel broadcasts them one by one, so `A` is
/// never packed.
#[derive(Clone, Copy)]
struct ARows<'a, T, const MR: usize> {
    data: &'a [T],
    starts: [usize; MR],
    step: usize,
}

impl<'a, T, const MR: usize> ARows<'a, T, MR> {
    /// Rows `first..first + rows` of `a` (the last repeated for the `MR - rows` missing
    /// ones, whose outputs are dropped) from column `col`, for `steps` columns.
    #[inline(always)]
    fn new(a: Strided<'a, T>, first: usize, rows: usize, col: usize, steps: usize) -> Self {
        let starts = std::array::from_fn(|i| {
            a.offset + (first + i.min(rows - 1)) * a.row_stride + col * a.col_stride
        });
        let last = starts.iter().max().copied().unwrap_or(0) + (steps - 1) * a.col_stride;
        assert!(last < a.data.len(), "the rows of A lie inside its buffer");
        Self {
            data: a.data,
            starts,
            step: a.col_stride,
        }
    }
}

/// `kc` steps of `NR` values of `B`: step `p` at `data[p * step..][..NR]` (a packed panel,
/// `step = NR`, or a small row-major `B` read in place, `step` its row stride).
#[derive(Clone, Copy)]
struct BPanel<'a, T> {
    data: &'a [T],
    step: usize,
}

impl<T> BPanel<'_, T> {
    /// Whether the panel holds `kc` steps of `nr` values.
    #[inline(always)]
    fn holds(&self, kc: usize, nr: usize) -> bool {
        kc == 0 || self.data.len() >= (kc - 1) * self.step + nr
    }
}

/// A microkernel: `kc` steps of `c[i][j] = fma(a[i, p], b[j], c[i][j])` over `A`'s rows in
/// place and a panel of `B`, on the tile whose row `i` is `c[i * stride..][..NR]`. The
/// chains start at `-0` when `first` (the first `k` block), else from the tile's values.
trait Microkernel<T, const MR: usize, const NR: usize> {
    fn run(
        kc: usize,
        a: ARows<'_, T, MR>,
        b: BPanel<'_, T>,
        c: &mut [T],
        stride: usize,
        first: bool,
    );
}

/// Portable Rust: `mul_add` on every element (what x86 CPUs without FMA and other
/// architectures run; on aarch64, which has kernels of its own, the tests' baseline).
#[cfg(any(test, not(target_arch = "aarch64")))]
struct Portable;

#[cfg(any(test, not(target_arch = "aarch64")))]
impl<T: Float, const MR: usize, const NR: usize> Microkernel<T, MR, NR> for Portable {
    #[inline(always)]
    fn run(
        kc: usize,
        a: ARows<'_, T, MR>,
        b: BPanel<'_, T>,
        c: &mut [T],
        stride: usize,
        first: bool,
    ) {
        let mut acc = [[T::neg_zero(); NR]; MR];
        if !first {
            for (i, row) in acc.iter_mut().enumerate() {
                row.copy_from_slice(&c[i * stride..i * stride + NR]);
            }
        }
        for p in 0..kc {
            let b = &b.data[p * b.step..p * b.step + NR];
            for (row, &start) in acc.iter_mut().zip(&a.starts) {
                let ai = a.data[start + p * a.step];
                for (x, &bj) in row.iter_mut().zip(b) {
                    *x = ai.mul_add(bj, *x);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            c[i * stride..i * stride + NR].copy_from_slice(row);
        }
    }
}

/// One `MR x NR` tile: continues each output's chain (or starts it at `-0` for the first
/// `k` block) over `kc` steps of `A`'s rows and `B`'s packed panel. A whole tile of a
/// row-major `c` is computed in place; an edge tile (or a transposed `c`) through a
/// buffer.
#[inline(always)]
fn tile_product<T: Float, K: Microkernel<T, MR, NR>, const MR: usize, const NR: usize>(
    kc: usize,
    a: ARows<'_, T, MR>,
    b: BPanel<'_, T>,
    c: &mut [T],
    tile: Tile,
    first_block: bool,
) {
    if tile.col_stride == 1 && tile.rows == MR && tile.cols == NR {
        let start = tile.index(0, 0);
        let end = tile.index(MR - 1, 0) + NR;
        return K::run(kc, a, b, &mut c[start..end], tile.row_stride, first_block);
    }
    let mut acc = [[T::neg_zero(); NR]; MR];
    let cols = tile.cols;
    if !first_block {
        for (i, row) in acc.iter_mut().enumerate().take(tile.rows) {
            if tile.col_stride == 1 {
                let start = tile.index(i, 0);
                row[..cols].copy_from_slice(&c[start..start + cols]);
            } else {
                for (j, x) in row.iter_mut().enumerate().take(cols) {
                    *x = c[tile.index(i, j)];
                }
            }
        }
    }
    K::run(kc, a, b, acc.as_flattened_mut(), NR, first_block);
    for (i, row) in acc.iter().enumerate().take(tile.rows) {
        if tile.col_stride == 1 {
            let start = tile.index(i, 0);
            c[start..start + cols].copy_from_slice(&row[..cols]);
        } else {
            for (j, &x) in row.iter().enumerate().take(cols) {
                c[tile.index(i, j)] = x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The canonical order written plainly.
    fn reference<T: Float>(m: usize, n: usize, k: usize, a: &[T], b: &[T]) -> Vec<T> {
        let mut c = vec![T::zero(); m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::neg_zero();
                for p in 0..k {
                    acc = a[i * k + p].mul_add(b[p * n + j], acc);
                }
                c[i * n + j] = acc;
            }
        }
        c
    }

    /// A product with a bias and activation gives the bits of the product, the add and the
    /// activation one after the other, in every path: few steps with `B` row-major or
    /// transposed (`k = 1` and 3), and the tiles.
    #[test]
    fn the_epilogue_is_applied_on_every_path() {
        let mut rng = crate::Rng::new(3, "gemm epilogue");
        for (m, n, k) in [(5, 70, 1), (5, 70, 3), (9, 40, 20)] {
            let a: Vec<f32> = (0..m * k).map(|_| rng.normal(0.0, 1.0)).collect();
            let b: Vec<f32> = (0..k * n).map(|_| rng.normal(0.0, 1.0)).collect();
            let bias: Vec<f32> = (0..n).map(|_| rng.normal(0.0, 1.0)).collect();
            let sa = Strided {
                data: &a,
                offset: 0,
                row_stride: k,
                col_stride: 1,
            };
            let b_row_major = Strided {
                data: &b,
                offset: 0,
                row_stride: n,
                col_stride: 1,
            };
            let b_t: Vec<f32> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
            let b_transposed = Strided {
                data: &b_t,
                offset: 0,
                row_stride: 1,
                col_stride: k,
            };
            let want: Vec<f32> = reference(m, n, k, &a, &b)
                .iter()
                .enumerate()
                .map(|(i, &x)| (x + bias[i % n]).max(0.0))
                .collect();
            for sb in [b_row_major, b_transposed] {
                let epilogue = Epilogue {
                    bias: &bias,
                    activation: Some(UnaryOp::Relu),
                };
                let mut c = vec![f32::NAN; m * n];
                gemm(m, n, k, sa, sb, &mut c, Par::Seq, Some(epilogue));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&c), bits(&want), "{m}x{n}x{k}, B strides {sb:?}");
            }
        }
    }

    // One test per element type, so that the harness runs them side by side (under
    // `cargo xtask test-x86`'s emulation they are most of the core's unit tests' time).
    #[test]
    fn every_blocking_and_version_gives_the_canonical_bits_in_f32() {
        check_every_version::<f32>();
    }

    #[test]
    fn every_blocking_and_version_gives_the_canonical_bits_in_f64() {
        check_every_version::<f64>();
    }

    /// Every version of the product (each instruction set's, the baseline, transposed
    /// operands, several threads) against the canonical order written plainly, bit for bit,
    /// over shapes around the tile, block and matrix-vector edges.
    fn check_every_version<T: Float>() {
        let mut rng = crate::Rng::new(9, "gemm");
        for (m, n, k) in [
            (1, 1, 1),
            (7, 33, 5),
            (100, 64, 300),
            (13, 1030, 260),
            (97, 20, 513),
            (100, 1, 64),
            // Matrix-vector products: 16-step and 64-row edges of the register transposes.
            (256, 1, 300),
            (37, 1, 17),
            (70, 1, 16),
            (300, 7, 700),
            (2, 40, 3),
            // The short tiles: edge panels of 64 columns, two `k` blocks, a transposed
            // product of 3 rows, a single row.
            (3, 400, 300),
            (256, 3, 400),
            (4, 130, 17),
            (1, 100, 50),
            // Few steps: whole chunks of 64 and a rest, and a narrow product left unturned.
            (256, 400, 3),
            (100, 130, 4),
            (256, 3, 4),
            // Parallel over rows (three tasks of 8 rows) with several blocks of B along
            // both k and n.
            (24, 1100, 300),
        ] {
            let a: Vec<T> = (0..m * k)
                .map(|_| T::from_f64(rng.normal(0.0, 1.0)))
                .collect();
            let b: Vec<T> = (0..k * n)
                .map(|_| T::from_f64(rng.normal(0.0, 1.0)))
                .collect();
            let want = reference(m, n, k, &a, &b);
            let (sa, sb) = (
                Strided {
                    data: &a,
                    offset: 0,
                    row_stride: k,
                    col_stride: 1,
                },
                Strided {
                    data: &b,
                    offset: 0,
                    row_stride: n,
                    col_stride: 1,
                },
            );
            let mut versions: Vec<(&str, Vec<T>)> = Vec::new();
            let mut run = |name, f: &dyn Fn(&mut [T])| {
                let mut c = vec![T::nan(); m * n];
                f(&mut c);
                versions.push((name, c));
            };
            run("dispatch", &|c| dispatch(m, n, k, sa, sb, c, None));
            let at = |s: &Strided<'_, T>, i: usize, j: usize| {
                s.data[s.offset + i * s.row_stride + j * s.col_stride]
            };
            let transposed_a: Vec<T> = (0..k * m).map(|x| at(&sa, x % m, x / m)).collect();
            let ta = Strided {
                data: &transposed_a,
                offset: 0,
                row_stride: m,
                col_stride: 1,
            }
            .transposed();
            run("transposed lhs", &|c| dispatch(m, n, k, ta, sb, c, None));
            let transposed_b: Vec<T> = (0..n * k).map(|x| at(&sb, x % k, x / k)).collect();
            let tb = Strided {
                data: &transposed_b,
                offset: 0,
                row_stride: k,
                col_stride: 1,
            }
            .transposed();
            run("transposed rhs", &|c| dispatch(m, n, k, sa, tb, c, None));
            // The blocked product with `kernel`, on this thread's packing buffer.
            let blocked_with = |c: &mut [T], kernel: &dyn Fn(Operands<'_, T>, &mut [T])| {
                with_pack::<T, _>(KC * NC, |b_pack| {
                    let operands = Operands {
                        m,
                        n,
                        k,
                        a: sa,
                        b: sb,
                        b_pack,
                        c_strides: (n, 1),
                        epilogue: None,
                    };
                    kernel(operands, c)
                })
            };
            run("baseline", &|c| {
                blocked_with(c, &|o, c| blocked::<T, Portable, 4, 8>(o, c))
            });
            run("parallel", &|c| {
                gemm(m, n, k, sa, sb, c, Par::rayon(3), None)
            });
            #[cfg(target_arch = "x86_64")]
            {
                if Isa::Avx2.is_supported() {
                    run("avx2", &|c| {
                        blocked_with(c, &|o, c| {
                            // SAFETY: the CPU supports AVX2 and FMA, checked above.
                            unsafe { x86::avx2(o, c) }
                        })
                    });
                }
                if Isa::Avx512.is_supported() {
                    run("avx512", &|c| {
                        blocked_with(c, &|o, c| {
                            // SAFETY: the CPU supports AVX-512F and FMA, checked above.
                            unsafe { x86::avx512(o, c) }
                        })
                    });
                }
            }
            #[cfg(target_arch = "aarch64")]
            run("neon", &|c| blocked_with(c, &neon::blocked));
            for (name, got) in versions {
                let bits = |v: &[T]| v.iter().map(|x| x.as_f64().to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{name} at {m}x{n}x{k}");
            }
        }
    }
}
