//! [`RandomKernel`] on the GPU (`random.cu`): each sample computed from its own position in
//! the stream (the host's [`PcgPosition`] jumped ahead), then the host's [`Rng`] moved past
//! the batch as drawing it would have moved it ([`Rng::skip`], [`Rng::skip_normals`]).
//! Nothing is read back: the samples never cross the bus.

use rlgrad_core::kernels::RandomKernel;
use rlgrad_core::{Float, PcgPosition, Result, Rng};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, KernelArg, Scalar, grid};

/// Samples (or normal pairs) per thread (`RANDOM_CHUNK`).
const CHUNK: usize = 16;

/// The four words a kernel takes for a stream position.
fn words(position: PcgPosition) -> [u64; 4] {
    [
        position.state as u64,
        (position.state >> 64) as u64,
        position.increment as u64,
        (position.increment >> 64) as u64,
    ]
}

impl<T: Float> RandomKernel<T> for Cuda {
    fn fill_uniform(&self, rng: &mut Rng, low: T, high: T, out: &mut CudaBuffer<T>) -> Result<()> {
        const F: &str = "Cuda::fill_uniform";
        let n = out.len();
        if n == 0 {
            return Ok(());
        }
        let [s_lo, s_hi, i_lo, i_hi] = words(rng.pcg_position());
        let kernel = self.function::<T>(Family::Random, "rng_uniform")?;
        let (low, high, count) = (Scalar::of(low), Scalar::of(high), n as u64);
        let args: [&dyn KernelArg; 8] = [
            &s_lo,
            &s_hi,
            &i_lo,
            &i_hi,
            &count,
            &low,
            &high,
            &self.ptr(out),
        ];
        self.launch(F, &kernel, grid(n.div_ceil(CHUNK)), &args)?;
        rng.skip(count);
        Ok(())
    }

    fn fill_normal(
        &self,
        rng: &mut Rng,
        mean: f64,
        std: f64,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::fill_normal";
        let n = out.len();
        if n == 0 {
            return Ok(());
        }
        let spare = rng.state().spare_normal;
        let [s_lo, s_hi, i_lo, i_hi] = words(rng.pcg_position());
        let kernel = self.function::<T>(Family::Random, "rng_normal")?;
        let count = n as u64;
        let has_spare = i32::from(spare.is_some());
        let spare = Scalar::F64(spare.map_or(0.0, f64::from_bits));
        let (mean, std) = (Scalar::F64(mean), Scalar::F64(std));
        let args: [&dyn KernelArg; 10] = [
            &s_lo,
            &s_hi,
            &i_lo,
            &i_hi,
            &count,
            &has_spare,
            &spare,
            &mean,
            &std,
            &self.ptr(out),
        ];
        let pairs = n.div_ceil(2);
        self.launch(F, &kernel, grid(pairs.div_ceil(CHUNK)), &args)?;
        rng.skip_normals(count);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rlgrad_core::kernels::RandomKernel;
    use rlgrad_core::{Cpu, Float, Rng};

    use super::words;
    use crate::host::Emulator;

    /// One batch: `normal` or `uniform`, its length, the grid it runs on, and the stream
    /// before it (with a pending normal sample or not).
    struct Case {
        normal: bool,
        n: usize,
        grid: u32,
        rng: Rng,
    }

    fn hex<T: Float>(x: T) -> String {
        format!("{:x}", x.to_bits_u64())
    }

    /// The kernels' source on the host against the Cpu's draws, bit for bit: lengths
    /// around the chunks and the grid's stride (so that threads take several chunks),
    /// streams far along, odd lengths (a pair's second sample dropped), a pending sample
    /// first, one sample that is only the pending one.
    fn emulated_draws_are_the_cpus<T: Float>() {
        let Some(emulator) = Emulator::build(
            ("host_random.cpp", include_str!("../tests/host_random.cpp")),
            ("random.cu", include_str!("cuda/random.cu")),
        ) else {
            return;
        };
        let (low, high) = (T::from_f64(-0.25), T::from_f64(0.5));
        let (mean, std) = (0.5, 2.0);
        let mut cases = Vec::new();
        for (n, grid) in [
            (1, 1),
            (15, 1),
            (16, 1),
            (17, 1),
            (5000, 1),
            (9000, 2),
            (20_001, 1),
        ] {
            for normal in [false, true] {
                for (skipped, spare) in [(0, false), (3, false), (1 << 40, false), (7, true)] {
                    let mut rng = Rng::new(n as u64, "emulated");
                    rng.skip(skipped);
                    if spare {
                        rng.normal_f64();
                    }
                    cases.push(Case {
                        normal,
                        n,
                        grid,
                        rng,
                    });
                }
            }
        }
        let mut input = String::new();
        let mut want = Vec::new();
        for case in &mut cases {
            let [s_lo, s_hi, i_lo, i_hi] = words(case.rng.pcg_position());
            let head = format!(
                "{} {} {} {s_lo:x} {s_hi:x} {i_lo:x} {i_hi:x} {}",
                T::DTYPE.name(),
                if case.normal { "normal" } else { "uniform" },
                case.grid,
                case.n
            );
            let mut expected = vec![T::zero(); case.n];
            if case.normal {
                let spare = case.rng.state().spare_normal;
                input.push_str(&format!(
                    "{head} {} {:x} {} {}\n",
                    i32::from(spare.is_some()),
                    spare.unwrap_or(0),
                    hex(mean),
                    hex(std)
                ));
                Cpu::seq()
                    .fill_normal(&mut case.rng, mean, std, &mut expected)
                    .unwrap();
            } else {
                input.push_str(&format!("{head} {} {}\n", hex(low), hex(high)));
                Cpu::seq()
                    .fill_uniform(&mut case.rng, low, high, &mut expected)
                    .unwrap();
            }
            want.push(expected);
        }
        let stdout = emulator.run(input);
        let mut lines = stdout.lines();
        for (case, want) in cases.iter().zip(&want) {
            let got: Vec<u64> = lines
                .by_ref()
                .take(case.n)
                .map(|l| u64::from_str_radix(l, 16).unwrap())
                .collect();
            let differing = want
                .iter()
                .zip(&got)
                .filter(|(w, g)| w.to_bits_u64() != **g)
                .count();
            assert_eq!(got.len(), case.n, "output length");
            assert_eq!(
                differing,
                0,
                "{} x {} (normal: {}): samples differing from the Cpu's",
                T::DTYPE.name(),
                case.n,
                case.normal
            );
        }
    }

    #[test]
    fn emulated_draws_are_the_cpus_in_f32() {
        emulated_draws_are_the_cpus::<f32>();
    }

    #[test]
    fn emulated_draws_are_the_cpus_in_f64() {
        emulated_draws_are_the_cpus::<f64>();
    }
}
