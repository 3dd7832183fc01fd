//! [`MatmulKernel`] on the GPU (`matmul.cu`): rlgrad's canonical GEMM (a fused
//! multiply-add chain over `k` for every output, from `-0`, in increasing `k`), not
//! cuBLAS, so the bits are the Cpu's.
//!
//! Two kernels, one order. Operands whose rows or columns are dense and 16-byte aligned
//! (row-major, or stored transposed as the backward products read them) take the tiled
//! kernels `matmul_<edge>_<layout>`: 16-byte loads, double-buffered shared k-tiles,
//! output tiles of 128 x 128 (8 x 8 per thread), 64 x 64 (4 x 4) or 32 x 32 (2 x 2) by
//! the output's size ([`choose_tile`]). Any other view (strided, unaligned, an odd
//! dense length) takes `matmul`, which reads elements one at a time. A linear layer's
//! forward ([`MatmulKernel::matmul_bias`]: `activation(x @ w + bias)`, `x` and `w`
//! row-major and aligned) takes `matmul_bias_<edge>_nn`, the tiled kernel adding the bias
//! and applying the activation as it stores each output: one launch and one pass over the
//! output instead of three. **Not timed yet**:
//! the tiled kernels were written without a GPU (ptxas: no spill, no stack); their
//! speed, and the tile rule's thresholds, await a GPU run.

use cudarc::driver::LaunchConfig;
use rlgrad_core::kernels::{MatmulKernel, UnaryOp, check_bias, matmul_dims};
use rlgrad_core::{Dims, Error, Float, Layout, Result, Shape, View};

use crate::compile::Family;
use crate::device::{BLOCK, Cuda, CudaBuffer, KernelArg, check_len, check_view};
use crate::strided::{Strided, strided};

/// Output tile edge of a block of the strided kernel (`TILE_M`, `TILE_N` in matmul.cu).
const STRIDED_TILE: usize = 64;
/// Most batch entries side by side in the grid (its z dimension).
const MAX_GRID_Z: usize = 65_535;
/// Most blocks along the grid's x dimension (the tiled kernels' output tiles).
const MAX_GRID_X: usize = i32::MAX as usize;
/// Blocks per multiprocessor that a tile must give the GPU to be chosen ([`choose_tile`]).
const BLOCKS_PER_SM: usize = 2;

/// The output tile of a block of the tiled kernels (`TileOf` in matmul.cu), 256 threads
/// each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tile {
    /// 128 x 128, 8 x 8 outputs per thread: the throughput tile.
    Large,
    /// 64 x 64, 4 x 4 per thread.
    Medium,
    /// 32 x 32, 2 x 2 per thread: the most blocks for a small output.
    Small,
}

impl Tile {
    pub(crate) const ALL: [Tile; 3] = [Tile::Large, Tile::Medium, Tile::Small];

    pub(crate) fn edge(self) -> usize {
        match self {
            Tile::Large => 128,
            Tile::Medium => 64,
            Tile::Small => 32,
        }
    }

    /// The tile whose edge is `edge`, if one is.
    pub(crate) fn of_edge(edge: usize) -> Option<Tile> {
        Tile::ALL.into_iter().find(|tile| tile.edge() == edge)
    }

    /// Blocks for `batch` outputs of `[m, n]`.
    fn blocks(self, m: usize, n: usize, batch: usize) -> usize {
        let edge = self.edge();
        m.div_ceil(edge)
            .saturating_mul(n.div_ceil(edge))
            .saturating_mul(batch.min(MAX_GRID_Z))
    }
}

/// The tile for `batch` products `[m, k] @ [k, n]` on a GPU with `sms` multiprocessors:
/// the largest tile that fits inside the output (edge at most `min(m, n)`, so that no
/// block computes mostly padding) and still gives every multiprocessor [`BLOCKS_PER_SM`]
/// blocks, else the smallest, 32 x 32, whose many small blocks are the most parallelism
/// an output offers without splitting `k`. So 4096^3 and `[65536, 256] @ [256, 256]` get
/// 128 x 128; the TD3 and PPO layers (`[256, 400] @ [400, 300]`: 6 blocks of 128 x 128,
/// 80 of 32 x 32; `[8192, 64] @ [64, 64]`: 512 of 32 x 32) and their gradients get
/// 32 x 32. `k` plays no part: every tile runs the whole chain of each of its outputs.
/// The thresholds are a guess until a GPU run times the shapes around them.
pub(crate) fn choose_tile(m: usize, n: usize, batch: usize, sms: usize) -> Tile {
    let wanted = BLOCKS_PER_SM * sms.max(1);
    Tile::ALL
        .into_iter()
        .find(|tile| tile.edge() <= m.min(n) && tile.blocks(m, n, batch) >= wanted)
        .unwrap_or(Tile::Small)
}

/// How a tiled kernel reads an operand: dense along `k` (A row-major, B stored
/// transposed) or along its other dimension, with `ld` the stride of the non-dense one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Operand {
    k_major: bool,
    ld: u64,
}

/// The tiled kernels' reading of a `[rows, cols]` operand whose `k` is `cols` (A) or
/// `rows` (B), or `None` when it must take the strided kernel. Every 16-byte vector
/// (`vector` elements) of the dense dimension must be wholly inside or outside the
/// matrix, and aligned: the dense length, the other stride, the offset and the batch
/// strides are multiples of `vector`.
fn tiled_operand(layout: &Layout, k_is_cols: bool, vector: usize) -> Option<Operand> {
    let (dims, strides) = (layout.shape().dims(), layout.strides());
    let nd = dims.len();
    let (rows, cols, rs, cs) = (dims[nd - 2], dims[nd - 1], strides[nd - 2], strides[nd - 1]);
    let aligned = layout.offset().is_multiple_of(vector)
        && dims[..nd - 2]
            .iter()
            .zip(&strides[..nd - 2])
            .all(|(&d, &s)| d == 1 || s.is_multiple_of(vector));
    if !aligned {
        return None;
    }
    let dense_cols = cs == 1 && cols.is_multiple_of(vector) && rs.is_multiple_of(vector);
    let dense_rows = rs == 1 && rows.is_multiple_of(vector) && cs.is_multiple_of(vector);
    // A row-major B is dense along n: preferred where both hold (a size-1 dimension), as
    // its shared tile needs no transposition.
    let (k_major, ld) = match (k_is_cols, dense_cols, dense_rows) {
        (true, true, _) => (true, rs),
        (true, false, true) => (false, cs),
        (false, true, _) => (false, rs),
        (false, false, true) => (true, cs),
        _ => return None,
    };
    Some(Operand {
        k_major,
        ld: ld as u64,
    })
}

/// Which kernel a product takes and its grid.
#[derive(Debug, Clone, PartialEq)]
enum Kernel {
    /// `matmul`: any strided operands, `[row stride, column stride]` of each.
    Strided { a: [u64; 2], b: [u64; 2] },
    /// `matmul_<edge>_<layout>`.
    Tiled { tile: Tile, a: Operand, b: Operand },
}

#[derive(Debug, Clone)]
struct Plan {
    kernel: Kernel,
    name: String,
    grid: (u32, u32, u32),
    a_batch: Strided,
    b_batch: Strided,
}

/// The layout over the batch dimensions of an operand: entry `i` starts at its offset.
fn batch_layout(layout: &Layout) -> Layout {
    let nd = layout.shape().ndim();
    Layout::from_parts(
        Shape::from(&layout.shape().dims()[..nd - 2]),
        Dims::from(&layout.strides()[..nd - 2]),
        layout.offset(),
    )
}

/// The kernel for `lhs @ rhs` of `batch` products `[m, k] @ [k, n]` (`k > 0`, a nonempty
/// output): the tiled one with `tile` where the operands allow it, else the strided one.
fn plan<T: Float>(
    lhs: &Layout,
    rhs: &Layout,
    (m, k, n, batch): (usize, usize, usize, usize),
    tile: Option<Tile>,
) -> Result<Plan> {
    const F: &str = "Cuda::matmul";
    let [a_batch, b_batch] = strided(F, [&batch_layout(lhs), &batch_layout(rhs)])?;
    let z = batch.min(MAX_GRID_Z) as u32;
    let vector = 16 / T::DTYPE.size_in_bytes();
    let tiled = (
        tile,
        tiled_operand(lhs, true, vector),
        tiled_operand(rhs, false, vector),
    );
    // The tiled kernels count k-steps in 32 bits.
    if let (Some(tile), Some(a), Some(b)) = tiled
        && let blocks = tile.blocks(m, n, 1)
        && blocks <= MAX_GRID_X
        && k <= i32::MAX as usize
    {
        let layout = match (a.k_major, b.k_major) {
            (true, false) => "nn",
            (false, false) => "tn",
            (true, true) => "nt",
            (false, true) => "tt",
        };
        return Ok(Plan {
            kernel: Kernel::Tiled { tile, a, b },
            name: format!("matmul_{}_{layout}", tile.edge()),
            grid: (blocks as u32, 1, z),
            a_batch,
            b_batch,
        });
    }
    if m.div_ceil(STRIDED_TILE) > MAX_GRID_Z {
        return Err(Error::shape(
            F,
            "lhs",
            format_args!(
                "at most {} rows in a strided or unaligned view",
                MAX_GRID_Z * STRIDED_TILE
            ),
            m,
        ));
    }
    let (ls, rs) = (lhs.strides(), rhs.strides());
    let nd = ls.len();
    let pair = |s: &[usize]| [s[nd - 2] as u64, s[nd - 1] as u64];
    Ok(Plan {
        kernel: Kernel::Strided {
            a: pair(ls),
            b: pair(rs),
        },
        name: "matmul".to_owned(),
        grid: (
            n.div_ceil(STRIDED_TILE) as u32,
            m.div_ceil(STRIDED_TILE) as u32,
            z,
        ),
        a_batch,
        b_batch,
    })
}

/// The code of `activation` in `linear_epilogue` (matmul.cu), `None` for one the fused
/// kernel does not apply (the caller then runs it as its own op).
fn activation_code<T: Float>(activation: Option<UnaryOp<T>>) -> Option<i32> {
    match activation {
        None => Some(0),
        Some(UnaryOp::Relu) => Some(1),
        Some(UnaryOp::Tanh) => Some(2),
        Some(UnaryOp::Sigmoid) => Some(3),
        Some(UnaryOp::Sqrt) => Some(4),
        Some(_) => None,
    }
}

/// The tile of `matmul_bias_<edge>_nn` for an `[m, n]` output whose product alone takes
/// `tile`, and its blocks (`None` past the grid's limit): the 64 tile where the product
/// takes the 128 one, which has no bias kernel (it spilled, matmul.cu says).
fn bias_tile(tile: Tile, m: usize, n: usize) -> Option<(Tile, u32)> {
    let tile = match tile {
        Tile::Large => Tile::Medium,
        other => other,
    };
    let blocks = tile.blocks(m, n, 1);
    (blocks <= MAX_GRID_X).then_some((tile, blocks as u32))
}

impl Cuda {
    /// Launches a tiled kernel: `[a, lda, b, ldb, c]` with the plan's batch views,
    /// `[m, n, k, batch]`, then `extra` (the bias kernels' bias and activation).
    #[allow(clippy::too_many_arguments)]
    fn launch_tiled(
        &self,
        function: &'static str,
        kernel: &cudarc::driver::CudaFunction,
        config: LaunchConfig,
        plan: &Plan,
        [a, lda, b, ldb, c]: [u64; 5],
        [m, n, k, batch]: [u64; 4],
        extra: &[&dyn KernelArg],
    ) -> Result<()> {
        let head: [&dyn KernelArg; 11] = [
            &a,
            &plan.a_batch,
            &lda,
            &b,
            &plan.b_batch,
            &ldb,
            &c,
            &m,
            &n,
            &k,
            &batch,
        ];
        // On the stack: every product launches through here.
        let mut args: [&dyn KernelArg; 13] = [&a; 13];
        assert!(
            extra.len() <= 2,
            "at most two arguments follow the product's"
        );
        args[..11].copy_from_slice(&head);
        args[11..11 + extra.len()].copy_from_slice(extra);
        self.launch(function, kernel, config, &args[..11 + extra.len()])
    }

    /// The plan of `batch` products `[m, k] @ [k, n]` (`k > 0`, a nonempty output) from
    /// `lhs` and `rhs` into `out`, and the three device addresses.
    fn matmul_plan<T: Float>(
        &self,
        lhs: View<'_, CudaBuffer<T>>,
        rhs: View<'_, CudaBuffer<T>>,
        out: &CudaBuffer<T>,
        dims: (usize, usize, usize, usize),
    ) -> Result<(Plan, [u64; 3])> {
        let (m, _, n, batch) = dims;
        let addresses = [self.ptr(lhs.buffer), self.ptr(rhs.buffer), self.ptr(out)];
        // The allocator hands out whole driver allocations (256-byte aligned); should a
        // buffer ever not be 16-byte aligned, a vector load would fault: the strided
        // kernel reads it instead.
        let tile = addresses
            .iter()
            .all(|address| address.is_multiple_of(16))
            .then(|| {
                self.forced_matmul_tile()
                    .unwrap_or_else(|| choose_tile(m, n, batch, self.multiprocessors()))
            });
        let plan = plan::<T>(lhs.layout, rhs.layout, dims, tile)?;
        Ok((plan, addresses))
    }
}

impl<T: Float> MatmulKernel<T> for Cuda {
    fn matmul(
        &self,
        lhs: View<'_, CudaBuffer<T>>,
        rhs: View<'_, CudaBuffer<T>>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::matmul";
        check_view(F, "lhs", lhs)?;
        check_view(F, "rhs", rhs)?;
        let (m, k, n, batch) = matmul_dims(F, lhs.layout.shape(), rhs.layout.shape())?;
        check_len(F, "out", out, batch * m * n)?;
        if batch * m * n == 0 {
            return Ok(());
        }
        if k == 0 {
            return self.zero(F, out);
        }
        let (plan, [a, b, c]) = self.matmul_plan(lhs, rhs, out, (m, k, n, batch))?;
        let config = LaunchConfig {
            grid_dim: plan.grid,
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let kernel = self.function::<T>(Family::Matmul, &plan.name)?;
        let (m, n, k, batch) = (m as u64, n as u64, k as u64, batch as u64);
        match plan.kernel {
            Kernel::Strided {
                a: [ar, ac],
                b: [br, bc],
            } => self.launch(
                F,
                &kernel,
                config,
                &[
                    &a,
                    &plan.a_batch,
                    &ar,
                    &ac,
                    &b,
                    &plan.b_batch,
                    &br,
                    &bc,
                    &c,
                    &m,
                    &n,
                    &k,
                    &batch,
                ],
            ),
            Kernel::Tiled { a: ao, b: bo, .. } => {
                let operands = [a, ao.ld, b, bo.ld, c];
                self.launch_tiled(F, &kernel, config, &plan, operands, [m, n, k, batch], &[])
            }
        }
    }

    /// Fused where `lhs` and `rhs` are one row-major, aligned product (the tiled `nn`
    /// kernels read them), `bias` is dense and the activation is none, `Relu`, `Tanh`,
    /// `Sigmoid` or `Sqrt`; `Ok(false)` otherwise (and for an empty product or `k = 0`).
    fn matmul_bias(
        &self,
        lhs: View<'_, CudaBuffer<T>>,
        rhs: View<'_, CudaBuffer<T>>,
        bias: View<'_, CudaBuffer<T>>,
        activation: Option<UnaryOp<T>>,
        out: &mut CudaBuffer<T>,
    ) -> Result<bool> {
        const F: &str = "Cuda::matmul_bias";
        check_view(F, "lhs", lhs)?;
        check_view(F, "rhs", rhs)?;
        check_view(F, "bias", bias)?;
        let (m, k, n, batch) = matmul_dims(F, lhs.layout.shape(), rhs.layout.shape())?;
        check_bias(F, bias.layout.shape(), n)?;
        check_len(F, "out", out, batch * m * n)?;
        let Some(act) = activation_code(activation) else {
            return Ok(false);
        };
        if batch != 1 || m * n == 0 || k == 0 || !bias.layout.is_contiguous() {
            return Ok(false);
        }
        let (plan, [a, b, c]) = self.matmul_plan(lhs, rhs, out, (m, k, n, batch))?;
        let Kernel::Tiled { tile, a: ao, b: bo } = plan.kernel else {
            return Ok(false);
        };
        if !ao.k_major || bo.k_major {
            return Ok(false);
        }
        let Some((tile, grid)) = bias_tile(tile, m, n) else {
            return Ok(false);
        };
        let kernel =
            self.function::<T>(Family::Matmul, &format!("matmul_bias_{}_nn", tile.edge()))?;
        let config = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let bias_at =
            self.ptr(bias.buffer) + (bias.layout.offset() * T::DTYPE.size_in_bytes()) as u64;
        let dims = [m, n, k, batch].map(|d| d as u64);
        let operands = [a, ao.ld, b, bo.ld, c];
        self.launch_tiled(F, &kernel, config, &plan, operands, dims, &[&bias_at, &act])?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use rlgrad_core::{Cpu, Rng};

    use super::*;
    use crate::host::Emulator;

    /// An H100 SXM's or H200's multiprocessors.
    const H100: usize = 132;

    #[test]
    fn the_tile_is_the_largest_that_fits_the_output_and_fills_the_gpu() {
        let tile = |m, n, batch| choose_tile(m, n, batch, H100);
        // Throughput shapes.
        assert_eq!(tile(4096, 4096, 1), Tile::Large);
        assert_eq!(tile(65536, 256, 1), Tile::Large);
        // The TD3 and PPO layers, forward and backward: a few dozen blocks at most.
        for (m, n) in [(256, 300), (256, 400), (400, 300), (300, 256), (256, 1)] {
            assert_eq!(tile(m, n, 1), Tile::Small, "{m} x {n}");
        }
        for (m, n) in [(8192, 64), (64, 64), (8, 64), (64, 8)] {
            assert_eq!(tile(m, n, 1), Tile::Small, "{m} x {n}");
        }
        // 264 blocks of 128 x 128 are the threshold; below it, 64 x 64 where that fills.
        assert_eq!(tile(12 * 128, 22 * 128, 1), Tile::Large);
        assert_eq!(tile(12 * 128, 21 * 128, 1), Tile::Medium);
        assert_eq!(tile(1100, 1100, 1), Tile::Medium);
        assert_eq!(tile(8 * 64, 33 * 64, 1), Tile::Medium);
        assert_eq!(tile(8 * 64, 32 * 64, 1), Tile::Small);
        // A tile larger than the output wastes its threads, however many blocks.
        assert_eq!(tile(65536, 64, 1), Tile::Medium);
        assert_eq!(tile(64, 64, 1000), Tile::Medium);
        assert_eq!(tile(100, 100, 1000), Tile::Medium);
        assert_eq!(tile(20, 20, 100_000), Tile::Small);
        // Batches count up to the grid's z limit.
        assert_eq!(tile(128, 128, 264), Tile::Large);
        assert_eq!(tile(128, 128, 263), Tile::Medium);
        // A smaller GPU fills sooner.
        assert_eq!(choose_tile(1100, 1100, 1, 16), Tile::Large);
        assert_eq!(choose_tile(1100, 1100, 1, 0), Tile::Large);
    }

    fn layout(dims: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout::from_parts(Shape::from(dims), Dims::from_slice(strides), offset)
    }

    #[test]
    fn dense_aligned_operands_take_the_tiled_kernels_and_others_the_strided_one() {
        let name = |a: &Layout, b: &Layout, f64: bool| {
            let (m, k, n, batch) = matmul_dims("t", a.shape(), b.shape()).unwrap();
            let dims = (m, k, n, batch);
            let plan = if f64 {
                plan::<f64>(a, b, dims, Some(Tile::Medium))
            } else {
                plan::<f32>(a, b, dims, Some(Tile::Medium))
            };
            plan.unwrap().name
        };
        let dense = |d: &[usize]| Layout::contiguous(Shape::from(d));
        let (a, b) = (dense(&[8, 12]), dense(&[12, 16]));
        assert_eq!(name(&a, &b, false), "matmul_64_nn");
        // a^T @ g and g @ w^T, as the backward pass reads them.
        let at = layout(&[8, 12], &[1, 8], 0);
        let bt = layout(&[12, 16], &[1, 12], 0);
        assert_eq!(name(&at, &b, false), "matmul_64_tn");
        assert_eq!(name(&a, &bt, false), "matmul_64_nt");
        assert_eq!(name(&at, &bt, false), "matmul_64_tt");
        // Rows of a view into a wider matrix: fine while its stride keeps 16 bytes.
        assert_eq!(
            name(&layout(&[8, 12], &[20, 1], 4), &b, false),
            "matmul_64_nn"
        );
        // f64 vectors are two elements.
        assert_eq!(name(&dense(&[3, 6]), &dense(&[6, 2]), true), "matmul_64_nn");
        assert_eq!(name(&dense(&[3, 6]), &dense(&[6, 2]), false), "matmul");
        // The strided kernel: an offset, a stride or a dense length off the vector, a
        // column view, an unaligned batch stride.
        for (a, b) in [
            (layout(&[8, 12], &[12, 1], 1), b.clone()),
            (layout(&[8, 12], &[13, 1], 0), b.clone()),
            (dense(&[8, 10]), dense(&[10, 16])),
            (a.clone(), dense(&[12, 6])),
            (a.clone(), layout(&[12, 16], &[32, 2], 0)),
            (
                layout(&[2, 8, 12], &[98, 12, 1], 0),
                layout(&[2, 12, 16], &[192, 16, 1], 0),
            ),
        ] {
            assert_eq!(name(&a, &b, false), "matmul", "{a:?} @ {b:?}");
        }
        // Broadcast batches (stride 0) are aligned.
        assert_eq!(
            name(
                &layout(&[3, 8, 12], &[0, 12, 1], 0),
                &layout(&[3, 12, 16], &[192, 16, 1], 0),
                false
            ),
            "matmul_64_nn"
        );
        // Without a tile (an unaligned buffer), always the strided kernel.
        let dims = (8, 12, 16, 1);
        assert_eq!(plan::<f32>(&a, &b, dims, None).unwrap().name, "matmul");
        // The strided kernel's grid has at most 65,535 rows of tiles; the tiled kernels'
        // one dimension has room for far more.
        let tall = (65_535 * 64 + 1, 4, 4, 1);
        let (ta, tb) = (dense(&[tall.0, 4]), dense(&[4, 4]));
        let tiled = plan::<f32>(&ta, &tb, tall, Some(Tile::Small)).unwrap();
        assert_eq!(
            (tiled.name.as_str(), tiled.grid.0),
            ("matmul_32_nn", 65_535 * 2 + 1)
        );
        assert!(plan::<f32>(&ta, &tb, tall, None).is_err());
    }

    /// One product for the host emulation: operands (buffers and layouts), the tile, and
    /// for a linear layer (`matmul_bias`) the bias and the activation.
    struct Case<T> {
        a: Vec<T>,
        la: Layout,
        b: Vec<T>,
        lb: Layout,
        tile: Tile,
        linear: Option<(Vec<T>, Option<UnaryOp<T>>)>,
    }

    impl<T: Float> Case<T> {
        fn dims(&self) -> (usize, usize, usize, usize) {
            matmul_dims("t", self.la.shape(), self.lb.shape()).unwrap()
        }

        fn input(&self, plan: &Plan) -> String {
            let (m, k, n, batch) = self.dims();
            let strides = match &plan.kernel {
                Kernel::Strided { a, b } => vec![a[0], a[1], b[0], b[1]],
                Kernel::Tiled { a, b, .. } => vec![a.ld, b.ld],
            };
            let hex = |v: &[T]| {
                let words: Vec<String> =
                    v.iter().map(|x| format!("{:x}", x.to_bits_u64())).collect();
                format!("{} {}", v.len(), words.join(" "))
            };
            let name = self.kernel(plan);
            let grid = match (&self.linear, &plan.kernel) {
                (Some(_), Kernel::Tiled { tile, .. }) => {
                    let (_, blocks) = bias_tile(*tile, m, n).expect("a small grid");
                    (blocks, 1, plan.grid.2)
                }
                _ => plan.grid,
            };
            let epilogue = match &self.linear {
                Some((bias, activation)) => {
                    let act = activation_code(*activation).expect("a fused activation");
                    format!("{act} {}\n", hex(bias))
                }
                None => String::new(),
            };
            format!(
                "{} {} {} {} {} {m} {n} {k} {batch}\n{} {}\n{}\n{}\n{}\n{}\n{epilogue}",
                T::DTYPE.name(),
                name,
                grid.0,
                grid.1,
                grid.2,
                strides.len(),
                strides
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" "),
                plan.a_batch.words(),
                plan.b_batch.words(),
                hex(&self.a),
                hex(&self.b)
            )
        }

        /// The kernel the case runs: the plan's, or its `matmul_bias` twin.
        fn kernel(&self, plan: &Plan) -> String {
            match (&self.linear, &plan.kernel) {
                (Some(_), Kernel::Tiled { tile, .. }) => {
                    let (m, _, n, _) = self.dims();
                    let (tile, _) = bias_tile(*tile, m, n).expect("a small grid");
                    format!("matmul_bias_{}_nn", tile.edge())
                }
                (Some(_), Kernel::Strided { .. }) => {
                    panic!("a linear layer's case takes a tiled kernel")
                }
                (None, _) => plan.name.clone(),
            }
        }

        fn cpu(&self) -> Vec<T> {
            let (m, _, n, batch) = self.dims();
            let mut c = vec![T::zero(); batch * m * n];
            let (a, b) = (View::new(&self.a, &self.la), View::new(&self.b, &self.lb));
            match &self.linear {
                Some((bias, activation)) => {
                    let layout = Layout::contiguous(Shape::from(&[n][..]));
                    let bias = View::new(bias, &layout);
                    let fused = Cpu::seq()
                        .matmul_bias(a, b, bias, *activation, &mut c)
                        .unwrap();
                    assert!(fused, "the Cpu fuses a linear layer");
                }
                None => Cpu::seq().matmul(a, b, &mut c).unwrap(),
            }
            c
        }

        /// The case with a bias of `n` values (NaN, infinities and zeros of both signs
        /// among them) and `activation`, for `matmul_bias`.
        fn linear(mut self, rng: &mut Rng, activation: Option<UnaryOp<T>>) -> Self {
            let (_, _, n, batch) = self.dims();
            assert_eq!(batch, 1, "a linear layer is one product");
            // Two dimensions, as `matmul_bias` takes them.
            let plain = |l: &Layout| {
                let (d, st) = (l.shape().dims(), l.strides());
                layout(&d[d.len() - 2..], &st[st.len() - 2..], l.offset())
            };
            (self.la, self.lb) = (plain(&self.la), plain(&self.lb));
            let special = [
                T::nan(),
                T::infinity(),
                -T::infinity(),
                -T::zero(),
                T::zero(),
            ];
            let bias = (0..n)
                .map(|j| {
                    special
                        .get(j)
                        .copied()
                        .unwrap_or_else(|| rng.normal(0.0, 3.0))
                })
                .collect();
            self.linear = Some((bias, activation));
            self
        }
    }

    /// `[batch, m, k] @ [batch, k, n]` with A row-major or stored transposed, likewise B,
    /// at an element offset into buffers with room for it.
    fn case<T: Float>(
        rng: &mut Rng,
        (batch, m, k, n): (usize, usize, usize, usize),
        (a_t, b_t): (bool, bool),
        offset: usize,
        tile: Tile,
    ) -> Case<T> {
        let operand = |rng: &mut Rng, rows: usize, cols: usize, transposed: bool| {
            let data: Vec<T> = (0..offset + batch * rows * cols)
                .map(|_| rng.normal(0.0, 1.0))
                .collect();
            let strides = if transposed {
                [rows * cols, 1, rows]
            } else {
                [rows * cols, cols, 1]
            };
            (data, layout(&[batch, rows, cols], &strides, offset))
        };
        let (a, la) = operand(rng, m, k, a_t);
        let (b, lb) = operand(rng, k, n, b_t);
        Case {
            a,
            la,
            b,
            lb,
            tile,
            linear: None,
        }
    }

    /// Runs `cases` through the kernels compiled for the host (tests/host_gemm.cpp) and
    /// compares each output with the Cpu's bits; returns the kernels that ran, or `None`
    /// without a C++20 compiler.
    fn emulate<T: Float>(cases: &[Case<T>]) -> Option<Vec<String>> {
        let emulator = Emulator::build(
            ("host_gemm.cpp", include_str!("../tests/host_gemm.cpp")),
            ("matmul.cu", include_str!("cuda/matmul.cu")),
        )?;
        let mut input = String::new();
        let mut plans = Vec::new();
        for case in cases {
            let plan = plan::<T>(&case.la, &case.lb, case.dims(), Some(case.tile)).unwrap();
            input.push_str(&case.input(&plan));
            plans.push(plan);
        }
        let stdout = emulator.run(input);
        let mut lines = stdout.lines();
        for (case, plan) in cases.iter().zip(&plans) {
            let cpu = case.cpu();
            let emulated: Vec<T> = lines
                .by_ref()
                .take(cpu.len())
                .map(|l| T::from_bits_u64(u64::from_str_radix(l, 16).unwrap()))
                .collect();
            let (m, k, n, batch) = case.dims();
            let what = format!("{} on {batch} x [{m}, {k}] @ [{k}, {n}]", case.kernel(plan));
            assert_eq!(emulated.len(), cpu.len(), "{what}: output length");
            let differing = (0..cpu.len())
                .filter(|&i| cpu[i].to_bits_u64() != emulated[i].to_bits_u64())
                .count();
            assert_eq!(
                differing, 0,
                "{what}: elements differing from the Cpu's bits"
            );
        }
        Some(
            cases
                .iter()
                .zip(&plans)
                .map(|(case, plan)| case.kernel(plan))
                .collect(),
        )
    }

    /// Every tiled kernel, in f32 and f64, on shapes straddling its tile, with k tails of
    /// every length, k = 1 (strided: the vector does not fit), batches and views at an
    /// offset; and the strided kernel on what the tiled ones refuse. Runs the kernels'
    /// own source on the host, so it needs no GPU.
    fn emulated_kernels_give_the_cpus_bits<T: Float>() {
        let mut rng = Rng::new(38, "cuda-matmul-host");
        let vector = 16 / T::DTYPE.size_in_bytes();
        let mut cases = Vec::new();
        for tile in Tile::ALL {
            let e = tile.edge();
            for layout in [(false, false), (true, false), (false, true), (true, true)] {
                // Two tiles each way, the second with 4 rows (or columns) in it; k with a
                // tail after full k-tiles.
                cases.push(case(&mut rng, (1, e + 4, 20, e + 8), layout, 0, tile));
            }
            // k within one k-tile, exactly one, one vector; a batch at an aligned offset.
            for k in [4, 8, 16] {
                cases.push(case(&mut rng, (1, 12, k, 8), (false, false), 0, tile));
            }
            cases.push(case(&mut rng, (2, 8, 12, 4), (true, false), vector, tile));
            // A linear layer with each fused activation: an edge tile of columns (the bias
            // read only inside the output), a k tail, an aligned offset.
            for activation in [
                None,
                Some(UnaryOp::Relu),
                Some(UnaryOp::Tanh),
                Some(UnaryOp::Sigmoid),
                Some(UnaryOp::Sqrt),
            ] {
                let product = case(
                    &mut rng,
                    (1, e + 4, 20, e + 8),
                    (false, false),
                    vector,
                    tile,
                );
                cases.push(product.linear(&mut rng, activation));
            }
        }
        // What the tiled kernels refuse: an odd k (and k = 1), an unaligned offset.
        cases.push(case(&mut rng, (1, 9, 1, 7), (false, false), 0, Tile::Small));
        cases.push(case(
            &mut rng,
            (2, 33, 17, 5),
            (false, true),
            0,
            Tile::Small,
        ));
        cases.push(case(
            &mut rng,
            (1, 8, 12, 8),
            (false, false),
            1,
            Tile::Small,
        ));
        // Products whose every term is -0 (+0 times a negative): the chain stays -0,
        // where one more fma over zero padding would give +0.
        let mut zero = case::<T>(&mut rng, (1, 40, 12, 36), (false, false), 0, Tile::Small);
        zero.a.iter_mut().for_each(|x| *x = T::zero());
        zero.b.iter_mut().for_each(|x| *x = -x.abs() - T::one());
        cases.push(zero);
        let Some(ran) = emulate(&cases) else { return };
        for name in crate::compile::Family::Matmul.kernels() {
            assert!(ran.iter().any(|r| r == name), "{name} did not run");
        }
        println!(
            "host emulation: {} products, every output the Cpu's bits",
            cases.len()
        );
    }

    #[test]
    fn emulated_kernels_give_the_cpus_bits_in_f32() {
        emulated_kernels_give_the_cpus_bits::<f32>();
    }

    #[test]
    fn emulated_kernels_give_the_cpus_bits_in_f64() {
        emulated_kernels_give_the_cpus_bits::<f64>();
    }
}
