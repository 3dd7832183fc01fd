//! [`RecurrenceKernel`] on the GPU (`recurrence.cu`). Returns (and the primitive), GAE and
//! TD(lambda) run staged: per 32 columns, one warp runs the chains while fifteen load and
//! prepare the steps far ahead of it through shared memory. V-trace and n-step run one
//! thread per column, sequential in time, chunks of steps loaded into registers ahead of
//! the chain. Every kernel exists per episode mode (`<name>_<mode>`).

use cudarc::driver::LaunchConfig;
use rlgrad_core::cpu::recurrence::check_lengths;
use rlgrad_core::kernels::RecurrenceKernel;
use rlgrad_core::kernels::recurrence::{Episodes, TimeMajor, VtraceParams};
use rlgrad_core::{Error, Float, Result};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, KernelArg, Scalar};

/// Columns per block of every recurrence kernel: one warp's lanes, so that a step's
/// columns are one coalesced line and a few thousand columns spread over every
/// multiprocessor.
const COLUMNS: u32 = 32;

/// Threads per block of the staged kernels (`STAGED_THREADS` in recurrence.cu): the
/// chain warp and 15 producer warps.
const STAGED_THREADS: u32 = 512;

/// How a recurrence kernel spreads over the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Threads {
    /// `staged_scan`: a block of [`STAGED_THREADS`] per 32 columns.
    Staged,
    /// One thread per column, 32 a block.
    PerColumn,
}

/// The launch configuration of a kernel of kind `threads` over `b` columns.
fn launch_config(function: &'static str, threads: Threads, b: usize) -> Result<LaunchConfig> {
    let blocks = u32::try_from(b.div_ceil(COLUMNS as usize))
        .map_err(|_| Error::shape(function, "layout", "fewer than 2^37 columns", b))?;
    let block = match threads {
        Threads::Staged => STAGED_THREADS,
        Threads::PerColumn => COLUMNS,
    };
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// The episode mode's kernel suffix and the six `EPISODE_PARAMS` of recurrence.cu for an
/// [`Episodes`] description.
struct StepArgs {
    mode: &'static str,
    rewards: u64,
    discounts: u64,
    terminated: u64,
    truncated: u64,
    final_values: u64,
    gamma: Scalar,
}

impl Cuda {
    fn step_args<T: Float>(
        &self,
        rewards: &CudaBuffer<T>,
        episodes: &Episodes<'_, CudaBuffer<T>, T>,
    ) -> StepArgs {
        let mut args = StepArgs {
            mode: "constant",
            rewards: self.ptr(rewards),
            discounts: 0,
            terminated: 0,
            truncated: 0,
            final_values: 0,
            gamma: Scalar::of(T::zero()),
        };
        match *episodes {
            Episodes::Constant { gamma } => args.gamma = Scalar::of(gamma),
            Episodes::Discounts(d) => {
                args.mode = "discounts";
                args.discounts = self.ptr(d);
            }
            Episodes::Flags {
                gamma,
                terminated,
                truncation,
            } => {
                args.gamma = Scalar::of(gamma);
                args.mode = "terminations";
                args.terminated = self.ptr(terminated);
                if let Some(tr) = truncation {
                    args.mode = "truncations";
                    args.truncated = self.ptr(tr.truncated);
                    args.final_values = self.ptr(tr.final_values);
                }
            }
        }
        args
    }

    /// Launches recurrence kernel `<name>_<mode>` over the columns of `layout` with
    /// `(steps, b, <episode params>, rest...)`.
    fn scan<T: Float>(
        &self,
        function: &'static str,
        (name, threads): (&str, Threads),
        layout: TimeMajor,
        steps: &StepArgs,
        rest: &[&dyn KernelArg],
    ) -> Result<()> {
        if layout.is_empty() {
            return Ok(());
        }
        let config = launch_config(function, threads, layout.b)?;
        let kernel = self.function::<T>(Family::Recurrence, &format!("{name}_{}", steps.mode))?;
        let (t, b) = (layout.t as u64, layout.b as u64);
        let mut args: Vec<&dyn KernelArg> = vec![
            &t,
            &b,
            &steps.rewards,
            &steps.discounts,
            &steps.terminated,
            &steps.truncated,
            &steps.final_values,
            &steps.gamma,
        ];
        args.extend_from_slice(rest);
        self.launch(function, &kernel, config, &args)
    }
}

fn episode_lengths<T>(episodes: &Episodes<'_, CudaBuffer<T>, T>) -> Vec<(&'static str, usize)>
where
    T: Copy,
{
    episodes.lengths(CudaBuffer::len, |flags| flags.len())
}

impl<T: Float> RecurrenceKernel<T> for Cuda {
    fn linear_recurrence(
        &self,
        layout: TimeMajor,
        x: &CudaBuffer<T>,
        c: &CudaBuffer<T>,
        init: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::linear_recurrence";
        check_lengths(
            F,
            layout,
            &[("x", x.len()), ("c", c.len()), ("out", out.len())],
            &[("init", init.len())],
        )?;
        // `x + c * y` is the returns step with r' = x and d = c.
        let steps = self.step_args(x, &Episodes::Discounts(c));
        self.scan::<T>(
            F,
            ("returns", Threads::Staged),
            layout,
            &steps,
            &[&self.ptr(init), &self.ptr(out)],
        )
    }

    fn discounted_returns(
        &self,
        layout: TimeMajor,
        rewards: &CudaBuffer<T>,
        episodes: Episodes<'_, CudaBuffer<T>, T>,
        bootstrap: &CudaBuffer<T>,
        returns: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::discounted_returns";
        let mut lengths = vec![("rewards", rewards.len()), ("returns", returns.len())];
        lengths.extend(episode_lengths(&episodes));
        check_lengths(F, layout, &lengths, &[("bootstrap", bootstrap.len())])?;
        let steps = self.step_args(rewards, &episodes);
        self.scan::<T>(
            F,
            ("returns", Threads::Staged),
            layout,
            &steps,
            &[&self.ptr(bootstrap), &self.ptr(returns)],
        )
    }

    fn gae(
        &self,
        layout: TimeMajor,
        rewards: &CudaBuffer<T>,
        values: &CudaBuffer<T>,
        bootstrap: &CudaBuffer<T>,
        episodes: Episodes<'_, CudaBuffer<T>, T>,
        lambda: T,
        advantages: &mut CudaBuffer<T>,
        returns: Option<&mut CudaBuffer<T>>,
    ) -> Result<()> {
        const F: &str = "Cuda::gae";
        let mut lengths = vec![
            ("rewards", rewards.len()),
            ("values", values.len()),
            ("advantages", advantages.len()),
        ];
        if let Some(returns) = &returns {
            lengths.push(("returns", returns.len()));
        }
        lengths.extend(episode_lengths(&episodes));
        check_lengths(F, layout, &lengths, &[("bootstrap", bootstrap.len())])?;
        let steps = self.step_args(rewards, &episodes);
        let (values, bootstrap, lambda) =
            (self.ptr(values), self.ptr(bootstrap), Scalar::of(lambda));
        let advantages = self.ptr(advantages);
        let mut args: Vec<&dyn KernelArg> = vec![&values, &bootstrap, &lambda, &advantages];
        let returns = returns.map(|r| self.ptr(r));
        let name = match &returns {
            Some(returns) => {
                args.push(returns);
                "gae_returns"
            }
            None => "gae",
        };
        self.scan::<T>(F, (name, Threads::Staged), layout, &steps, &args)
    }

    fn lambda_returns(
        &self,
        layout: TimeMajor,
        rewards: &CudaBuffer<T>,
        next_values: &CudaBuffer<T>,
        episodes: Episodes<'_, CudaBuffer<T>, T>,
        lambda: T,
        returns: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::lambda_returns";
        let mut lengths = vec![
            ("rewards", rewards.len()),
            ("next_values", next_values.len()),
            ("returns", returns.len()),
        ];
        lengths.extend(episode_lengths(&episodes));
        check_lengths(F, layout, &lengths, &[])?;
        let steps = self.step_args(rewards, &episodes);
        self.scan::<T>(
            F,
            ("lambda_returns", Threads::Staged),
            layout,
            &steps,
            &[
                &self.ptr(next_values),
                &Scalar::of(lambda),
                &Scalar::of(T::one() - lambda),
                &self.ptr(returns),
            ],
        )
    }

    fn n_step_returns(
        &self,
        layout: TimeMajor,
        rewards: &CudaBuffer<T>,
        next_values: &CudaBuffer<T>,
        episodes: Episodes<'_, CudaBuffer<T>, T>,
        n: usize,
        returns: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::n_step_returns";
        if n == 0 {
            return Err(Error::value(F, "n", "n >= 1", n));
        }
        let mut lengths = vec![
            ("rewards", rewards.len()),
            ("next_values", next_values.len()),
            ("returns", returns.len()),
        ];
        lengths.extend(episode_lengths(&episodes));
        check_lengths(F, layout, &lengths, &[])?;
        let steps = self.step_args(rewards, &episodes);
        self.scan::<T>(
            F,
            ("n_step", Threads::PerColumn),
            layout,
            &steps,
            &[&self.ptr(next_values), &(n as u64), &self.ptr(returns)],
        )
    }

    fn vtrace(
        &self,
        layout: TimeMajor,
        rewards: &CudaBuffer<T>,
        values: &CudaBuffer<T>,
        bootstrap: &CudaBuffer<T>,
        rhos: &CudaBuffer<T>,
        episodes: Episodes<'_, CudaBuffer<T>, T>,
        params: VtraceParams<T>,
        vs: &mut CudaBuffer<T>,
        pg_advantages: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::vtrace";
        let mut lengths = vec![
            ("rewards", rewards.len()),
            ("values", values.len()),
            ("rhos", rhos.len()),
            ("vs", vs.len()),
            ("pg_advantages", pg_advantages.len()),
        ];
        lengths.extend(episode_lengths(&episodes));
        check_lengths(F, layout, &lengths, &[("bootstrap", bootstrap.len())])?;
        let steps = self.step_args(rewards, &episodes);
        self.scan::<T>(
            F,
            ("vtrace", Threads::PerColumn),
            layout,
            &steps,
            &[
                &self.ptr(values),
                &self.ptr(bootstrap),
                &self.ptr(rhos),
                &Scalar::of(params.lambda),
                &Scalar::of(T::one() - params.lambda),
                &Scalar::of(params.clip_rho),
                &Scalar::of(params.clip_pg_rho),
                &self.ptr(vs),
                &self.ptr(pg_advantages),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use rlgrad_core::kernels::recurrence::Truncation;
    use rlgrad_core::{Cpu, Rng};

    use super::*;
    use crate::host::Emulator;

    /// The estimators, each with the kernel that runs it.
    #[derive(Clone, Copy, Debug)]
    enum Estimator {
        Linear,
        Returns,
        Gae,
        GaeReturns,
        Lambda,
        Vtrace,
        NStep(usize),
    }

    impl Estimator {
        fn kernel(self) -> (&'static str, Threads) {
            match self {
                Self::Linear | Self::Returns => ("returns", Threads::Staged),
                Self::Gae => ("gae", Threads::Staged),
                Self::GaeReturns => ("gae_returns", Threads::Staged),
                Self::Lambda => ("lambda_returns", Threads::Staged),
                Self::Vtrace => ("vtrace", Threads::PerColumn),
                Self::NStep(_) => ("n_step", Threads::PerColumn),
            }
        }
    }

    const MODES: [&str; 4] = ["constant", "discounts", "terminations", "truncations"];

    /// One run: `[t, b]` data of an episode mode (an index into [`MODES`]).
    struct Case<T> {
        estimator: Estimator,
        mode: usize,
        t: usize,
        b: usize,
        rewards: Vec<T>,
        discounts: Vec<T>,
        terminated: Vec<T>,
        truncated: Vec<T>,
        final_values: Vec<T>,
        values: Vec<T>,
        bootstrap: Vec<T>,
        rhos: Vec<T>,
    }

    const GAMMA: f64 = 0.99;
    const LAMBDA: f64 = 0.95;
    const CLIP_RHO: f64 = 1.2;
    const CLIP_PG_RHO: f64 = 0.9;

    fn poison<T: Float>(rng: &mut Rng) -> T {
        [T::nan(), T::infinity(), T::neg_infinity()][rng.below(3) as usize]
    }

    impl<T: Float> Case<T> {
        /// Random data; where a step's discount is zero, the next step's value (and the
        /// bootstrap after a last step) is NaN or infinite half the time, and so is every
        /// final value of a step not truncated: what no output before the cut may see.
        fn new(rng: &mut Rng, estimator: Estimator, mode: usize, (t, b): (usize, usize)) -> Self {
            let len = t * b;
            let normal = |rng: &mut Rng, n: usize| -> Vec<T> {
                (0..n).map(|_| rng.normal(0.0, 1.0)).collect()
            };
            let flags = |rng: &mut Rng| -> Vec<T> {
                (0..len)
                    .map(|_| T::from_f64(f64::from(u8::from(rng.below(6) == 0))))
                    .collect()
            };
            let rewards = normal(rng, len);
            let discounts: Vec<T> = (0..len)
                .map(|_| match rng.below(5) {
                    0 => T::zero(),
                    _ => T::from_f64(0.5 + rng.uniform_f64() / 2.0),
                })
                .collect();
            let (terminated, truncated) = (flags(rng), flags(rng));
            let mut final_values = normal(rng, len);
            let mut values = normal(rng, len);
            let mut bootstrap = normal(rng, b);
            let rhos = (0..len)
                .map(|_| T::from_f64(rng.uniform_f64() * 2.0))
                .collect();
            let zero = T::zero();
            for i in 0..len {
                let cut = match (estimator, mode) {
                    (Estimator::Linear, _) | (_, 1) => discounts[i] == zero,
                    (_, 0) => false,
                    (_, 2) => terminated[i] != zero,
                    _ => terminated[i] != zero || truncated[i] != zero,
                };
                if cut && rng.below(2) == 0 {
                    match values.get_mut(i + b) {
                        Some(next) => *next = poison(rng),
                        None => bootstrap[i % b] = poison(rng),
                    }
                }
                if mode == 3 && truncated[i] == zero {
                    final_values[i] = poison(rng);
                }
            }
            Self {
                estimator,
                mode,
                t,
                b,
                rewards,
                discounts,
                terminated,
                truncated,
                final_values,
                values,
                bootstrap,
                rhos,
            }
        }

        fn episodes(&self) -> Episodes<'_, Vec<T>, T> {
            let gamma = T::from_f64(GAMMA);
            match (self.estimator, self.mode) {
                (Estimator::Linear, _) | (_, 1) => Episodes::Discounts(&self.discounts),
                (_, 0) => Episodes::Constant { gamma },
                (_, 2) => Episodes::Flags {
                    gamma,
                    terminated: &self.terminated,
                    truncation: None,
                },
                _ => Episodes::Flags {
                    gamma,
                    terminated: &self.terminated,
                    truncation: Some(Truncation {
                        truncated: &self.truncated,
                        final_values: &self.final_values,
                    }),
                },
            }
        }

        /// The Cpu's outputs.
        fn cpu(&self) -> Vec<Vec<T>> {
            let cpu = Cpu::seq();
            let layout = TimeMajor::new(self.t, self.b);
            let len = self.t * self.b;
            let (mut first, mut second) = (vec![T::zero(); len], vec![T::zero(); len]);
            let lambda = T::from_f64(LAMBDA);
            let (r, v, boot) = (&self.rewards, &self.values, &self.bootstrap);
            let episodes = self.episodes();
            match self.estimator {
                Estimator::Linear => {
                    cpu.linear_recurrence(layout, r, &self.discounts, boot, &mut first)
                }
                Estimator::Returns => cpu.discounted_returns(layout, r, episodes, boot, &mut first),
                Estimator::Gae => cpu.gae(layout, r, v, boot, episodes, lambda, &mut first, None),
                Estimator::GaeReturns => cpu.gae(
                    layout,
                    r,
                    v,
                    boot,
                    episodes,
                    lambda,
                    &mut first,
                    Some(&mut second),
                ),
                Estimator::Lambda => cpu.lambda_returns(layout, r, v, episodes, lambda, &mut first),
                Estimator::Vtrace => cpu.vtrace(
                    layout,
                    r,
                    v,
                    boot,
                    &self.rhos,
                    episodes,
                    VtraceParams {
                        lambda,
                        clip_rho: T::from_f64(CLIP_RHO),
                        clip_pg_rho: T::from_f64(CLIP_PG_RHO),
                    },
                    &mut first,
                    &mut second,
                ),
                Estimator::NStep(n) => cpu.n_step_returns(layout, r, v, episodes, n, &mut first),
            }
            .unwrap();
            match self.estimator {
                Estimator::GaeReturns | Estimator::Vtrace => vec![first, second],
                _ => vec![first],
            }
        }

        /// The kernel's name and the emulation's input: the buffers the Rust side would
        /// pass, null (empty) where it passes 0.
        fn input(&self) -> (String, String) {
            let (name, threads) = self.estimator.kernel();
            let mode = match self.estimator {
                Estimator::Linear => 1,
                _ => self.mode,
            };
            let name = format!("{name}_{}", MODES[mode]);
            let config = launch_config("test", threads, self.b).unwrap();
            let n = match self.estimator {
                Estimator::NStep(n) => n,
                _ => 0,
            };
            let scalars: Vec<String> = [GAMMA, LAMBDA, CLIP_RHO, CLIP_PG_RHO]
                .iter()
                .map(|&x| format!("{:x}", T::from_f64(x).to_bits_u64()))
                .collect();
            let mut text = format!(
                "{} {name} {} {} {} {} {n}\n{}\n",
                T::DTYPE.name(),
                config.grid_dim.0,
                config.block_dim.0,
                self.t,
                self.b,
                scalars.join(" ")
            );
            let reads_values = !matches!(self.estimator, Estimator::Linear | Estimator::Returns);
            let reads_bootstrap =
                !matches!(self.estimator, Estimator::Lambda | Estimator::NStep(_));
            let none = Vec::new();
            for (buffer, used) in [
                (&self.rewards, true),
                (&self.discounts, mode == 1),
                (&self.terminated, mode >= 2),
                (&self.truncated, mode == 3),
                (&self.final_values, mode == 3),
                (&self.values, reads_values),
                (&self.bootstrap, reads_bootstrap),
                (&self.rhos, matches!(self.estimator, Estimator::Vtrace)),
            ] {
                let buffer = if used { buffer } else { &none };
                let words: Vec<String> = buffer
                    .iter()
                    .map(|x| format!("{:x}", x.to_bits_u64()))
                    .collect();
                text.push_str(&format!("{} {}\n", buffer.len(), words.join(" ")));
            }
            (name, text)
        }
    }

    /// Every kernel of the family, through the host emulation, on shapes around the
    /// staged kernels' slice (K) and tile (S = 2K) and columns around a block's 32, each
    /// shape in one episode mode (in turn) and every estimator, against the Cpu's bits
    /// (NaN payloads aside: both NaN counts as equal, as on the GPU).
    fn emulated_kernels_give_the_cpus_bits<T: Float>() {
        let Some(emulator) = Emulator::build(
            (
                "host_recurrence.cpp",
                include_str!("../tests/host_recurrence.cpp"),
            ),
            ("recurrence.cu", include_str!("cuda/recurrence.cu")),
        ) else {
            return;
        };
        let mut rng = Rng::new(38, "cuda-recurrence-host");
        let slice = 64 / T::DTYPE.size_in_bytes();
        let tile = 2 * slice;
        let mut cases = Vec::new();
        let lengths = [1, 3, slice + 1, tile - 1, tile, tile + 1, 2 * tile + 5, 300];
        let shapes = lengths
            .iter()
            .flat_map(|&t| [1, 5, 31, 32, 33, 100].map(|b| (t, b)));
        for (i, shape) in shapes.enumerate() {
            for estimator in [
                Estimator::Linear,
                Estimator::Returns,
                Estimator::Gae,
                Estimator::GaeReturns,
                Estimator::Lambda,
                Estimator::Vtrace,
                Estimator::NStep([1, 3, 1000][i % 3]),
            ] {
                cases.push(Case::<T>::new(&mut rng, estimator, i % 4, shape));
            }
        }
        let inputs: Vec<(String, String)> = cases.iter().map(Case::input).collect();
        let stdout = emulator.run(inputs.iter().map(|(_, text)| text.as_str()).collect());
        let mut lines = stdout.lines();
        let mut non_finite = 0;
        for (case, (name, _)) in cases.iter().zip(&inputs) {
            let what = format!("{name} on [{}, {}]", case.t, case.b);
            for (k, cpu) in case.cpu().iter().enumerate() {
                let emulated: Vec<T> = lines
                    .by_ref()
                    .take(cpu.len())
                    .map(|l| T::from_bits_u64(u64::from_str_radix(l, 16).unwrap()))
                    .collect();
                assert_eq!(emulated.len(), cpu.len(), "{what}: output {k}'s length");
                let differing: Vec<usize> = (0..cpu.len())
                    .filter(|&i| {
                        cpu[i].to_bits_u64() != emulated[i].to_bits_u64()
                            && !(cpu[i].is_nan() && emulated[i].is_nan())
                    })
                    .collect();
                assert!(
                    differing.is_empty(),
                    "{what}: output {k} differs from the Cpu's bits at {} of {} elements, \
                     first at {} (Cpu {}, emulated {})",
                    differing.len(),
                    cpu.len(),
                    differing[0],
                    cpu[differing[0]],
                    emulated[differing[0]]
                );
                non_finite += cpu.iter().filter(|x| !x.is_finite()).count();
            }
        }
        assert!(lines.next().is_none(), "more output than outputs");
        for kernel in Family::Recurrence.kernels() {
            assert!(
                inputs.iter().any(|(name, _)| name == kernel),
                "{kernel} did not run"
            );
        }
        // The poison reached outputs at and after its step (it must, for the cut to be
        // tested), never before it: the Cpu's bits say where.
        assert!(non_finite > 0);
        println!(
            "host emulation: {} runs, every output the Cpu's bits ({non_finite} non-finite)",
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
