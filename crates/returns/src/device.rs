//! The estimators on any device: inputs and outputs are device buffers, the work is done
//! by the device's [`RecurrenceKernel`] (the [`Cpu`] one, or `rlgrad-cuda`'s), so the same
//! call runs anywhere and gives the same bits. The device traits and the [`Cpu`] device
//! are re-exported here, so this crate alone is enough to use them.
//!
//! ```
//! use rlgrad_returns::device::{self, Cpu, Device};
//! use rlgrad_returns::{Episodes, Par, TimeMajor};
//!
//! let cpu = Cpu::new(Par::rayon(2));
//! let rewards = cpu.upload(&[1.0f32, 1.0, 1.0])?;
//! let bootstrap = cpu.upload(&[0.0f32])?;
//! let returns = device::discounted_returns(
//!     &cpu,
//!     TimeMajor::new(3, 1),
//!     &rewards,
//!     Episodes::Constant { gamma: 0.5 },
//!     &bootstrap,
//! )?;
//! assert_eq!(cpu.download(&returns)?, [1.75, 1.5, 1.0]);
//! # Ok::<(), rlgrad_returns::Error>(())
//! ```

pub use rlgrad_core::kernels::{ElementwiseKernel, RecurrenceKernel, ReduceKernel};
pub use rlgrad_core::{Cpu, Device};

use rlgrad_core::kernels::{ReduceOp, UnaryOp};
use rlgrad_core::{Error, Float, Layout, Result, Shape, View};

use crate::estimators::{check_episodes, check_lambda, check_vtrace, output_len};
use crate::finite::check_device_inputs;
use crate::{Episodes, Gae, TimeMajor, Vtrace, VtraceParams};

/// [`crate::discounted_returns`] on `device`.
pub fn discounted_returns<D: RecurrenceKernel<T>, T: Float>(
    device: &D,
    layout: TimeMajor,
    rewards: &D::Buffer<T>,
    episodes: Episodes<'_, D::Buffer<T>, T>,
    bootstrap: &D::Buffer<T>,
) -> Result<D::Buffer<T>> {
    check_episodes("discounted_returns", &episodes)?;
    let inputs = [("rewards", rewards), ("bootstrap", bootstrap)];
    check_device_inputs(device, "discounted_returns", layout, &inputs, &episodes)?;
    let mut out = device.alloc_zeros(output_len(
        "discounted_returns",
        layout,
        device.buffer_len(rewards),
    )?)?;
    device.discounted_returns(layout, rewards, episodes, bootstrap, &mut out)?;
    Ok(out)
}

/// [`crate::gae`] on `device`.
pub fn gae<D: RecurrenceKernel<T>, T: Float>(
    device: &D,
    layout: TimeMajor,
    rewards: &D::Buffer<T>,
    values: &D::Buffer<T>,
    bootstrap: &D::Buffer<T>,
    episodes: Episodes<'_, D::Buffer<T>, T>,
    lambda: T,
) -> Result<Gae<D::Buffer<T>>> {
    check_episodes("gae", &episodes)?;
    check_lambda("gae", lambda)?;
    let inputs = [
        ("rewards", rewards),
        ("values", values),
        ("bootstrap", bootstrap),
    ];
    check_device_inputs(device, "gae", layout, &inputs, &episodes)?;
    let len = output_len("gae", layout, device.buffer_len(rewards))?;
    let mut out = Gae {
        advantages: device.alloc_zeros(len)?,
        returns: device.alloc_zeros(len)?,
    };
    device.gae(
        layout,
        rewards,
        values,
        bootstrap,
        episodes,
        lambda,
        &mut out.advantages,
        Some(&mut out.returns),
    )?;
    Ok(out)
}

/// [`crate::lambda_returns`] on `device`.
pub fn lambda_returns<D: RecurrenceKernel<T>, T: Float>(
    device: &D,
    layout: TimeMajor,
    rewards: &D::Buffer<T>,
    next_values: &D::Buffer<T>,
    episodes: Episodes<'_, D::Buffer<T>, T>,
    lambda: T,
) -> Result<D::Buffer<T>> {
    check_episodes("lambda_returns", &episodes)?;
    check_lambda("lambda_returns", lambda)?;
    let inputs = [("rewards", rewards), ("next_values", next_values)];
    check_device_inputs(device, "lambda_returns", layout, &inputs, &episodes)?;
    let mut out = device.alloc_zeros(output_len(
        "lambda_returns",
        layout,
        device.buffer_len(rewards),
    )?)?;
    device.lambda_returns(layout, rewards, next_values, episodes, lambda, &mut out)?;
    Ok(out)
}

/// [`crate::n_step_returns`] on `device`.
pub fn n_step_returns<D: RecurrenceKernel<T>, T: Float>(
    device: &D,
    layout: TimeMajor,
    rewards: &D::Buffer<T>,
    next_values: &D::Buffer<T>,
    episodes: Episodes<'_, D::Buffer<T>, T>,
    n: usize,
) -> Result<D::Buffer<T>> {
    check_episodes("n_step_returns", &episodes)?;
    if n == 0 {
        return Err(Error::value("n_step_returns", "n", "n >= 1", n));
    }
    let inputs = [("rewards", rewards), ("next_values", next_values)];
    check_device_inputs(device, "n_step_returns", layout, &inputs, &episodes)?;
    let mut out = device.alloc_zeros(output_len(
        "n_step_returns",
        layout,
        device.buffer_len(rewards),
    )?)?;
    device.n_step_returns(layout, rewards, next_values, episodes, n, &mut out)?;
    Ok(out)
}

/// [`crate::vtrace`] on `device`.
#[allow(clippy::too_many_arguments)]
pub fn vtrace<D: RecurrenceKernel<T>, T: Float>(
    device: &D,
    layout: TimeMajor,
    rewards: &D::Buffer<T>,
    values: &D::Buffer<T>,
    bootstrap: &D::Buffer<T>,
    rhos: &D::Buffer<T>,
    episodes: Episodes<'_, D::Buffer<T>, T>,
    params: VtraceParams<T>,
) -> Result<Vtrace<D::Buffer<T>>> {
    check_episodes("vtrace", &episodes)?;
    check_vtrace(&params)?;
    let inputs = [
        ("rewards", rewards),
        ("values", values),
        ("bootstrap", bootstrap),
        ("rhos", rhos),
    ];
    check_device_inputs(device, "vtrace", layout, &inputs, &episodes)?;
    let len = output_len("vtrace", layout, device.buffer_len(rewards))?;
    let mut out = Vtrace {
        vs: device.alloc_zeros(len)?,
        pg_advantages: device.alloc_zeros(len)?,
    };
    device.vtrace(
        layout,
        rewards,
        values,
        bootstrap,
        rhos,
        episodes,
        params,
        &mut out.vs,
        &mut out.pg_advantages,
    )?;
    Ok(out)
}

/// [`crate::standardize`] on `device`: the canonical mean and variance by the device's
/// reduce kernel, then `(x - mean) / (std + eps)` elementwise (two exact-order passes).
pub fn standardize<D, T>(device: &D, x: &D::Buffer<T>, eps: T, ddof: usize) -> Result<D::Buffer<T>>
where
    D: ReduceKernel<T> + ElementwiseKernel<T>,
    T: Float,
{
    rlgrad_core::check::non_negative("standardize", "eps", eps.as_f64())?;
    let len = device.buffer_len(x);
    if len == 0 {
        return device.alloc_zeros(0);
    }
    if len <= ddof {
        return Err(Error::empty(
            "standardize",
            "x",
            format_args!("more than ddof = {ddof} elements, got {len}"),
        ));
    }
    let layout = Layout::contiguous(Shape::from([len]));
    let mut value = device.alloc_zeros(1)?;
    let mut scalar = |op| -> Result<T> {
        device.reduce(op, View::new(x, &layout), None, &mut value)?;
        Ok(device.download(&value)?[0])
    };
    let mean = scalar(ReduceOp::Mean)?;
    let std = scalar(ReduceOp::Var { ddof })?.sqrt();
    let mut centered = device.alloc_zeros(len)?;
    device.unary(
        UnaryOp::SubScalar(mean),
        View::new(x, &layout),
        &mut centered,
    )?;
    let mut out = device.alloc_zeros(len)?;
    device.unary(
        UnaryOp::DivScalar(std + eps),
        View::new(&centered, &layout),
        &mut out,
    )?;
    Ok(out)
}
