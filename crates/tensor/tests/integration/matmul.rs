//! Matmul against a naive triple loop, the canonical order bit for bit (the fused
//! multiply-add chain over `k`, written plainly), and bitwise equality across thread
//! counts.

use proptest::prelude::*;
use rlgrad_core::{Cpu, Par, Rng};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::config;

fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    out
}

fn on(par: Par, data: Vec<f32>, shape: [usize; 2]) -> Tensor<f32> {
    Tensor::from_vec_on(&Cpu::new(par), data, shape).unwrap()
}

/// The canonical order of `MatmulKernel`, written plainly.
fn canonical(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = -0.0f32;
            for p in 0..k {
                acc = a[i * k + p].mul_add(b[p * n + j], acc);
            }
            out[i * n + j] = if k == 0 { 0.0 } else { acc };
        }
    }
    out
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn prop_matmul_is_the_canonical_fma_chain(
        m in 1usize..70, k in 0usize..300, n in 1usize..70, batch in 1usize..3,
        seed in any::<u64>(), lhs_transposed in any::<bool>(), rhs_transposed in any::<bool>(),
    ) {
        let mut rng = Rng::new(seed, "canonical");
        let operand = |rows: usize, cols: usize, transposed: bool, rng: &mut Rng| {
            if transposed {
                Tensor::<f32>::rand_normal([batch, cols, rows], 0.0, 1.0, rng).unwrap().transpose(1, 2).unwrap()
            } else {
                Tensor::<f32>::rand_normal([batch, rows, cols], 0.0, 1.0, rng).unwrap()
            }
        };
        let a = operand(m, k, lhs_transposed, &mut rng);
        let b = operand(k, n, rhs_transposed, &mut rng);
        let got = a.matmul(&b).unwrap().to_vec().unwrap();
        let (av, bv) = (a.to_vec().unwrap(), b.to_vec().unwrap());
        for e in 0..batch {
            let want = canonical(&av[e * m * k..(e + 1) * m * k], &bv[e * k * n..(e + 1) * k * n], m, k, n);
            let got = &got[e * m * n..(e + 1) * m * n];
            prop_assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn prop_matmul_equals_the_triple_loop(m in 1usize..40, k in 0usize..40, n in 1usize..40, seed in any::<u64>(), transposed in any::<bool>()) {
        let mut rng = Rng::new(seed, "matmul");
        let a = Tensor::<f64>::rand_normal([m, k], 0.0, 1.0, &mut rng).unwrap();
        // The right operand as a dense tensor or as the transposed view of one.
        let b = if transposed {
            Tensor::<f64>::rand_normal([n, k], 0.0, 1.0, &mut rng).unwrap().t().unwrap()
        } else {
            Tensor::<f64>::rand_normal([k, n], 0.0, 1.0, &mut rng).unwrap()
        };
        let got = a.matmul(&b).unwrap();
        prop_assert_eq!(got.dims(), &[m, n]);
        let want = naive(&a.to_vec().unwrap(), &b.to_vec().unwrap(), m, k, n);
        for (g, w) in got.to_vec().unwrap().iter().zip(&want) {
            prop_assert!((g - w).abs() <= 1e-12 * (k as f64 + 1.0) * (1.0 + w.abs()), "{} vs {}", g, w);
        }
    }

    #[test]
    fn prop_matmul_is_bitwise_equal_for_1_2_and_4_threads(m in 1usize..300, k in 1usize..300, n in 1usize..300, seed in any::<u64>()) {
        let mut rng = Rng::new(seed, "matmul-threads");
        let a: Vec<f32> = (0..m * k).map(|_| rng.normal(0.0, 1.0)).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.normal(0.0, 1.0)).collect();
        let product = |par| on(par, a.clone(), [m, k]).matmul(&on(par, b.clone(), [k, n])).unwrap().to_vec().unwrap();
        let reference: Vec<u32> = product(Par::Seq).iter().map(|v| v.to_bits()).collect();
        for par in [Par::rayon(2), Par::rayon(4)] {
            let got: Vec<u32> = product(par).iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(&got, &reference);
        }
    }
}

#[test]
fn large_products_are_bitwise_equal_across_threads() {
    // Big enough that the GEMM splits the work between threads.
    let (m, k, n) = (512, 384, 448);
    let mut rng = Rng::new(3, "large");
    let a: Vec<f32> = (0..m * k).map(|_| rng.normal(0.0, 1.0)).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.normal(0.0, 1.0)).collect();
    let product = |par| {
        on(par, a.clone(), [m, k])
            .matmul(&on(par, b.clone(), [k, n]))
            .unwrap()
            .to_vec()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    let reference = product(Par::Seq);
    assert_eq!(product(Par::rayon(2)), reference);
    assert_eq!(product(Par::rayon(4)), reference);
}

#[test]
fn batched_matmul_broadcasts_batch_dimensions() {
    let mut rng = Rng::new(9, "batched");
    let a = Tensor::<f64>::rand_normal([3, 2, 4, 5], 0.0, 1.0, &mut rng).unwrap();
    let b = Tensor::<f64>::rand_normal([2, 5, 6], 0.0, 1.0, &mut rng).unwrap();
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.dims(), &[3, 2, 4, 6]);
    for i in 0..3 {
        for j in 0..2 {
            let ai = a
                .narrow(0, i, 1)
                .unwrap()
                .narrow(1, j, 1)
                .unwrap()
                .reshape([4, 5])
                .unwrap();
            let bj = b.narrow(0, j, 1).unwrap().reshape([5, 6]).unwrap();
            let want = naive(&ai.to_vec().unwrap(), &bj.to_vec().unwrap(), 4, 5, 6);
            let got = c
                .narrow(0, i, 1)
                .unwrap()
                .narrow(1, j, 1)
                .unwrap()
                .to_vec()
                .unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn mismatched_operands_are_errors() {
    let a = Tensor::<f32>::zeros([2, 3]).unwrap();
    let err = a.matmul(&a).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Tensor::matmul: argument `rhs`"),
        "{err}"
    );
    assert!(a.matmul(&Tensor::zeros([3]).unwrap()).is_err());
    assert!(
        Tensor::<f32>::zeros([2, 2, 3])
            .unwrap()
            .matmul(&Tensor::zeros([3, 3, 1]).unwrap())
            .is_err()
    );
    let empty = Tensor::<f32>::zeros([2, 0])
        .unwrap()
        .matmul(&Tensor::zeros([0, 4]).unwrap())
        .unwrap();
    assert_eq!(empty.to_vec().unwrap(), [0.0; 8]);
}

/// `x.matmul_bias(w, b, act)` against the three ops run one after the other, bit for bit,
/// over the GEMM's paths: tiles with edges, several blocks of `k` and `n` split over
/// threads, a narrow output computed transposed, a matrix-vector and an outer product, a
/// transposed weight; every activation the agents use, and none.
#[test]
fn matmul_bias_is_the_three_ops_bit_for_bit() {
    use rlgrad_core::kernels::UnaryOp;
    let mut rng = Rng::new(11, "matmul_bias");
    let activations = [
        None,
        Some(UnaryOp::Relu),
        Some(UnaryOp::Tanh),
        Some(UnaryOp::Sigmoid),
    ];
    for (m, k, n) in [
        (100, 8, 64),
        (13, 300, 70),
        (60, 1100, 300),
        (300, 40, 7),
        (256, 300, 1),
        (7, 1, 33),
        (1, 5, 1),
    ] {
        for threads in [1, 3] {
            let cpu = Cpu::new(Par::rayon(threads));
            let mut normal = |shape: &[usize]| {
                Tensor::<f32>::rand_normal_on(&cpu, shape, 0.0, 1.0, &mut rng).unwrap()
            };
            let (x, w, wt, b) = (
                normal(&[m, k]),
                normal(&[k, n]),
                normal(&[n, k]),
                normal(&[n]),
            );
            // A strided bias (one column of an [n, 2] matrix) takes the unfused path.
            let strided_bias = normal(&[n, 2]).narrow(1, 0, 1).unwrap().squeeze(1).unwrap();
            assert!(n == 1 || !strided_bias.is_contiguous());
            let operands = [
                (w, b.clone()),
                (wt.t().unwrap(), b),
                (normal(&[k, n]), strided_bias),
            ];
            for (weight, b) in operands {
                for activation in activations {
                    let fused = x.matmul_bias(&weight, &b, activation).unwrap();
                    let sum = x.matmul(&weight).unwrap().add(&b).unwrap();
                    let unfused = match activation {
                        Some(op) => sum.unary(op).unwrap(),
                        None => sum,
                    };
                    let bits = |t: &Tensor<f32>| {
                        t.to_vec()
                            .unwrap()
                            .iter()
                            .map(|v| v.to_bits())
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(
                        bits(&fused),
                        bits(&unfused),
                        "{m}x{k}x{n}, {threads} threads, {activation:?}, weight strides {:?}",
                        weight.layout().strides()
                    );
                }
            }
        }
    }
}

#[test]
fn matmul_bias_names_mismatched_shapes() {
    let t = |shape: &[usize]| Tensor::<f32>::zeros(shape).unwrap();
    let message = |r: rlgrad_core::Result<Tensor<f32>>| r.unwrap_err().to_string();
    let wrong_bias = message(t(&[4, 3]).matmul_bias(&t(&[3, 5]), &t(&[4]), None));
    assert!(
        wrong_bias.contains("Tensor::matmul_bias") && wrong_bias.contains("[5]"),
        "{wrong_bias}"
    );
    let wrong_k = message(t(&[4, 3]).matmul_bias(&t(&[2, 5]), &t(&[5]), None));
    assert!(
        wrong_k.contains("weight") && wrong_k.contains("[2, 5]"),
        "{wrong_k}"
    );
    let batched = message(t(&[2, 4, 3]).matmul_bias(&t(&[3, 5]), &t(&[5]), None));
    assert!(batched.contains("2 dimensions"), "{batched}");
}
