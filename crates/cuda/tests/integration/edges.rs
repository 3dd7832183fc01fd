//! The edges a first GPU run finds: reductions deep enough for three and four levels of
//! the sum tree, more than 65,535 rows or columns (grid limits), more than 2^32 elements
//! (64-bit index arithmetic), NaN, ±0 and ±inf in min and max, empty inputs, 3-D views,
//! and every kernel family at the sizes around a warp and a block (1, 31, 32, 33, 1023,
//! 1025). All against the Cpu by bits. Without a GPU each test prints that it was skipped
//! (or fails, with `RLGRAD_REQUIRE_GPU=1`). rlgrad's layouts have no negative strides (a
//! flip is a copy), so there is no negative-stride view to test.

use rlgrad_core::kernels::optim::{Adam, AdamTorch, Update};
use rlgrad_core::kernels::recurrence::{Episodes, TimeMajor};
use rlgrad_core::kernels::sequence::{PadOrder, Sequences};
use rlgrad_core::kernels::{
    BinaryOp, CopyKernel, ElementwiseKernel, MatmulKernel, OptimKernel, RecurrenceKernel,
    ReduceKernel, ReduceOp, SequenceKernel, UnaryOp,
};
use rlgrad_core::{Cpu, Device, Dims, Float, Layout, Rng, Shape, View};
use rlgrad_cuda::Cuda;

use crate::common;
use common::{gpu, same};

fn cpu() -> Cpu {
    Cpu::seq()
}

fn normal<T: Float>(rng: &mut Rng, len: usize) -> Vec<T> {
    (0..len).map(|_| rng.normal(0.0, 1.0)).collect()
}

const SIZES: [usize; 7] = [0, 1, 31, 32, 33, 1023, 1025];

fn reduce_both<T: Float>(
    gpu: &Cuda,
    op: ReduceOp,
    x: &Vec<T>,
    layout: &Layout,
    axis: Option<usize>,
) {
    let outputs = match axis {
        None => 1,
        Some(a) => layout.numel() / layout.shape().dims()[a].max(1),
    };
    let mut c = vec![T::zero(); outputs];
    let want = cpu().reduce(op, View::new(x, layout), axis, &mut c);
    let g = gpu.upload(x).unwrap();
    let mut out = gpu.alloc_zeros(outputs).unwrap();
    let got = gpu.reduce(op, View::new(&g, layout), axis, &mut out);
    assert_eq!(
        want.is_ok(),
        got.is_ok(),
        "{op:?} {layout:?} {axis:?}: {got:?}"
    );
    if want.is_ok() {
        same(
            &format!("{op:?} of {} axis {axis:?}", layout.shape()),
            &c,
            &gpu.download(&out).unwrap(),
        );
    }
}

#[test]
fn sums_deep_enough_for_three_and_four_tree_levels() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(11, "cuda-edges-deep");
    // A level reduces 128 leaves of 64 (8192 elements), then groups of 128 vectors: three
    // levels past 2^20 elements, four past 2^27.
    for n in [(3 << 20) + 12_345, (1 << 27) + 4_097] {
        let x: Vec<f32> = normal(&mut rng, n);
        let layout = Layout::contiguous(Shape::from([n]));
        for op in [ReduceOp::Sum, ReduceOp::Var { ddof: 1 }, ReduceOp::Max] {
            reduce_both(&gpu, op, &x, &layout, None);
        }
    }
    let x: Vec<f64> = normal(&mut rng, (3 << 20) + 7);
    reduce_both(
        &gpu,
        ReduceOp::Mean,
        &x,
        &Layout::contiguous(Shape::from([x.len()])),
        None,
    );
}

#[test]
fn min_and_max_order_nan_signed_zeros_and_infinities_as_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        1.0,
    ];
    let mut rng = Rng::new(12, "cuda-edges-minmax");
    for n in [1usize, 2, 31, 32, 33, 1023, 1025, 70_001] {
        for case in 0..12 {
            // Mostly specials in some cases, one special at the start, middle or end in others.
            let x: Vec<f64> = (0..n)
                .map(|i| match case % 4 {
                    0 => specials[(i + case) % specials.len()],
                    1 if i == 0 => specials[case % specials.len()],
                    2 if i == n / 2 => specials[case % specials.len()],
                    3 if i + 1 == n => specials[case % specials.len()],
                    _ => [0.0, -0.0][i % 2] * f64::from(u8::from(rng.below(2) == 0)),
                })
                .collect();
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for op in [ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum] {
                reduce_both(&gpu, op, &x, &Layout::contiguous(Shape::from([n])), None);
                reduce_both(&gpu, op, &x32, &Layout::contiguous(Shape::from([n])), None);
            }
        }
    }
}

#[test]
fn empty_inputs_give_the_cpus_results_and_errors() {
    let Some(gpu) = gpu() else { return };
    for dims in [&[0usize][..], &[0, 5], &[5, 0], &[2, 0, 3]] {
        let layout = Layout::contiguous(Shape::new(dims));
        let x: Vec<f32> = Vec::new();
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
            reduce_both(&gpu, op, &x, &layout, None);
            for axis in 0..dims.len() {
                reduce_both(&gpu, op, &x, &layout, Some(axis));
            }
        }
        let g = gpu.upload(&x).unwrap();
        let mut out = gpu.alloc_zeros::<f32>(0).unwrap();
        gpu.unary(UnaryOp::Exp, View::new(&g, &layout), &mut out)
            .unwrap();
        gpu.copy(View::new(&g, &layout), &mut out).unwrap();
    }
    let layout = TimeMajor::new(0, 3);
    let empty: Vec<f32> = Vec::new();
    let boot = vec![1.0f32; 3];
    let (ge, gb) = (gpu.upload(&empty).unwrap(), gpu.upload(&boot).unwrap());
    let mut out = gpu.alloc_zeros::<f32>(0).unwrap();
    let episodes = Episodes::Constant { gamma: 0.9 };
    let mut c: Vec<f32> = Vec::new();
    cpu()
        .gae(layout, &empty, &empty, &boot, episodes, 0.95, &mut c, None)
        .unwrap();
    gpu.gae(
        layout,
        &ge,
        &ge,
        &gb,
        Episodes::Constant { gamma: 0.9 },
        0.95,
        &mut out,
        None,
    )
    .unwrap();
    same("gae [0, 3]", &c, &gpu.download(&out).unwrap());
}

/// Elementwise, copy, reduction, recurrence, sequence and optimizer kernels at `n`.
fn every_family_at<T: Float>(gpu: &Cuda, n: usize, rng: &mut Rng) {
    let x: Vec<T> = normal(rng, n);
    let y: Vec<T> = normal(rng, n);
    let (gx, gy) = (gpu.upload(&x).unwrap(), gpu.upload(&y).unwrap());
    let line = Layout::contiguous(Shape::from([n]));
    let mut c = vec![T::zero(); n];
    let mut g = gpu.alloc_zeros::<T>(n).unwrap();
    cpu()
        .unary(UnaryOp::Tanh, View::new(&x, &line), &mut c)
        .unwrap();
    gpu.unary(UnaryOp::Tanh, View::new(&gx, &line), &mut g)
        .unwrap();
    same(&format!("tanh {n}"), &c, &gpu.download(&g).unwrap());
    cpu()
        .binary(
            BinaryOp::Div,
            View::new(&x, &line),
            View::new(&y, &line),
            &mut c,
        )
        .unwrap();
    gpu.binary(
        BinaryOp::Div,
        View::new(&gx, &line),
        View::new(&gy, &line),
        &mut g,
    )
    .unwrap();
    same(&format!("div {n}"), &c, &gpu.download(&g).unwrap());
    // Every other element of a buffer twice as long, from an offset: strided, not dense.
    let twice: Vec<T> = normal(rng, 2 * n + 1);
    let strided = Layout::from_parts(Shape::from([n]), Dims::from_slice(&[2]), 1);
    cpu().copy(View::new(&twice, &strided), &mut c).unwrap();
    gpu.copy(View::new(&gpu.upload(&twice).unwrap(), &strided), &mut g)
        .unwrap();
    same(&format!("copy {n}"), &c, &gpu.download(&g).unwrap());
    for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Var { ddof: 0 }] {
        reduce_both(gpu, op, &x, &line, None);
    }
    // n columns of 3 steps, and 3 columns of n steps.
    for (steps, columns) in [(3, n), (n, 3)] {
        let len = steps * columns;
        let r: Vec<T> = normal(rng, len);
        let v: Vec<T> = normal(rng, len);
        let boot: Vec<T> = normal(rng, columns);
        let layout = TimeMajor::new(steps, columns);
        let episodes = Episodes::Constant {
            gamma: T::from_f64(0.99),
        };
        let mut c = vec![T::zero(); len];
        cpu()
            .gae(
                layout,
                &r,
                &v,
                &boot,
                episodes,
                T::from_f64(0.95),
                &mut c,
                None,
            )
            .unwrap();
        let (gr, gv, gb) = (
            gpu.upload(&r).unwrap(),
            gpu.upload(&v).unwrap(),
            gpu.upload(&boot).unwrap(),
        );
        let mut g = gpu.alloc_zeros::<T>(len).unwrap();
        let episodes = Episodes::Constant {
            gamma: T::from_f64(0.99),
        };
        gpu.gae(
            layout,
            &gr,
            &gv,
            &gb,
            episodes,
            T::from_f64(0.95),
            &mut g,
            None,
        )
        .unwrap();
        same(
            &format!("gae [{steps}, {columns}]"),
            &c,
            &gpu.download(&g).unwrap(),
        );
    }
    let lengths: Vec<usize> = (0..n).map(|i| i % 5).collect();
    let seqs = Sequences::new(&lengths, None).unwrap();
    let flat: Vec<T> = normal(rng, seqs.total() * 2);
    let mut c = vec![T::zero(); seqs.padded_steps() * 2];
    cpu()
        .pad(&seqs, 2, PadOrder::TimeMajor, &flat, &mut c)
        .unwrap();
    let mut g = gpu.alloc_zeros::<T>(c.len()).unwrap();
    gpu.pad(
        &seqs,
        2,
        PadOrder::TimeMajor,
        &gpu.upload(&flat).unwrap(),
        &mut g,
    )
    .unwrap();
    same(
        &format!("pad {n} sequences"),
        &c,
        &gpu.download(&g).unwrap(),
    );
    let update = Update::Adam(Adam::Torch(AdamTorch {
        step_size: T::from_f64(1e-2),
        bias_correction2_sqrt: T::from_f64(0.03),
        one_minus_beta1: T::from_f64(0.1),
        beta2: T::from_f64(0.999),
        one_minus_beta2: T::from_f64(0.001),
        eps: T::from_f64(1e-8),
        weight_decay: T::from_f64(0.01),
        decoupled_keep: T::one(),
        amsgrad: false,
    }));
    let (mut cp, mut cm, mut cv) = (x.clone(), y.clone(), vec![T::one(); n]);
    cpu()
        .update(&update, &mut cp, &y, &mut [&mut cm, &mut cv])
        .unwrap();
    let (mut gp, mut gm, mut gv) = (
        gpu.upload(&x).unwrap(),
        gpu.upload(&y).unwrap(),
        gpu.upload(&vec![T::one(); n]).unwrap(),
    );
    gpu.update(&update, &mut gp, &gy, &mut [&mut gm, &mut gv])
        .unwrap();
    same(&format!("adam {n}"), &cp, &gpu.download(&gp).unwrap());
    same(&format!("adam m {n}"), &cm, &gpu.download(&gm).unwrap());
}

#[test]
fn every_family_at_the_sizes_around_a_warp_and_a_block() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(13, "cuda-edges-sizes");
    for n in SIZES {
        every_family_at::<f32>(&gpu, n, &mut rng);
        every_family_at::<f64>(&gpu, n, &mut rng);
    }
}

#[test]
fn more_than_65535_rows_columns_batches_and_sequences() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(14, "cuda-edges-grid");
    let many = 70_001;
    every_family_at::<f32>(&gpu, many, &mut rng);
    // Reductions with more than 65,535 outputs, along either axis.
    let x: Vec<f32> = normal(&mut rng, many * 3);
    let layout = Layout::contiguous(Shape::from([many, 3]));
    reduce_both(&gpu, ReduceOp::Sum, &x, &layout, Some(1));
    reduce_both(&gpu, ReduceOp::Max, &x, &layout, Some(1));
    let wide = Layout::contiguous(Shape::from([3, many]));
    reduce_both(&gpu, ReduceOp::Mean, &x, &wide, Some(0));
    // A batched matmul of more than 65,535 small products (the grid's z limit), one of
    // more than 65,535 rows, and one of more than 65,535 row tiles of 32 (the tiled
    // kernels' one-dimensional grid; the strided kernel refuses it).
    for (batch, m, k, n) in [(many, 2, 3, 2), (1, many, 5, 3), (1, 2_100_000, 4, 4)] {
        let a: Vec<f32> = normal(&mut rng, batch * m * k);
        let b: Vec<f32> = normal(&mut rng, batch * k * n);
        let (la, lb) = (
            Layout::contiguous(Shape::from([batch, m, k])),
            Layout::contiguous(Shape::from([batch, k, n])),
        );
        let mut c = vec![0.0f32; batch * m * n];
        cpu()
            .matmul(View::new(&a, &la), View::new(&b, &lb), &mut c)
            .unwrap();
        let (ga, gb) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        let mut g = gpu.alloc_zeros::<f32>(c.len()).unwrap();
        gpu.matmul(View::new(&ga, &la), View::new(&gb, &lb), &mut g)
            .unwrap();
        same(
            &format!("matmul {batch}x{m}x{k}x{n}"),
            &c,
            &gpu.download(&g).unwrap(),
        );
    }
}

#[test]
fn three_dimensional_views_strided_in_every_axis() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(15, "cuda-edges-3d");
    let base: Vec<f64> = normal(&mut rng, 6 * 7 * 8);
    let g = gpu.upload(&base).unwrap();
    // Permuted axes, a narrowed middle axis with an offset, and a broadcast axis.
    let views = [
        Layout::from_parts(Shape::from([8, 6, 7]), Dims::from_slice(&[1, 56, 8]), 0),
        Layout::from_parts(Shape::from([6, 3, 8]), Dims::from_slice(&[56, 16, 1]), 8),
        Layout::from_parts(Shape::from([6, 4, 8]), Dims::from_slice(&[56, 0, 1]), 0),
    ];
    for layout in &views {
        let n = layout.numel();
        let mut c = vec![0.0; n];
        cpu()
            .unary(UnaryOp::Exp, View::new(&base, layout), &mut c)
            .unwrap();
        let mut out = gpu.alloc_zeros::<f64>(n).unwrap();
        gpu.unary(UnaryOp::Exp, View::new(&g, layout), &mut out)
            .unwrap();
        same(&format!("exp {layout:?}"), &c, &gpu.download(&out).unwrap());
        for axis in 0..3 {
            reduce_both(&gpu, ReduceOp::Sum, &base, layout, Some(axis));
        }
    }
}

/// Reads `MemAvailable` of /proc/meminfo, in bytes.
fn host_memory_available() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

#[test]
fn more_than_2_pow_32_elements_index_in_64_bits() {
    let Some(gpu) = gpu() else { return };
    let n = (1usize << 32) + 1_000;
    let bytes = n * 4;
    // Input and output on the GPU; the host holds one of them at a time.
    if gpu.total_memory() < 2 * bytes + (4 << 30) || host_memory_available() < bytes + (4 << 30) {
        println!(
            "not applicable here: 2^32 + 1000 f32 need {} GiB on the GPU ({} GiB there) \
             and {} GiB on the host",
            (2 * bytes) >> 30,
            gpu.total_memory() >> 30,
            bytes >> 30
        );
        return;
    }
    let value = |i: usize| (i % 1_000) as f32;
    let host: Vec<f32> = (0..n).map(value).collect();
    let layout = Layout::contiguous(Shape::from([n]));
    let mut c_sum = vec![0.0f32];
    cpu()
        .reduce(ReduceOp::Sum, View::new(&host, &layout), None, &mut c_sum)
        .unwrap();
    let g = gpu.upload(&host).unwrap();
    drop(host);
    let mut g_sum = gpu.alloc_zeros::<f32>(1).unwrap();
    gpu.reduce(ReduceOp::Sum, View::new(&g, &layout), None, &mut g_sum)
        .unwrap();
    same("sum of 2^32 + 1000", &c_sum, &gpu.download(&g_sum).unwrap());
    let mut out = gpu.alloc_zeros::<f32>(n).unwrap();
    gpu.unary(UnaryOp::Neg, View::new(&g, &layout), &mut out)
        .unwrap();
    drop(g);
    let back = gpu.download(&out).unwrap();
    let expected: Vec<f32> = (0..n).map(|i| -value(i)).collect();
    same("neg of 2^32 + 1000", &expected, &back);
}
