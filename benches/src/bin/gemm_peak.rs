//! `cargo xtask gemm-peak`: rlgrad's GEMM on the shapes of RL agents, in GFLOP/s and as a
//! share of this core's fused multiply-add peak, at the instruction set in use
//! (`RLGRAD_MAX_ISA` caps it; `--isa` of the xtask verb sets it).
//!
//! The peak is measured, not taken from a data sheet: a loop of independent FMAs on
//! registers (12 chains, more than the FMA latency times the units) at the same vector
//! width, so the share is against what this core reaches at its clock now (turbo and
//! AVX-512 frequency licences included). The shapes are every product of a TD3 update at
//! batch 100 and 256 (Pendulum: 3 observations, 1 action, 400-300 nets; forward `x @ w`,
//! and backward `dy @ w^T` and `x^T @ dy`) and the 64-wide seed MLP of W6. One thread.

use std::hint::black_box;

use rlgrad_core::cpu::simd::{self, Isa};
use rlgrad_core::kernels::MatmulKernel;
use rlgrad_core::{Cpu, Dims, Layout, Rng, Shape, View};

/// One product `[m, k] @ [k, n]`, with `a` and `b` possibly transposed views.
struct Product {
    name: String,
    m: usize,
    k: usize,
    n: usize,
    a_transposed: bool,
    b_transposed: bool,
}

fn products() -> Vec<Product> {
    let mut products = Vec::new();
    let mut layer =
        |tag: &str, batch: usize, fan_in: usize, fan_out: usize| {
            // (name, [m, k, n], a transposed, b transposed)
            let shapes = [
                (
                    format!("{tag} B={batch} x[{batch},{fan_in}] @ w[{fan_in},{fan_out}]"),
                    [batch, fan_in, fan_out],
                    false,
                    false,
                ),
                (
                    format!("{tag} B={batch} dy[{batch},{fan_out}] @ w^T"),
                    [batch, fan_out, fan_in],
                    false,
                    true,
                ),
                (
                    format!("{tag} B={batch} x^T @ dy[{batch},{fan_out}]"),
                    [fan_in, batch, fan_out],
                    true,
                    false,
                ),
            ];
            products.extend(shapes.into_iter().map(
                |(name, [m, k, n], a_transposed, b_transposed)| Product {
                    name,
                    m,
                    k,
                    n,
                    a_transposed,
                    b_transposed,
                },
            ));
        };
    for batch in [256, 100] {
        layer("actor l1", batch, 3, 400);
        layer("critic l1", batch, 4, 400);
        layer("l2", batch, 400, 300);
        layer("l3", batch, 300, 1);
    }
    layer("mlp", 64, 64, 64);
    products
}

/// The measured f32 FMA peak of one core at `isa`, in GFLOP/s (`None` without FMA).
fn fma_peak(isa: Isa) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        const ITERATIONS: usize = 1 << 20;
        let (lanes, run): (usize, fn(usize) -> f32) = match isa {
            // SAFETY: `isa` is at most the CPU's level (`simd::isa`), so it has AVX-512F.
            Isa::Avx512 => (16, |n| unsafe { x86::chains_avx512(n) }),
            // SAFETY: as above, AVX2 and FMA.
            Isa::Avx2 => (8, |n| unsafe { x86::chains_avx2(n) }),
            // The baseline, or a level this report does not know yet: no FMA peak to measure.
            _ => return None,
        };
        let seconds = rlgrad_benches::seconds_per_call(|| {
            black_box(run(black_box(ITERATIONS)));
        });
        let flops = (ITERATIONS * x86::CHAINS * lanes * 2) as f64;
        Some(flops / seconds / 1e9)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Independent chains: at least latency (4) times units (2) of the cores measured.
    pub const CHAINS: usize = 12;

    #[target_feature(enable = "avx2,fma")]
    pub fn chains_avx2(iterations: usize) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_9), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..iterations {
            for x in &mut acc {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut out = [0.0f32; 8];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x));
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sum) };
        out[0]
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub fn chains_avx512(iterations: usize) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_9), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iterations {
            for x in &mut acc {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, &x| _mm512_add_ps(s, x));
        _mm512_reduce_add_ps(sum)
    }
}

fn main() {
    let isa = simd::isa();
    let peak = fma_peak(isa);
    let cpu = Cpu::seq();
    let mut rng = Rng::new(3, "gemm-peak");
    println!(
        "gemm-peak: one thread, ISA {isa}; f32 FMA peak {}",
        peak.map_or_else(
            || "n/a (no FMA at this ISA)".to_owned(),
            |p| format!("{p:.1} GFLOP/s")
        )
    );
    println!(
        "{:<48} {:>9} {:>9} {:>7}",
        "product", "us", "GFLOP/s", "of peak"
    );
    let mut total = (0.0, 0.0);
    for p in products() {
        let a: Vec<f32> = (0..p.m * p.k).map(|_| rng.normal(0.0, 1.0)).collect();
        let b: Vec<f32> = (0..p.k * p.n).map(|_| rng.normal(0.0, 1.0)).collect();
        let layout = |rows: usize, cols: usize, transposed: bool| {
            if transposed {
                // The transpose of a row-major [cols, rows] matrix.
                Layout::from_parts(Shape::from([rows, cols]), Dims::from_slice(&[1, rows]), 0)
            } else {
                Layout::contiguous(Shape::from([rows, cols]))
            }
        };
        let (la, lb) = (
            layout(p.m, p.k, p.a_transposed),
            layout(p.k, p.n, p.b_transposed),
        );
        let mut out = vec![0.0f32; p.m * p.n];
        let seconds = rlgrad_benches::seconds_per_call(|| {
            cpu.matmul(View::new(&a, &la), View::new(&b, &lb), &mut out)
                .expect("valid views");
            black_box(&out);
        });
        let flops = 2.0 * (p.m * p.k * p.n) as f64;
        let gflops = flops / seconds / 1e9;
        total = (total.0 + flops, total.1 + seconds);
        let share = peak.map_or_else(String::new, |peak| format!("{:.0}%", 100.0 * gflops / peak));
        println!(
            "{:<48} {:>9.2} {:>9.1} {:>7}",
            p.name,
            seconds * 1e6,
            gflops,
            share
        );
    }
    let gflops = total.0 / total.1 / 1e9;
    let share = peak.map_or_else(String::new, |peak| format!("{:.0}%", 100.0 * gflops / peak));
    println!(
        "{:<48} {:>9.2} {:>9.1} {:>7}",
        "all of the above",
        total.1 * 1e6,
        gflops,
        share
    );
}
