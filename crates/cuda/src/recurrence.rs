//! [`RecurrenceKernel`] on the GPU (`recurrence.cu`): one thread per column, sequential in
//! time, chunks of steps loaded into registers ahead of the dependent chain.

use cudarc::driver::LaunchConfig;
use rlgrad_core::cpu::recurrence::check_lengths;
use rlgrad_core::kernels::RecurrenceKernel;
use rlgrad_core::kernels::recurrence::{Episodes, TimeMajor, VtraceParams};
use rlgrad_core::{Error, Float, Result};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, KernelArg, Scalar};

/// Columns per block (`COLUMNS_PER_BLOCK` in recurrence.cu): one warp, so that a few
/// thousand columns spread over every multiprocessor.
const COLUMNS: u32 = 32;

/// The seven `STEPS_PARAMS` of recurrence.cu for an [`Episodes`] description.
struct StepArgs {
    mode: i32,
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
            mode: 0,
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
                args.mode = 1;
                args.discounts = self.ptr(d);
            }
            Episodes::Flags {
                gamma,
                terminated,
                truncation,
            } => {
                args.gamma = Scalar::of(gamma);
                args.mode = 2;
                args.terminated = self.ptr(terminated);
                if let Some(tr) = truncation {
                    args.mode = 3;
                    args.truncated = self.ptr(tr.truncated);
                    args.final_values = self.ptr(tr.final_values);
                }
            }
        }
        args
    }

    /// Launches recurrence kernel `name` over the columns of `layout` with
    /// `(steps, b, <steps params>, rest...)`.
    fn scan<T: Float>(
        &self,
        function: &'static str,
        name: &str,
        layout: TimeMajor,
        steps: &StepArgs,
        rest: &[&dyn KernelArg],
    ) -> Result<()> {
        if layout.is_empty() {
            return Ok(());
        }
        let blocks = u32::try_from(layout.b.div_ceil(COLUMNS as usize))
            .map_err(|_| Error::shape(function, "layout", "fewer than 2^37 columns", layout.b))?;
        let kernel = self.function::<T>(Family::Recurrence, name)?;
        let (t, b) = (layout.t as u64, layout.b as u64);
        let mut args: Vec<&dyn KernelArg> = vec![
            &t,
            &b,
            &steps.mode,
            &steps.rewards,
            &steps.discounts,
            &steps.terminated,
            &steps.truncated,
            &steps.final_values,
            &steps.gamma,
        ];
        args.extend_from_slice(rest);
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (COLUMNS, 1, 1),
            shared_mem_bytes: 0,
        };
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
            "returns",
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
            "returns",
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
        let returns = returns.map_or(0, |r| self.ptr(r));
        self.scan::<T>(
            F,
            "gae",
            layout,
            &steps,
            &[
                &self.ptr(values),
                &self.ptr(bootstrap),
                &Scalar::of(lambda),
                &self.ptr(advantages),
                &returns,
            ],
        )
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
            "lambda_returns",
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
            "n_step",
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
            "vtrace",
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
