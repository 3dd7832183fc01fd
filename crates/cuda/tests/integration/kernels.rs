//! Every kernel of the Cuda device against the Cpu device, bit for bit (`to_bits`; NaN
//! payloads aside), on random inputs with odd sizes, zero-length inputs, strided and
//! broadcast views, in f32 and f64. Without a GPU each test prints that it was skipped
//! and why (or fails, with `RLGRAD_REQUIRE_GPU=1`).

use rlgrad_core::kernels::cell::{LstmBackward, LstmForward};
use rlgrad_core::kernels::optim::{
    Adagrad, Adam, AdamTorch, BufferJob, Flavor, Momentum, Rmsprop, Sgd, Update,
};
use rlgrad_core::kernels::recurrence::{Episodes, TimeMajor, Truncation, VtraceParams};
use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm, PadOrder, Sequences};
use rlgrad_core::kernels::{
    BinaryOp, CellKernel, CopyKernel, ElementwiseKernel, MatmulKernel, OptimKernel, RandomKernel,
    RecurrenceKernel, ReduceKernel, ReduceOp, SequenceKernel, UnaryOp,
};
use rlgrad_core::{Cpu, Device, Dims, Float, Layout, Par, Rng, Shape, View};
use rlgrad_cuda::Cuda;

use crate::common;
use common::{exclusive_gpu, gpu, same};

fn cpu() -> Cpu {
    Cpu::seq()
}

/// Normal values with the edge cases sprinkled in.
fn data<T: Float>(rng: &mut Rng, len: usize) -> Vec<T> {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e-40,
        90.0,
        -110.0,
        f64::INFINITY,
        f64::NAN,
    ];
    (0..len)
        .map(|i| {
            if i % 37 == 5 {
                T::from_f64(specials[i % specials.len()])
            } else {
                rng.normal(0.0, 2.0)
            }
        })
        .collect()
}

/// Layouts over a buffer of 4 * 5 * 7 elements: dense, transposed, narrowed, broadcast,
/// all of shape [5, 7] except the dense 3-D one.
fn views() -> Vec<Layout> {
    vec![
        Layout::contiguous(Shape::from([5, 7])),
        Layout::from_parts(Shape::from([5, 7]), Dims::from_slice(&[1, 5]), 3),
        Layout::from_parts(Shape::from([5, 7]), Dims::from_slice(&[14, 2]), 1),
        Layout::from_parts(Shape::from([5, 7]), Dims::from_slice(&[0, 1]), 9),
        Layout::from_parts(Shape::from([5, 7]), Dims::from_slice(&[3, 0]), 2),
    ]
}

fn elementwise<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(1, "cuda-elementwise");
    let host: Vec<T> = data(&mut rng, 140);
    let other: Vec<T> = data(&mut rng, 140);
    let (cb, gb) = (host.clone(), gpu.upload(&host).unwrap());
    let (co, go) = (other.clone(), gpu.upload(&other).unwrap());
    let s = T::from_f64(0.75);
    let unary = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Tanh,
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Square,
        UnaryOp::Powf(T::from_f64(1.7)),
        UnaryOp::Powf(T::from_f64(3.0)),
        UnaryOp::Clamp {
            min: -T::one(),
            max: T::one(),
        },
        UnaryOp::AddScalar(s),
        UnaryOp::SubScalar(s),
        UnaryOp::ScalarSub(s),
        UnaryOp::MulScalar(s),
        UnaryOp::DivScalar(s),
        UnaryOp::ScalarDiv(s),
    ];
    let binary = BinaryOp::ALL;
    for layout in views() {
        let n = layout.numel();
        for op in unary {
            let mut c = vec![T::zero(); n];
            cpu().unary(op, View::new(&cb, &layout), &mut c).unwrap();
            let mut g = gpu.alloc_output::<T>(n).unwrap();
            let g = std::sync::Arc::get_mut(&mut g).unwrap();
            gpu.unary(op, View::new(&gb, &layout), g).unwrap();
            same(&format!("{op:?} {layout:?}"), &c, &gpu.download(g).unwrap());
        }
        for (op, rhs) in binary.iter().zip(views().into_iter().cycle()) {
            let mut c = vec![T::zero(); n];
            cpu()
                .binary(*op, View::new(&cb, &layout), View::new(&co, &rhs), &mut c)
                .unwrap();
            let mut g = gpu.alloc_zeros(n).unwrap();
            gpu.binary(*op, View::new(&gb, &layout), View::new(&go, &rhs), &mut g)
                .unwrap();
            same(
                &format!("{op:?} {layout:?}"),
                &c,
                &gpu.download(&g).unwrap(),
            );
        }
        let mut c = vec![T::zero(); n];
        let on_false = &views()[3];
        cpu()
            .select(
                View::new(&co, &layout),
                View::new(&cb, &layout),
                View::new(&co, on_false),
                &mut c,
            )
            .unwrap();
        let mut g = gpu.alloc_zeros(n).unwrap();
        gpu.select(
            View::new(&go, &layout),
            View::new(&gb, &layout),
            View::new(&go, on_false),
            &mut g,
        )
        .unwrap();
        same("select", &c, &gpu.download(&g).unwrap());
    }
    // Empty views and wrong outputs.
    let empty = Layout::contiguous(Shape::from([0, 3]));
    let mut nothing = gpu.alloc_zeros::<T>(0).unwrap();
    gpu.unary(UnaryOp::Exp, View::new(&gb, &empty), &mut nothing)
        .unwrap();
    let mut short = gpu.alloc_zeros::<T>(3).unwrap();
    assert!(
        gpu.unary(UnaryOp::Exp, View::new(&gb, &views()[0]), &mut short)
            .is_err()
    );
}

#[test]
fn elementwise_ops_are_the_cpus_bits() {
    if let Some(gpu) = gpu() {
        elementwise::<f32>(&gpu);
        elementwise::<f64>(&gpu);
    }
}

/// The largest distance in units of the last place between the GPU's and the Cpu's
/// transcendentals over a sweep of inputs: 0 when the ports are exact, as they should be.
fn transcendental_ulps<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(2, "cuda-ulp");
    let mut x: Vec<T> = (0..1 << 20)
        .map(|_| T::from_f64(rng.uniform_f64() * 200.0 - 100.0))
        .collect();
    x.extend((0..1 << 18).map(|_| T::from_f64(rng.uniform_f64() * 4.0 - 2.0)));
    let layout = Layout::contiguous(Shape::from([x.len()]));
    let gx = gpu.upload(&x).unwrap();
    for op in [
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Tanh,
        UnaryOp::Powf(T::from_f64(0.37)),
    ] {
        let mut c = vec![T::zero(); x.len()];
        cpu().unary(op, View::new(&x, &layout), &mut c).unwrap();
        let mut g = gpu.alloc_zeros(x.len()).unwrap();
        gpu.unary(op, View::new(&gx, &layout), &mut g).unwrap();
        let g = gpu.download(&g).unwrap();
        let worst = c
            .iter()
            .zip(&g)
            .filter(|(a, b)| !(a.is_nan() && b.is_nan()))
            .map(|(a, b)| (a.to_bits_u64() as i64 - b.to_bits_u64() as i64).unsigned_abs())
            .max()
            .unwrap_or(0);
        println!("{} {op:?}: max ULP distance GPU vs Cpu = {worst}", T::DTYPE);
        assert_eq!(worst, 0, "{op:?}");
    }
}

#[test]
fn transcendentals_measured_in_ulps() {
    if let Some(gpu) = gpu() {
        transcendental_ulps::<f32>(&gpu);
        transcendental_ulps::<f64>(&gpu);
    }
}

fn reductions<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(3, "cuda-reduce");
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Var { ddof: 0 },
        ReduceOp::Var { ddof: 1 },
        ReduceOp::Min,
        ReduceOp::Max,
    ];
    // Whole-tensor sums run `sum_contiguous`: sizes around its 64 KB groups (16384 f32,
    // 8192 f64) and its combining tree's nodes of 64 groups.
    let shapes: [&[usize]; 12] = [
        &[0],
        &[1],
        &[63],
        &[8_193],
        &[16_384],
        &[16_385],
        &[70_001],
        &[64 * 16_384 + 1],
        &[2_500_000],
        &[3, 1000, 5],
        &[130, 9000],
        &[2, 0, 3],
    ];
    for dims in shapes {
        let shape = Shape::new(dims);
        let n = shape.numel();
        let mut host: Vec<T> = (0..n).map(|_| rng.normal(0.0, 1e3)).collect();
        if n > 100 {
            host[n / 2] = -T::zero();
        }
        let g = gpu.upload(&host).unwrap();
        let mut layouts = vec![Layout::contiguous(shape.clone())];
        if dims.len() == 1 && n > 2 {
            // Contiguous views at element offsets 1 (not 16-byte aligned) and 4 (aligned
            // for f32): the unaligned and the shifted runs of `sum_contiguous`.
            for offset in [1, 4.min(n - 1)] {
                layouts.push(Layout::from_parts(
                    Shape::from([n - offset]),
                    Dims::from_slice(&[1]),
                    offset,
                ));
            }
        }
        if dims.len() == 2 {
            // The transpose of the [cols, rows] reading of the same buffer.
            layouts.push(Layout::from_parts(
                Shape::from([dims[1], dims[0]]),
                Dims::from_slice(&[1, dims[1]]),
                0,
            ));
        }
        for layout in &layouts {
            let axes: Vec<Option<usize>> = std::iter::once(None)
                .chain((0..layout.shape().ndim()).map(Some))
                .collect();
            for axis in axes {
                for op in ops {
                    let outputs = match axis {
                        None => 1,
                        Some(a) => layout.numel() / layout.shape().dims()[a].max(1),
                    };
                    let outputs = if axis.is_some() && layout.shape().dims().contains(&0) {
                        layout
                            .shape()
                            .dims()
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| Some(*i) != axis)
                            .map(|(_, d)| d)
                            .product()
                    } else {
                        outputs
                    };
                    let mut c = vec![T::zero(); outputs];
                    let want = cpu().reduce(op, View::new(&host, layout), axis, &mut c);
                    // Twice: the second launch finds the tickets the first left.
                    for launch in ["first", "second"] {
                        let mut out = gpu.alloc_zeros(outputs).unwrap();
                        let got = gpu.reduce(op, View::new(&g, layout), axis, &mut out);
                        assert_eq!(want.is_ok(), got.is_ok(), "{op:?} {layout:?} {axis:?}");
                        if want.is_ok() {
                            same(
                                &format!("{op:?} {layout:?} axis {axis:?}, {launch} launch"),
                                &c,
                                &gpu.download(&out).unwrap(),
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn reductions_are_the_canonical_sums() {
    if let Some(gpu) = gpu() {
        reductions::<f32>(&gpu);
        reductions::<f64>(&gpu);
    }
}

fn copies<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(4, "cuda-copy");
    let host: Vec<T> = data(&mut rng, 140);
    let g = gpu.upload(&host).unwrap();
    for layout in views() {
        let n = layout.numel();
        let mut c = vec![T::zero(); n];
        cpu().copy(View::new(&host, &layout), &mut c).unwrap();
        let mut out = gpu.alloc_zeros(n).unwrap();
        gpu.copy(View::new(&g, &layout), &mut out).unwrap();
        same("copy", &c, &gpu.download(&out).unwrap());
        for axis in 0..2 {
            let size = layout.shape().dims()[axis];
            let indices: Vec<usize> = (0..9).map(|_| rng.below(size as u64) as usize).collect();
            let per = n / size * indices.len();
            let mut c = vec![T::zero(); per];
            cpu()
                .index_select(View::new(&host, &layout), axis, &indices, &mut c)
                .unwrap();
            let mut out = gpu.alloc_zeros(per).unwrap();
            gpu.index_select(View::new(&g, &layout), axis, &indices, &mut out)
                .unwrap();
            same("index_select", &c, &gpu.download(&out).unwrap());
            let targets: Vec<usize> = (0..size).map(|_| rng.below(4) as usize).collect();
            let added = n / size * 4;
            let mut c = vec![T::zero(); added];
            cpu()
                .index_add(View::new(&host, &layout), axis, &targets, 4, &mut c)
                .unwrap();
            let mut out = gpu.alloc_zeros(added).unwrap();
            gpu.index_add(View::new(&g, &layout), axis, &targets, 4, &mut out)
                .unwrap();
            same("index_add", &c, &gpu.download(&out).unwrap());
            let parts = [layout.clone(), views()[1].clone(), layout.clone()];
            let cpu_parts: Vec<_> = parts.iter().map(|l| View::new(&host, l)).collect();
            let gpu_parts: Vec<_> = parts.iter().map(|l| View::new(&g, l)).collect();
            let mut c = vec![T::zero(); 3 * n];
            cpu().concat(&cpu_parts, axis, &mut c).unwrap();
            let mut out = gpu.alloc_zeros(3 * n).unwrap();
            gpu.concat(&gpu_parts, axis, &mut out).unwrap();
            same("concat", &c, &gpu.download(&out).unwrap());
        }
    }
    let mut out = gpu.alloc_zeros::<T>(5).unwrap();
    assert!(
        gpu.index_select(View::new(&g, &views()[0]), 0, &[5], &mut out)
            .is_err()
    );
}

#[test]
fn copies_gathers_and_concats_are_the_cpus() {
    if let Some(gpu) = gpu() {
        copies::<f32>(&gpu);
        copies::<f64>(&gpu);
    }
}

fn matmuls<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(5, "cuda-matmul");
    for (batch, m, k, n) in [
        (1, 1, 1, 1),
        (1, 67, 129, 33),
        (3, 5, 300, 70),
        (2, 130, 17, 1),
        (1, 4, 0, 3),
        (1, 0, 5, 3),
    ] {
        let a: Vec<T> = data(&mut rng, batch * m * k);
        let b: Vec<T> = data(&mut rng, batch * k * n);
        let (ga, gb) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        let la = Layout::contiguous(Shape::from([batch, m, k]));
        // b read as the transpose of a [batch, n, k] buffer.
        let lb = Layout::from_parts(
            Shape::from([batch, k, n]),
            Dims::from_slice(&[k * n, 1, k]),
            0,
        );
        for rhs in [Layout::contiguous(Shape::from([batch, k, n])), lb] {
            let mut c = vec![T::zero(); batch * m * n];
            cpu()
                .matmul(View::new(&a, &la), View::new(&b, &rhs), &mut c)
                .unwrap();
            let mut out = gpu.alloc_output::<T>(batch * m * n).unwrap();
            let out = std::sync::Arc::get_mut(&mut out).unwrap();
            gpu.matmul(View::new(&ga, &la), View::new(&gb, &rhs), out)
                .unwrap();
            same(
                &format!("matmul {batch}x{m}x{k}x{n}"),
                &c,
                &gpu.download(out).unwrap(),
            );
        }
    }
}

#[test]
fn matmul_is_the_canonical_fma_chain() {
    if let Some(gpu) = gpu() {
        matmuls::<f32>(&gpu);
        matmuls::<f64>(&gpu);
    }
}

/// `[batch, m, k] @ [batch, k, n]` on both devices, bit for bit: A row-major or stored
/// transposed (`a_t`, as `x^T` in a weight's gradient), likewise B (`g @ w^T`), both at
/// `offset` elements into their buffers; `zero_terms` makes every product `+0 * -x`.
fn matmul_case<T: Float>(
    gpu: &Cuda,
    rng: &mut Rng,
    (batch, m, k, n): (usize, usize, usize, usize),
    (a_t, b_t): (bool, bool),
    offset: usize,
    zero_terms: bool,
) {
    let operand = |rng: &mut Rng, rows: usize, cols: usize, transposed: bool| {
        let data: Vec<T> = data(rng, offset + batch * rows * cols);
        let strides = if transposed {
            [rows * cols, 1, rows]
        } else {
            [rows * cols, cols, 1]
        };
        let layout = Layout::from_parts(
            Shape::from([batch, rows, cols]),
            Dims::from_slice(&strides),
            offset,
        );
        (data, layout)
    };
    let (mut a, la) = operand(rng, m, k, a_t);
    let (mut b, lb) = operand(rng, k, n, b_t);
    if zero_terms {
        a.iter_mut().for_each(|x| *x = T::zero());
        for (i, x) in b.iter_mut().enumerate() {
            *x = -T::from_usize(1 + i % 7);
        }
    }
    let mut c = vec![T::zero(); batch * m * n];
    cpu()
        .matmul(View::new(&a, &la), View::new(&b, &lb), &mut c)
        .unwrap();
    let (ga, gb) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut out = gpu.alloc_zeros::<T>(c.len()).unwrap();
    gpu.matmul(View::new(&ga, &la), View::new(&gb, &lb), &mut out)
        .unwrap();
    let layout = |t: bool| if t { "t" } else { "n" };
    same(
        &format!(
            "matmul {batch}x[{m},{k}]@[{k},{n}] {}{} offset {offset}{}",
            layout(a_t),
            layout(b_t),
            if zero_terms { " (-0 terms)" } else { "" }
        ),
        &c,
        &gpu.download(&out).unwrap(),
    );
}

/// The tiled kernels (matmul.rs, `choose_tile`): each tile, picked by the output's size
/// on this GPU's multiprocessor count, in each layout, with k tails after full k-tiles;
/// the TD3 and PPO layer products forward and backward; k within one k-tile; broadcast
/// batches; the -0 chain; and what must take the strided kernel (k = 1, odd k, n = 1, an
/// unaligned offset).
fn tiled_matmuls<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(38, "cuda-matmul-tiled");
    let layouts = [(false, false), (true, false), (false, true), (true, true)];
    // Sides whose 128 (64) tiles give 2 blocks per multiprocessor, and 4 (8) more rows
    // (columns): the 128 x 128 tile, then the 64 x 64 one where 128 x 128 does not fill.
    let fill = ((2 * gpu.multiprocessors()) as f64).sqrt().ceil() as usize;
    for (edge, k) in [(128, 20), (64, 36)] {
        for layout in layouts {
            let shape = (1, edge * fill + 4, k, edge * fill + 8);
            matmul_case::<T>(gpu, &mut rng, shape, layout, 0, false);
        }
    }
    // TD3's critic layer [256, 400] @ [400, 300] and its gradients g @ w^T and x^T @ g;
    // the value head [256, 300] @ [300, 1]; PPO's [8192, 64] @ [64, 64] and [8192, 8] @
    // [8, 64] and their gradients.
    for (shape, layout) in [
        ((1, 256, 400, 300), (false, false)),
        ((1, 256, 300, 400), (false, true)),
        ((1, 400, 256, 300), (true, false)),
        ((1, 256, 300, 1), (false, false)),
        ((1, 8192, 64, 64), (false, false)),
        ((1, 8192, 8, 64), (false, false)),
        ((1, 8192, 64, 8), (false, true)),
        ((1, 64, 8192, 64), (true, false)),
        ((1, 8, 8192, 64), (true, false)),
    ] {
        matmul_case::<T>(gpu, &mut rng, shape, layout, 0, false);
    }
    // k in one partial k-tile, one full k-tile of each size, and one step (strided); odd
    // k (strided); m and n around the tiles' edges.
    for k in [1, 4, 8, 12, 16, 17, 24] {
        for layout in layouts {
            matmul_case::<T>(gpu, &mut rng, (1, 129, k, 132), layout, 0, false);
        }
    }
    for (m, n) in [
        (1, 4),
        (4, 1),
        (31, 36),
        (33, 28),
        (63, 64),
        (65, 68),
        (127, 120),
    ] {
        matmul_case::<T>(gpu, &mut rng, (1, m, 16, n), (false, false), 0, false);
    }
    // Batches, at an aligned offset (tiled) and an unaligned one (strided).
    for offset in [0, 4, 1, 2] {
        matmul_case::<T>(
            gpu,
            &mut rng,
            (3, 68, 20, 72),
            (false, false),
            offset,
            false,
        );
        matmul_case::<T>(gpu, &mut rng, (3, 68, 20, 72), (true, true), offset, false);
    }
    // -0 chains stay -0: no fma over padding past k, in every tile.
    for shape in [
        (1, 130, 12, 130),
        (1, 1100, 20, 1100),
        (1, 128 * fill + 4, 20, 128 * fill + 8),
    ] {
        matmul_case::<T>(gpu, &mut rng, shape, (false, false), 0, true);
        matmul_case::<T>(gpu, &mut rng, shape, (true, true), 0, true);
    }
    // A broadcast batch (stride 0) of A.
    let (batch, m, k, n) = (4, 36, 20, 40);
    let a: Vec<T> = data(&mut rng, m * k);
    let b: Vec<T> = data(&mut rng, batch * k * n);
    let la = Layout::from_parts(Shape::from([batch, m, k]), Dims::from_slice(&[0, k, 1]), 0);
    let lb = Layout::contiguous(Shape::from([batch, k, n]));
    let mut c = vec![T::zero(); batch * m * n];
    cpu()
        .matmul(View::new(&a, &la), View::new(&b, &lb), &mut c)
        .unwrap();
    let (ga, gb) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut out = gpu.alloc_zeros::<T>(c.len()).unwrap();
    gpu.matmul(View::new(&ga, &la), View::new(&gb, &lb), &mut out)
        .unwrap();
    same("matmul broadcast batch", &c, &gpu.download(&out).unwrap());
}

/// `activation(x @ w + bias)` in one kernel (`matmul_bias_<edge>_nn`) against the Cpu's
/// fused layer, bit for bit: the TD3 and PPO forward layers, the output of a 128 tile's
/// size (which takes the 64 tile), edge columns; a bias holding NaN, infinities and signed
/// zeros; every activation fused. What is not fused answers `Ok(false)` and leaves the
/// output alone: another activation, a transposed weight, an unaligned view; a bias of
/// the wrong shape is an error naming it.
fn linear_layers<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(38, "cuda-matmul-bias");
    let fill = ((2 * gpu.multiprocessors()) as f64).sqrt().ceil() as usize;
    let activations = [
        None,
        Some(UnaryOp::Relu),
        Some(UnaryOp::Tanh),
        Some(UnaryOp::Sigmoid),
        Some(UnaryOp::Sqrt),
    ];
    let run = |rng: &mut Rng,
               (m, k, n): (usize, usize, usize),
               lw: Option<Layout>,
               offset: usize,
               activation| {
        let x: Vec<T> = data(rng, offset + m * k);
        let w: Vec<T> = data(rng, k * n);
        let special = [
            T::nan(),
            T::infinity(),
            -T::infinity(),
            -T::zero(),
            T::zero(),
        ];
        let bias: Vec<T> = (0..n)
            .map(|j| {
                special
                    .get(j)
                    .copied()
                    .unwrap_or_else(|| rng.normal(0.0, 2.0))
            })
            .collect();
        let lx = Layout::from_parts(Shape::from([m, k]), Dims::from_slice(&[k, 1]), offset);
        let lw = lw.unwrap_or_else(|| Layout::contiguous(Shape::from([k, n])));
        let lb = Layout::contiguous(Shape::from([n]));
        let mut want = vec![T::zero(); m * n];
        let cpu_fused = cpu()
            .matmul_bias(
                View::new(&x, &lx),
                View::new(&w, &lw),
                View::new(&bias, &lb),
                activation,
                &mut want,
            )
            .unwrap();
        let (gx, gw, gb) = (
            gpu.upload(&x).unwrap(),
            gpu.upload(&w).unwrap(),
            gpu.upload(&bias).unwrap(),
        );
        let sentinel = vec![T::from_f64(7.0); m * n];
        let mut out = gpu.upload(&sentinel).unwrap();
        let fused = gpu
            .matmul_bias(
                View::new(&gx, &lx),
                View::new(&gw, &lw),
                View::new(&gb, &lb),
                activation,
                &mut out,
            )
            .unwrap();
        (
            cpu_fused,
            fused,
            want,
            gpu.download(&out).unwrap(),
            sentinel,
        )
    };
    for activation in activations {
        for shape in [
            (256, 17, 400),
            (256, 400, 300),
            (256, 300, 1),
            (8192, 8, 64),
            (8192, 64, 64),
            (128 * fill + 4, 20, 128 * fill + 8),
            (33, 16, 36),
        ] {
            let (cpu_fused, fused, want, got, _) = run(&mut rng, shape, None, 0, activation);
            let what = format!("matmul_bias {shape:?} {activation:?}");
            assert!(cpu_fused && fused, "{what}: fused on both devices");
            same(&what, &want, &got);
        }
    }
    // Not fused: the output is left as it was.
    let (m, k, n) = (32, 16, 40);
    let transposed = Layout::from_parts(Shape::from([k, n]), Dims::from_slice(&[1, k]), 0);
    for (lw, offset, activation) in [
        (None, 0, Some(UnaryOp::Exp)),
        (Some(transposed), 0, Some(UnaryOp::Relu)),
        (None, 1, Some(UnaryOp::Relu)),
    ] {
        let (_, fused, _, got, sentinel) = run(&mut rng, (m, k, n), lw, offset, activation);
        assert!(!fused, "{activation:?} offset {offset}: not fused");
        same("an unfused matmul_bias leaves its output", &sentinel, &got);
    }
    let (gx, gw, gb) = (
        gpu.upload(&vec![T::one(); m * k]).unwrap(),
        gpu.upload(&vec![T::one(); k * n]).unwrap(),
        gpu.upload(&vec![T::one(); n + 1]).unwrap(),
    );
    let mut out = gpu.alloc_zeros::<T>(m * n).unwrap();
    let error = gpu
        .matmul_bias(
            View::new(&gx, &Layout::contiguous(Shape::from([m, k]))),
            View::new(&gw, &Layout::contiguous(Shape::from([k, n]))),
            View::new(&gb, &Layout::contiguous(Shape::from([n + 1]))),
            None,
            &mut out,
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Cuda::matmul_bias") && error.contains("`bias`"),
        "{error}"
    );
}

#[test]
fn linear_layers_are_the_cpus_in_one_kernel() {
    if let Some(gpu) = gpu() {
        linear_layers::<f32>(&gpu);
        linear_layers::<f64>(&gpu);
    }
}

/// Uniform and normal draws on the GPU against the Cpu's: the same samples bit for bit and
/// the same stream position after, for lengths around the kernels' chunks and past a
/// grid's stride, a stream far along and one with a pending normal sample.
fn random_draws<T: Float>(gpu: &Cuda) {
    for n in [1, 15, 17, 4096, 1_000_003] {
        for (skipped, spare) in [(0, false), (1 << 50, false), (3, true)] {
            for normal in [false, true] {
                let mut host = Rng::new(n as u64, "gpu-random");
                host.skip(skipped);
                if spare {
                    host.normal_f64();
                }
                let mut device_rng = host.clone();
                let mut want = vec![T::zero(); n];
                let mut out = gpu.alloc_zeros::<T>(n).unwrap();
                if normal {
                    cpu().fill_normal(&mut host, 0.25, 3.0, &mut want).unwrap();
                    gpu.fill_normal(&mut device_rng, 0.25, 3.0, &mut out)
                        .unwrap();
                } else {
                    let (low, high) = (T::from_f64(-2.0), T::from_f64(0.5));
                    cpu().fill_uniform(&mut host, low, high, &mut want).unwrap();
                    gpu.fill_uniform(&mut device_rng, low, high, &mut out)
                        .unwrap();
                }
                let what = format!("{n} draws (normal: {normal}, spare: {spare})");
                same(&what, &want, &gpu.download(&out).unwrap());
                assert_eq!(device_rng.state(), host.state(), "{what}: the stream after");
            }
        }
    }
}

#[test]
fn random_draws_are_the_cpus() {
    if let Some(gpu) = gpu() {
        random_draws::<f32>(&gpu);
        random_draws::<f64>(&gpu);
    }
}

#[test]
fn tiled_matmuls_are_the_canonical_fma_chain() {
    if let Some(gpu) = gpu() {
        tiled_matmuls::<f32>(&gpu);
        tiled_matmuls::<f64>(&gpu);
    }
}

fn recurrences<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(6, "cuda-recurrence");
    // The staged kernels' slices are 16 steps of f32 and 8 of f64, their tiles two slices,
    // a block 32 columns: lengths around each, one column and partial blocks.
    for (t, b) in [
        (0, 3),
        (1, 1),
        (9, 1),
        (15, 33),
        (17, 31),
        (32, 32),
        (33, 100),
        (37, 5),
        (130, 67),
        (5, 0),
    ] {
        let layout = TimeMajor::new(t, b);
        let len = t * b;
        let up = |v: &Vec<T>| gpu.upload(v).unwrap();
        let rewards: Vec<T> = data(&mut rng, len);
        let values: Vec<T> = (0..len).map(|_| rng.normal(0.0, 1.0)).collect();
        let rhos: Vec<T> = (0..len)
            .map(|_| T::from_f64(rng.uniform_f64() * 2.0))
            .collect();
        let boot: Vec<T> = (0..b).map(|_| rng.normal(0.0, 1.0)).collect();
        let flags = |rng: &mut Rng| -> Vec<T> {
            (0..len)
                .map(|_| {
                    if rng.below(7) == 0 {
                        T::one()
                    } else {
                        T::zero()
                    }
                })
                .collect()
        };
        let (term, trunc) = (flags(&mut rng), flags(&mut rng));
        let disc: Vec<T> = (0..len)
            .map(|i| {
                if i % 11 == 3 {
                    T::zero()
                } else {
                    T::from_f64(0.97)
                }
            })
            .collect();
        let g = (
            up(&rewards),
            up(&values),
            up(&rhos),
            up(&boot),
            up(&term),
            up(&trunc),
            up(&disc),
        );
        let gamma = T::from_f64(0.99);
        let lambda = T::from_f64(0.95);
        let cpu_episodes: [Episodes<'_, Vec<T>, T>; 4] = [
            Episodes::Constant { gamma },
            Episodes::Discounts(&disc),
            Episodes::Flags {
                gamma,
                terminated: &term,
                truncation: None,
            },
            Episodes::Flags {
                gamma,
                terminated: &term,
                truncation: Some(Truncation {
                    truncated: &trunc,
                    final_values: &values,
                }),
            },
        ];
        let gpu_episodes: [Episodes<'_, _, T>; 4] = [
            Episodes::Constant { gamma },
            Episodes::Discounts(&g.6),
            Episodes::Flags {
                gamma,
                terminated: &g.4,
                truncation: None,
            },
            Episodes::Flags {
                gamma,
                terminated: &g.4,
                truncation: Some(Truncation {
                    truncated: &g.5,
                    final_values: &g.1,
                }),
            },
        ];
        for (ce, ge) in cpu_episodes.into_iter().zip(gpu_episodes) {
            let what = format!("[{t}, {b}] {:?}", std::mem::discriminant(&ce));
            let mut c = vec![T::zero(); len];
            let mut o = gpu.alloc_zeros(len).unwrap();
            cpu()
                .discounted_returns(layout, &rewards, ce, &boot, &mut c)
                .unwrap();
            gpu.discounted_returns(layout, &g.0, ge, &g.3, &mut o)
                .unwrap();
            same(&format!("returns {what}"), &c, &gpu.download(&o).unwrap());

            let (mut ca, mut cr) = (vec![T::zero(); len], vec![T::zero(); len]);
            let (mut ga, mut gr) = (gpu.alloc_zeros(len).unwrap(), gpu.alloc_zeros(len).unwrap());
            cpu()
                .gae(
                    layout,
                    &rewards,
                    &values,
                    &boot,
                    ce,
                    lambda,
                    &mut ca,
                    Some(&mut cr),
                )
                .unwrap();
            gpu.gae(layout, &g.0, &g.1, &g.3, ge, lambda, &mut ga, Some(&mut gr))
                .unwrap();
            same(&format!("gae {what}"), &ca, &gpu.download(&ga).unwrap());
            same(
                &format!("gae returns {what}"),
                &cr,
                &gpu.download(&gr).unwrap(),
            );
            let mut advantages = gpu.alloc_zeros(len).unwrap();
            gpu.gae(layout, &g.0, &g.1, &g.3, ge, lambda, &mut advantages, None)
                .unwrap();
            same(
                &format!("gae without returns {what}"),
                &ca,
                &gpu.download(&advantages).unwrap(),
            );

            cpu()
                .lambda_returns(layout, &rewards, &values, ce, lambda, &mut c)
                .unwrap();
            gpu.lambda_returns(layout, &g.0, &g.1, ge, lambda, &mut o)
                .unwrap();
            same(&format!("lambda {what}"), &c, &gpu.download(&o).unwrap());

            for n in [1, 3, 1000] {
                cpu()
                    .n_step_returns(layout, &rewards, &values, ce, n, &mut c)
                    .unwrap();
                gpu.n_step_returns(layout, &g.0, &g.1, ge, n, &mut o)
                    .unwrap();
                same(
                    &format!("n-step {n} {what}"),
                    &c,
                    &gpu.download(&o).unwrap(),
                );
            }

            let params = VtraceParams {
                lambda,
                clip_rho: T::one(),
                clip_pg_rho: T::from_f64(1.5),
            };
            cpu()
                .vtrace(
                    layout, &rewards, &values, &boot, &rhos, ce, params, &mut ca, &mut cr,
                )
                .unwrap();
            gpu.vtrace(layout, &g.0, &g.1, &g.3, &g.2, ge, params, &mut ga, &mut gr)
                .unwrap();
            same(
                &format!("vtrace vs {what}"),
                &ca,
                &gpu.download(&ga).unwrap(),
            );
            same(
                &format!("vtrace pg {what}"),
                &cr,
                &gpu.download(&gr).unwrap(),
            );
        }
        let mut c = vec![T::zero(); len];
        let mut o = gpu.alloc_zeros(len).unwrap();
        cpu()
            .linear_recurrence(layout, &rewards, &disc, &boot, &mut c)
            .unwrap();
        gpu.linear_recurrence(layout, &g.0, &g.6, &g.3, &mut o)
            .unwrap();
        same("linear_recurrence", &c, &gpu.download(&o).unwrap());
    }
}

#[test]
fn recurrences_run_the_canonical_scans() {
    if let Some(gpu) = gpu() {
        recurrences::<f32>(&gpu);
        recurrences::<f64>(&gpu);
    }
}

type CpuTerm<'a, T> = MaskedTerm<'a, Vec<T>, T>;
type GpuTerm<'a, T> = MaskedTerm<'a, rlgrad_cuda::CudaBuffer<T>, T>;
type CpuMap<'a, T> = MaskedMap<'a, Vec<T>, T>;
type GpuMap<'a, T> = MaskedMap<'a, rlgrad_cuda::CudaBuffer<T>, T>;

fn sequences<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(7, "cuda-sequence");
    // Pad and unpad move items of about 1024 units (float4, double2, pairs or elements)
    // of one sequence: sequences longer than an item, and every unit's feature counts.
    for lengths in [
        vec![],
        vec![0, 0],
        vec![3, 0, 5, 1],
        (0..300).map(|i| (i * 7) % 41).collect(),
        vec![1100, 0, 1025, 1, 7],
        (0..64).map(|i| (i * 37) % 257).collect(),
    ] {
        for features in [1, 2, 3, 4, 8, 64, 65] {
            let seqs = Sequences::new(&lengths, None).unwrap();
            let packed = seqs.total() * features;
            let padded = seqs.padded_steps() * features;
            let flat: Vec<T> = data(&mut rng, packed);
            let gflat = gpu.upload(&flat).unwrap();
            for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
                let mut c = vec![T::one(); padded];
                cpu().pad(&seqs, features, order, &flat, &mut c).unwrap();
                // A recycled-looking output: the kernel must write every element.
                let mut g = gpu.upload(&vec![T::one(); padded]).unwrap();
                gpu.pad(&seqs, features, order, &gflat, &mut g).unwrap();
                same("pad", &c, &gpu.download(&g).unwrap());
                let mut back = vec![T::zero(); packed];
                cpu().unpad(&seqs, features, order, &c, &mut back).unwrap();
                let mut gback = gpu.alloc_zeros(packed).unwrap();
                gpu.unpad(&seqs, features, order, &g, &mut gback).unwrap();
                same("unpad", &back, &gpu.download(&gback).unwrap());
            }
            let x: Vec<T> = data(&mut rng, padded);
            let other: Vec<T> = data(&mut rng, padded);
            let (gx, gother) = (gpu.upload(&x).unwrap(), gpu.upload(&other).unwrap());
            let shift = T::from_f64(0.3);
            let terms: [(CpuTerm<'_, T>, GpuTerm<'_, T>); 3] = [
                (MaskedTerm::Value, MaskedTerm::Value),
                (
                    MaskedTerm::SquaredDeviation { mean: shift },
                    MaskedTerm::SquaredDeviation { mean: shift },
                ),
                (
                    MaskedTerm::Product {
                        other: &other,
                        shift,
                    },
                    MaskedTerm::Product {
                        other: &gother,
                        shift,
                    },
                ),
            ];
            for (ct, gt) in terms {
                let c = cpu().masked_sum(&seqs, features, &x, ct).unwrap();
                let g = gpu.masked_sum(&seqs, features, &gx, gt).unwrap();
                same("masked_sum", &[c], &[g]);
            }
            let mut c = vec![T::zero(); seqs.batch()];
            cpu().sequence_sums(&seqs, features, &x, &mut c).unwrap();
            let mut g = gpu.alloc_zeros(seqs.batch()).unwrap();
            gpu.sequence_sums(&seqs, features, &gx, &mut g).unwrap();
            same("sequence_sums", &c, &gpu.download(&g).unwrap());
            let per: Vec<T> = data(&mut rng, seqs.batch());
            let gper = gpu.upload(&per).unwrap();
            let (a, b) = (T::from_f64(0.5), T::from_f64(1.5));
            let maps: [(CpuMap<'_, T>, GpuMap<'_, T>); 5] = [
                (MaskedMap::Fill(a), MaskedMap::Fill(a)),
                (MaskedMap::PerSequence(&per), MaskedMap::PerSequence(&gper)),
                (
                    MaskedMap::Scale { shift: a, scale: b },
                    MaskedMap::Scale { shift: a, scale: b },
                ),
                (
                    MaskedMap::Standardize {
                        mean: a,
                        denominator: b,
                    },
                    MaskedMap::Standardize {
                        mean: a,
                        denominator: b,
                    },
                ),
                (
                    MaskedMap::StandardizeBackward {
                        grad: &other,
                        grad_mean: a,
                        mean: b,
                        denominator: b,
                        coefficient: a,
                    },
                    MaskedMap::StandardizeBackward {
                        grad: &gother,
                        grad_mean: a,
                        mean: b,
                        denominator: b,
                        coefficient: a,
                    },
                ),
            ];
            for (cm, gm) in maps {
                let mut c = vec![T::one(); padded];
                cpu()
                    .masked_map(&seqs, features, Some(&x), cm, &mut c)
                    .unwrap();
                let mut g = gpu.upload(&vec![T::one(); padded]).unwrap();
                gpu.masked_map(&seqs, features, Some(&gx), gm, &mut g)
                    .unwrap();
                same(
                    &format!("masked_map {cm:?}"),
                    &c,
                    &gpu.download(&g).unwrap(),
                );
            }
        }
    }
}

/// Unpad over more distinct sequence layouts than the device keeps on the GPU (16), then
/// the first again: evicted and re-uploaded copies give the same bits.
fn sequence_cache<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(8, "cuda-sequence-cache");
    let layouts: Vec<Sequences> = (1..=20)
        .chain([1, 2])
        .map(|k| Sequences::new(&[k, 3 * k % 7, 0, 2 * k], None).unwrap())
        .collect();
    for seqs in &layouts {
        let features = 4;
        let padded: Vec<T> = data(&mut rng, seqs.padded_steps() * features);
        let gpadded = gpu.upload(&padded).unwrap();
        let mut c = vec![T::zero(); seqs.total() * features];
        cpu()
            .unpad(seqs, features, PadOrder::TimeMajor, &padded, &mut c)
            .unwrap();
        let mut g = gpu.alloc_zeros(c.len()).unwrap();
        gpu.unpad(seqs, features, PadOrder::TimeMajor, &gpadded, &mut g)
            .unwrap();
        same("unpad after evictions", &c, &gpu.download(&g).unwrap());
    }
}

#[test]
fn sequence_kernels_are_the_cpus() {
    if let Some(gpu) = gpu() {
        sequences::<f32>(&gpu);
        sequences::<f64>(&gpu);
        sequence_cache::<f32>(&gpu);
        sequence_cache::<f64>(&gpu);
    }
}

fn lstm_cells<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(31, "cuda lstm cell");
    for (batch, hidden) in [(0, 4), (1, 1), (3, 7), (37, 64)] {
        let units = batch * hidden;
        let gates: Vec<T> = data(&mut rng, 4 * units);
        let c: Vec<T> = data(&mut rng, units);
        let grad_state: Vec<T> = data(&mut rng, 2 * units);
        let (mut cache, mut state) = (vec![T::zero(); 5 * units], vec![T::zero(); 2 * units]);
        let forward = LstmForward {
            gates: &gates,
            c: &c,
            cache: &mut cache,
            state: &mut state,
        };
        cpu().lstm_cell(batch, hidden, forward).unwrap();
        let (g_gates, g_c) = (gpu.upload(&gates).unwrap(), gpu.upload(&c).unwrap());
        let mut g_cache = gpu.alloc_zeros(5 * units).unwrap();
        let mut g_state = gpu.alloc_zeros(2 * units).unwrap();
        let forward = LstmForward {
            gates: &g_gates,
            c: &g_c,
            cache: &mut g_cache,
            state: &mut g_state,
        };
        gpu.lstm_cell(batch, hidden, forward).unwrap();
        same("lstm_cell cache", &cache, &gpu.download(&g_cache).unwrap());
        same("lstm_cell state", &state, &gpu.download(&g_state).unwrap());
        let (mut grad_gates, mut grad_c) = (vec![T::zero(); 4 * units], vec![T::zero(); units]);
        let backward = LstmBackward {
            cache: &cache,
            c: &c,
            grad_state: &grad_state,
            grad_gates: &mut grad_gates,
            grad_c: &mut grad_c,
        };
        cpu().lstm_cell_backward(batch, hidden, backward).unwrap();
        let g_grad_state = gpu.upload(&grad_state).unwrap();
        let mut g_grad_gates = gpu.alloc_zeros(4 * units).unwrap();
        let mut g_grad_c = gpu.alloc_zeros(units).unwrap();
        let backward = LstmBackward {
            cache: &g_cache,
            c: &g_c,
            grad_state: &g_grad_state,
            grad_gates: &mut g_grad_gates,
            grad_c: &mut g_grad_c,
        };
        gpu.lstm_cell_backward(batch, hidden, backward).unwrap();
        same(
            "lstm_cell grad_gates",
            &grad_gates,
            &gpu.download(&g_grad_gates).unwrap(),
        );
        same(
            "lstm_cell grad_c",
            &grad_c,
            &gpu.download(&g_grad_c).unwrap(),
        );
    }
    let (short, c) = (
        gpu.alloc_zeros::<T>(3).unwrap(),
        gpu.alloc_zeros::<T>(2).unwrap(),
    );
    let (mut cache, mut state) = (gpu.alloc_zeros(10).unwrap(), gpu.alloc_zeros(4).unwrap());
    let forward = LstmForward {
        gates: &short,
        c: &c,
        cache: &mut cache,
        state: &mut state,
    };
    let err = gpu.lstm_cell(2, 1, forward).unwrap_err();
    assert_eq!(err.argument(), Some("gates"));
}

#[test]
fn the_lstm_cell_is_the_cpus() {
    if let Some(gpu) = gpu() {
        lstm_cells::<f32>(&gpu);
        lstm_cells::<f64>(&gpu);
    }
}

fn updates<T: Float>() -> Vec<Update<T>> {
    let f = T::from_f64;
    let torch = |amsgrad, weight_decay, keep| {
        Update::Adam(Adam::Torch(AdamTorch {
            step_size: f(1e-3 / (1.0 - 0.9f64.powi(3))),
            bias_correction2_sqrt: f((1.0 - 0.999f64.powi(3)).sqrt()),
            one_minus_beta1: f(0.1),
            beta2: f(0.999),
            one_minus_beta2: f(0.001),
            eps: f(1e-8),
            weight_decay,
            decoupled_keep: keep,
            amsgrad,
        }))
    };
    let mut all = vec![
        Update::Sgd(Sgd {
            lr: f(0.1),
            weight_decay: T::zero(),
        }),
        Update::Sgd(Sgd {
            lr: f(0.1),
            weight_decay: f(0.01),
        }),
        torch(false, T::zero(), T::one()),
        torch(true, f(0.01), T::one()),
        torch(false, T::zero(), f(0.999)),
        Update::Adam(Adam::Keras {
            alpha: f(1e-3),
            lr: f(1e-3),
            one_minus_beta1: f(0.1),
            one_minus_beta2: f(0.001),
            eps: f(1e-7),
            weight_decay: f(0.004),
            amsgrad: true,
        }),
        Update::Adagrad(Adagrad::Torch {
            clr: f(0.01),
            eps: f(1e-10),
            weight_decay: f(0.1),
        }),
        Update::Adagrad(Adagrad::Keras {
            lr: f(0.01),
            eps: f(1e-7),
            weight_decay: T::zero(),
        }),
        Update::Momentum(Momentum::Keras {
            lr: f(0.01),
            momentum: f(0.9),
            nesterov: true,
            weight_decay: f(0.01),
        }),
        Update::Momentum(Momentum::Core {
            lr: f(0.01),
            momentum: f(0.9),
        }),
    ];
    for (nesterov, first_step) in [(false, true), (true, false)] {
        all.push(Update::Momentum(Momentum::Torch {
            lr: f(0.01),
            momentum: f(0.9),
            dampening: f(0.1),
            nesterov,
            weight_decay: f(0.001),
            first_step,
        }));
    }
    for flavor in [Flavor::Torch, Flavor::Keras] {
        for (centered, momentum) in [(false, 0.0), (true, 0.0), (false, 0.9), (true, 0.9)] {
            all.push(Update::Rmsprop(Rmsprop {
                flavor,
                lr: f(0.01),
                alpha: f(0.99),
                one_minus_alpha: f(0.01),
                eps: f(1e-8),
                momentum: f(momentum),
                centered,
                weight_decay: f(0.01),
            }));
        }
    }
    all
}

fn optimizers<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(8, "cuda-optim");
    for n in [0, 1, 1001] {
        for update in updates::<T>() {
            let param: Vec<T> = data(&mut rng, n);
            let grad: Vec<T> = data(&mut rng, n);
            let slots: Vec<Vec<T>> = update
                .slot_names()
                .iter()
                .map(|_| (0..n).map(|_| T::from_f64(rng.uniform_f64())).collect())
                .collect();
            let (mut cp, mut cs) = (param.clone(), slots.clone());
            for _ in 0..3 {
                let mut refs: Vec<&mut Vec<T>> = cs.iter_mut().collect();
                Cpu::new(Par::rayon(2))
                    .update(&update, &mut cp, &grad, &mut refs)
                    .unwrap();
            }
            let mut gp = gpu.upload(&param).unwrap();
            let gg = gpu.upload(&grad).unwrap();
            let mut gs: Vec<_> = slots.iter().map(|s| gpu.upload(s).unwrap()).collect();
            for _ in 0..3 {
                let mut refs: Vec<_> = gs.iter_mut().collect();
                gpu.update(&update, &mut gp, &gg, &mut refs).unwrap();
            }
            same(
                &format!("{update:?} param"),
                &cp,
                &gpu.download(&gp).unwrap(),
            );
            for ((name, c), g) in update.slot_names().iter().zip(&cs).zip(&gs) {
                same(&format!("{update:?} {name}"), c, &gpu.download(g).unwrap());
            }
        }
    }
}

#[test]
fn every_fused_update_is_the_cpus() {
    if let Some(gpu) = gpu() {
        optimizers::<f32>(&gpu);
        optimizers::<f64>(&gpu);
    }
}

/// An update with its parameter, gradient and slots on the host.
type HostJob<T> = (Update<T>, Vec<T>, Vec<T>, Vec<Vec<T>>);

/// A step's many parameters in few launches (16 tensors each, grouped by update) and
/// Polyak averaging over all pairs: the bits of the Cpu's update of each tensor.
fn multi_tensor<T: Float>(gpu: &Cuda) {
    let mut rng = Rng::new(9, "cuda-multi-tensor");
    let kinds = updates::<T>();
    let (adam, momentum) = (kinds[kinds.len() / 2], kinds[1]);
    // 37 tensors: three launches' worth, two updates interleaved, sizes from 0 to a grid
    // wider than the others'.
    let sizes: Vec<usize> = (0..37)
        .map(|k| [0, 1, 5, 300, 1001, 70_000][k % 6])
        .collect();
    let jobs: Vec<HostJob<T>> = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let update = if k % 3 == 0 { momentum } else { adam };
            let slots = update
                .slot_names()
                .iter()
                .map(|_| (0..n).map(|_| T::from_f64(rng.uniform_f64())).collect())
                .collect();
            (update, data(&mut rng, n), data(&mut rng, n), slots)
        })
        .collect();
    let cpu = Cpu::new(Par::rayon(2));
    let mut on_cpu = jobs.clone();
    for (update, param, grad, slots) in &mut on_cpu {
        let mut refs: Vec<&mut Vec<T>> = slots.iter_mut().collect();
        cpu.update(update, param, grad, &mut refs).unwrap();
    }
    let mut on_gpu: Vec<_> = jobs
        .iter()
        .map(|(u, p, g, s)| {
            let slots: Vec<_> = s.iter().map(|s| gpu.upload(s).unwrap()).collect();
            (*u, gpu.upload(p).unwrap(), gpu.upload(g).unwrap(), slots)
        })
        .collect();
    let mut batch: Vec<_> = on_gpu
        .iter_mut()
        .map(|(update, param, grad, slots)| BufferJob {
            update: *update,
            param,
            grad: &*grad,
            slots: slots.iter_mut().collect(),
        })
        .collect();
    gpu.update_all(&mut batch).unwrap();
    drop(batch);
    for (k, ((_, cp, _, cs), (_, gp, _, gs))) in on_cpu.iter().zip(&on_gpu).enumerate() {
        same(&format!("tensor {k} param"), cp, &gpu.download(gp).unwrap());
        for (j, (c, g)) in cs.iter().zip(gs).enumerate() {
            same(
                &format!("tensor {k} slot {j}"),
                c,
                &gpu.download(g).unwrap(),
            );
        }
    }
    let (tau, keep) = (T::from_f64(0.005), T::from_f64(1.0 - 0.005));
    let sources: Vec<Vec<T>> = sizes.iter().map(|&n| data(&mut rng, n)).collect();
    let mut targets: Vec<Vec<T>> = sizes.iter().map(|&n| data(&mut rng, n)).collect();
    let mut gpu_targets: Vec<_> = targets.iter().map(|t| gpu.upload(t).unwrap()).collect();
    let gpu_sources: Vec<_> = sources.iter().map(|s| gpu.upload(s).unwrap()).collect();
    let mut refs: Vec<&mut Vec<T>> = targets.iter_mut().collect();
    let source_refs: Vec<&Vec<T>> = sources.iter().collect();
    cpu.polyak(tau, keep, &mut refs, &source_refs).unwrap();
    let mut refs: Vec<_> = gpu_targets.iter_mut().collect();
    let source_refs: Vec<_> = gpu_sources.iter().collect();
    gpu.polyak(tau, keep, &mut refs, &source_refs).unwrap();
    let refused = gpu.polyak(tau, keep, &mut refs[..1], &source_refs[..2]);
    assert!(refused.is_err(), "one target, two sources");
    for (k, (c, g)) in targets.iter().zip(&gpu_targets).enumerate() {
        same(&format!("polyak target {k}"), c, &gpu.download(g).unwrap());
    }
}

#[test]
fn multi_tensor_updates_and_polyak_are_the_cpus() {
    if let Some(gpu) = gpu() {
        multi_tensor::<f32>(&gpu);
        multi_tensor::<f64>(&gpu);
    }
}

#[test]
fn a_warmed_up_loop_takes_its_buffers_from_the_cache() {
    let Some(gpu) = exclusive_gpu() else { return };
    let layout = Layout::contiguous(Shape::from([1000]));
    let x = gpu.upload(&vec![1.5f32; 1000]).unwrap();
    let step = || {
        let mut y = gpu.alloc_output::<f32>(1000).unwrap();
        gpu.unary(
            UnaryOp::Exp,
            View::new(&x, &layout),
            std::sync::Arc::get_mut(&mut y).unwrap(),
        )
        .unwrap();
        gpu.recycle(y);
    };
    step();
    let cached = gpu.cached_bytes();
    assert!(cached >= 4000);
    step();
    assert_eq!(
        gpu.cached_bytes(),
        cached,
        "the second step reused the buffer"
    );
}

/// The device counts what work asks of it: one launch for an elementwise op, one upload
/// per host slice sent, one download per host read, nothing for an allocation.
#[test]
fn activity_counts_launches_uploads_and_downloads() {
    let Some(gpu) = exclusive_gpu() else { return };
    let before = gpu.activity();
    let layout = Layout::contiguous(Shape::from([1000]));
    let x = gpu.upload(&vec![1.5f32; 1000]).unwrap();
    let mut y = gpu.alloc_output::<f32>(1000).unwrap();
    gpu.unary(
        UnaryOp::Exp,
        View::new(&x, &layout),
        std::sync::Arc::get_mut(&mut y).unwrap(),
    )
    .unwrap();
    assert_eq!(gpu.download(&y).unwrap(), vec![1.5f32.exp(); 1000]);
    let step = gpu.activity().since(before);
    assert_eq!(
        step,
        rlgrad_cuda::Activity {
            launches: 1,
            graph_launches: 0,
            uploads: 1,
            downloads: 1,
        }
    );
}

/// Gathering several arrays with the same indices (a replay sample's fields) uploads the
/// indices once; other indices upload again; every gather gives the Cpu's rows.
#[test]
fn repeated_gather_indices_are_uploaded_once() {
    let Some(gpu) = exclusive_gpu() else { return };
    let cpu = cpu();
    let mut rng = Rng::new(44, "cuda-gather-cache");
    let arrays: Vec<Vec<f32>> = [3usize, 1, 5]
        .iter()
        .map(|&width| data::<f32>(&mut rng, 100 * width))
        .collect();
    let gather = |indices: &[usize]| -> rlgrad_cuda::Activity {
        let before = gpu.activity();
        for host in &arrays {
            let width = host.len() / 100;
            let layout = Layout::contiguous(Shape::from([100, width]));
            let x = gpu.upload(host).unwrap();
            let mut out = gpu.alloc_zeros::<f32>(indices.len() * width).unwrap();
            gpu.index_select(View::new(&x, &layout), 0, indices, &mut out)
                .unwrap();
            let mut want = vec![0.0f32; indices.len() * width];
            cpu.index_select(View::new(host, &layout), 0, indices, &mut want)
                .unwrap();
            same(
                &format!("index_select {indices:?}"),
                &want,
                &gpu.download(&out).unwrap(),
            );
        }
        gpu.activity().since(before)
    };
    let sample = [7usize, 99, 0, 7, 42];
    let first = gather(&sample);
    // The arrays' own uploads, and the indices at most once.
    assert!(first.uploads <= 3 + 1, "{first:?}");
    let again = gather(&sample);
    assert_eq!(again.uploads, 3, "the same indices again: the arrays only");
    let other = gather(&[1, 2, 3]);
    assert_eq!(
        other.uploads,
        3 + 1,
        "new indices, uploaded once for three arrays"
    );
}

/// Every forced tile gives the bits of the tile chosen by size (each runs the same chain
/// of each output), on an output that is not a multiple of any tile; an edge that is no
/// tile is an error naming it, and changes nothing.
#[test]
fn every_forced_tile_gives_the_same_product() {
    let Some(gpu) = exclusive_gpu() else { return };
    let (m, k, n) = (100, 36, 72);
    let mut rng = Rng::new(45, "cuda-forced-tile");
    let (a, b) = (data::<f32>(&mut rng, m * k), data::<f32>(&mut rng, k * n));
    let (la, lb) = (
        Layout::contiguous(Shape::from([m, k])),
        Layout::contiguous(Shape::from([k, n])),
    );
    let mut want = vec![0.0f32; m * n];
    cpu()
        .matmul(View::new(&a, &la), View::new(&b, &lb), &mut want)
        .unwrap();
    let (ga, gb) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let refused = gpu.force_matmul_tile(Some(48)).unwrap_err().to_string();
    assert!(
        refused.contains("`edge`") && refused.contains("48"),
        "{refused}"
    );
    for edge in [Some(128), Some(64), Some(32), None] {
        gpu.force_matmul_tile(edge).unwrap();
        let mut c = gpu.alloc_zeros::<f32>(m * n).unwrap();
        gpu.matmul(View::new(&ga, &la), View::new(&gb, &lb), &mut c)
            .unwrap();
        same(&format!("tile {edge:?}"), &want, &gpu.download(&c).unwrap());
    }
}

#[test]
fn opening_a_missing_device_is_an_error() {
    match Cuda::new(1 << 20) {
        Ok(device) => panic!("opened {device:?}"),
        Err(why) => println!("as expected: {why}"),
    }
}
