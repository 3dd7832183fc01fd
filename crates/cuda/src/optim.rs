//! [`OptimKernel`] on the GPU (`optim.cu`): every fused update of
//! `rlgrad_core::kernels::optim` in its documented order of operations, one thread per
//! element, step scalars from the host, and Polyak averaging; up to 16 tensors of one
//! update per launch.

use cudarc::driver::{DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg};
use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::kernels::optim::{
    Adagrad, Adam, BufferJob, Flavor, Momentum, Update, check_clip, check_polyak,
};
use rlgrad_core::{Error, Float, Result};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, KernelArg, Scalar, grid};

fn check<T: Float>(
    update: &Update<T>,
    param: &CudaBuffer<T>,
    grad: &CudaBuffer<T>,
    slots: &[&mut CudaBuffer<T>],
) -> Result<()> {
    const F: &str = "Cuda::update";
    let len = param.len();
    if grad.len() != len {
        return Err(Error::shape(
            F,
            "grad",
            format_args!("{len} elements, as the parameter"),
            format_args!("{} elements", grad.len()),
        ));
    }
    let names = update.slot_names();
    if slots.len() != names.len() {
        return Err(Error::shape(
            F,
            "slots",
            format_args!("{} slots ({})", names.len(), names.join(", ")),
            format_args!("{} slots", slots.len()),
        ));
    }
    if let Some((name, slot)) = names.iter().zip(slots).find(|(_, s)| s.len() != len) {
        return Err(Error::shape(
            F,
            "slots",
            format_args!("slot `{name}` of {len} elements"),
            format_args!("{} elements", slot.len()),
        ));
    }
    Ok(())
}

/// Tensors per launch (`PARAMS_PER_LAUNCH` in optim.cu).
const PARAMS_PER_LAUNCH: usize = 16;

/// The kernels' `Params`: per tensor its element count, value, gradient (Polyak: the
/// source) and three slots (0 when unused), passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
struct Params {
    rows: [[u64; 6]; PARAMS_PER_LAUNCH],
}

// SAFETY: `Params` is plain u64s with the layout of optim.cu's `Params` (repr(C), no
// padding), which the kernels take by value.
unsafe impl DeviceRepr for Params {}

impl KernelArg for Params {
    fn push<'a>(&'a self, builder: &mut LaunchArgs<'a>) {
        builder.arg(self);
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: no padding (see the `DeviceRepr` implementation above).
        unsafe { crate::device::value_bytes(self) }
    }
}

/// How optim.cu runs an update: its kernel, the scalar arguments after the table, and
/// which of a job's slots (in [`Update::slot_names`] order) the kernel's three slot
/// pointers take.
struct Launch {
    kernel: &'static str,
    scalars: Vec<Box<dyn KernelArg>>,
    slots: [Option<usize>; 3],
}

/// The [`Launch`] of `update`.
fn kernel_of<T: Float>(update: &Update<T>) -> Launch {
    let s = |value: T| -> Box<dyn KernelArg> { Box::new(Scalar::of(value)) };
    let flag = |b: bool| -> Box<dyn KernelArg> { Box::new(i32::from(b)) };
    let first = [Some(0), None, None];
    let three = [Some(0), Some(1), Some(2)];
    let (kernel, scalars, slots) = match *update {
        Update::Sgd(rule) => ("sgd", vec![s(rule.lr), s(rule.weight_decay)], [None; 3]),
        Update::Momentum(Momentum::Torch {
            lr,
            momentum,
            dampening,
            nesterov,
            weight_decay,
            first_step,
        }) => (
            "momentum_torch",
            vec![
                s(lr),
                s(momentum),
                s(dampening),
                flag(nesterov),
                s(weight_decay),
                flag(first_step),
            ],
            first,
        ),
        Update::Momentum(Momentum::Keras {
            lr,
            momentum,
            nesterov,
            weight_decay,
        }) => (
            "momentum_keras",
            vec![s(lr), s(momentum), flag(nesterov), s(weight_decay)],
            first,
        ),
        Update::Momentum(Momentum::Core { lr, momentum }) => {
            ("momentum_core", vec![s(lr), s(momentum)], first)
        }
        Update::Adam(Adam::Torch(a)) => (
            "adam_torch",
            vec![
                s(a.step_size),
                s(a.bias_correction2_sqrt),
                s(a.one_minus_beta1),
                s(a.beta2),
                s(a.one_minus_beta2),
                s(a.eps),
                s(a.weight_decay),
                s(a.decoupled_keep),
            ],
            three,
        ),
        Update::Adam(Adam::Keras {
            alpha,
            lr,
            one_minus_beta1,
            one_minus_beta2,
            eps,
            weight_decay,
            amsgrad: _,
        }) => (
            "adam_keras",
            vec![
                s(alpha),
                s(lr),
                s(one_minus_beta1),
                s(one_minus_beta2),
                s(eps),
                s(weight_decay),
            ],
            three,
        ),
        Update::Rmsprop(r) => {
            // Slots: square_avg, then grad_avg when centered, then the momentum buffer.
            let grad_avg = r.centered.then_some(1);
            let buffer = (r.momentum != T::zero()).then_some(if r.centered { 2 } else { 1 });
            (
                "rmsprop",
                vec![
                    flag(r.flavor == Flavor::Torch),
                    s(r.lr),
                    s(r.alpha),
                    s(r.one_minus_alpha),
                    s(r.eps),
                    s(r.momentum),
                    s(r.weight_decay),
                ],
                [Some(0), grad_avg, buffer],
            )
        }
        Update::Adagrad(Adagrad::Torch {
            clr,
            eps,
            weight_decay,
        }) => (
            "adagrad_torch",
            vec![s(clr), s(eps), s(weight_decay)],
            first,
        ),
        Update::Adagrad(Adagrad::Keras {
            lr,
            eps,
            weight_decay,
        }) => ("adagrad_keras", vec![s(lr), s(eps), s(weight_decay)], first),
    };
    Launch {
        kernel,
        scalars,
        slots,
    }
}

impl Cuda {
    /// Launches optim.cu's kernel `name` over `rows` (each `[n, p, g, a, b, c]`), up to
    /// [`PARAMS_PER_LAUNCH`] tensors a launch, with `scalars` after the table.
    fn launch_rows<T: Float>(
        &self,
        function: &'static str,
        name: &str,
        rows: &[[u64; 6]],
        scalars: &[Box<dyn KernelArg>],
    ) -> Result<()> {
        let kernel = self.function::<T>(Family::Optim, name)?;
        for chunk in rows.chunks(PARAMS_PER_LAUNCH) {
            let longest = chunk.iter().map(|row| row[0]).max().unwrap_or(0);
            if longest == 0 {
                continue;
            }
            let mut params = Params {
                rows: [[0; 6]; PARAMS_PER_LAUNCH],
            };
            params.rows[..chunk.len()].copy_from_slice(chunk);
            let mut config = grid(longest as usize);
            config.grid_dim.1 = chunk.len() as u32;
            let mut args: Vec<&dyn KernelArg> = vec![&params];
            args.extend(scalars.iter().map(|a| &**a));
            self.launch(function, &kernel, config, &args)?;
        }
        Ok(())
    }
}

impl<T: Float> OptimKernel<T> for Cuda {
    fn update(
        &self,
        update: &Update<T>,
        param: &mut CudaBuffer<T>,
        grad: &CudaBuffer<T>,
        slots: &mut [&mut CudaBuffer<T>],
    ) -> Result<()> {
        let job = BufferJob {
            update: *update,
            param,
            grad,
            slots: slots.iter_mut().map(|s| &mut **s).collect(),
        };
        self.update_all(&mut [job])
    }

    /// One launch per 16 parameters that share an update (a step's
    /// parameters in one group all do).
    fn update_all(&self, jobs: &mut [BufferJob<'_, T, CudaBuffer<T>>]) -> Result<()> {
        const F: &str = "Cuda::update";
        for job in jobs.iter() {
            check(&job.update, job.param, job.grad, &job.slots)?;
        }
        // One launch description per distinct update (a step's groups), built once.
        let mut by_update: Vec<(Update<T>, Launch, Vec<[u64; 6]>)> = Vec::new();
        for job in jobs.iter() {
            let at = match by_update.iter().position(|(u, _, _)| *u == job.update) {
                Some(at) => at,
                None => {
                    by_update.push((job.update, kernel_of(&job.update), Vec::new()));
                    by_update.len() - 1
                }
            };
            let (_, launch, rows) = &mut by_update[at];
            let slot = |k: Option<usize>| k.map_or(0, |k| self.ptr(&*job.slots[k]));
            rows.push([
                job.param.len() as u64,
                self.ptr(&*job.param),
                self.ptr(job.grad),
                slot(launch.slots[0]),
                slot(launch.slots[1]),
                slot(launch.slots[2]),
            ]);
        }
        for (_, launch, rows) in &by_update {
            self.launch_rows::<T>(F, launch.kernel, rows, &launch.scalars)?;
        }
        Ok(())
    }

    /// One launch per 16 pairs.
    fn polyak(
        &self,
        tau: T,
        keep: T,
        targets: &mut [&mut CudaBuffer<T>],
        sources: &[&CudaBuffer<T>],
    ) -> Result<()> {
        const F: &str = "Cuda::polyak";
        check_polyak(
            F,
            targets.iter().map(|t| t.len()),
            sources.iter().map(|s| s.len()),
        )?;
        let rows: Vec<[u64; 6]> = targets
            .iter()
            .zip(sources)
            .map(|(t, s)| [t.len() as u64, self.ptr(&**t), self.ptr(*s), 0, 0, 0])
            .collect();
        let scalars: [Box<dyn KernelArg>; 2] =
            [Box::new(Scalar::of(tau)), Box::new(Scalar::of(keep))];
        self.launch_rows::<T>(F, "polyak", &rows, &scalars)
    }

    fn clip_scale(&self, largest: &CudaBuffer<T>, scale: &mut CudaBuffer<T>) -> Result<()> {
        const F: &str = "Cuda::clip_scale";
        check_clip(
            F,
            [("largest", largest.len()), ("scale", scale.len())],
            1,
            None,
        )?;
        let kernel = self.function::<T>(Family::Optim, "clip_scale")?;
        let (from, to) = (self.ptr(largest), self.ptr(scale));
        self.launch(F, &kernel, ONE_THREAD, &[&from, &to])
    }

    fn clip_plan(
        &self,
        max_norm: f64,
        sums: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::clip_plan";
        check_clip(
            F,
            [("sums", sums.len()), ("out", out.len())],
            3,
            Some(max_norm),
        )?;
        let kernel = self.function::<T>(Family::Optim, "clip_plan")?;
        let (max_norm, from, to) = (Scalar::F64(max_norm), self.ptr(sums), self.ptr(out));
        self.launch(F, &kernel, ONE_THREAD, &[&max_norm, &from, &to])
    }
}

/// One block of one thread: the clip's scalar decisions.
const ONE_THREAD: LaunchConfig = LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (1, 1, 1),
    shared_mem_bytes: 0,
};

#[cfg(test)]
mod tests {
    use rlgrad_core::Float;
    use rlgrad_core::kernels::clip::{clip_factors, down_scale};

    use crate::host::Emulator;

    /// The emulation's input for `T`'s cases, and the bits the Rust formulas give: the
    /// plain norm below and above the limit, zero gradients, a NaN, an infinite gradient,
    /// overflowing squares (clipped, and left alone under a huge limit), a norm beyond the
    /// type's range, subnormal and huge largest gradients.
    fn clip_cases<T: Float>() -> (String, Vec<u64>) {
        let t = T::from_f64;
        let (inf, nan, max) = (T::infinity(), T::nan(), T::max_value());
        let tiny = T::min_positive_value() / t(8.0);
        let cases: Vec<(f64, [T; 3])> = vec![
            (1.0, [t(25.0), t(4.0), t(25.0)]),
            (10.0, [t(25.0), t(4.0), t(25.0)]),
            (0.5, [t(0.0), t(0.0), t(0.0)]),
            (0.5, [nan, t(3.0), t(9.0)]),
            (1.0, [inf, inf, nan]),
            (1.0, [inf, t(1e20), t(3.0)]),
            (1e30, [inf, t(1e20), t(3.0)]),
            (1.0, [inf, max, t(15.9)]),
            (3.0, [t(1e-30), tiny, t(7.0)]),
            (0.25, [t(2.0e5), t(300.0), t(1.5)]),
        ];
        let hex = |x: T| format!("{:x}", x.to_bits_u64());
        let mut input = String::new();
        let mut want = Vec::new();
        for (max_norm, [sum, largest, scaled]) in cases {
            input.push_str(&format!(
                "{} plan 1 {:x} {} {} {}\n",
                T::DTYPE.name(),
                max_norm.to_bits(),
                hex(sum),
                hex(largest),
                hex(scaled)
            ));
            want.push(down_scale(largest).to_bits_u64());
            let factors = clip_factors(max_norm, sum, largest, scaled).unwrap();
            want.extend(factors.map(Float::to_bits_u64));
        }
        (input, want)
    }

    /// optim.cu's clip decisions compiled for the host give the Rust formulas' bits
    /// ([`clip_cases`], f32 and f64): the scale, the norm and both factors.
    #[test]
    fn emulated_clip_decisions_are_the_rust_formulas() {
        let Some(emulator) = Emulator::build(
            ("host_clip.cpp", include_str!("../tests/host_clip.cpp")),
            ("optim.cu", include_str!("cuda/optim.cu")),
        ) else {
            return;
        };
        let ((input32, want32), (input64, want64)) = (clip_cases::<f32>(), clip_cases::<f64>());
        let got: Vec<u64> = (emulator.run(input32 + &input64).lines())
            .map(|l| u64::from_str_radix(l, 16).unwrap())
            .collect();
        let want: Vec<u64> = want32.into_iter().chain(want64).collect();
        assert_eq!(got.len(), want.len());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g,
                w,
                "case {} (f32 first, then f64), output {}",
                k / 4,
                k % 4
            );
        }
    }
}
