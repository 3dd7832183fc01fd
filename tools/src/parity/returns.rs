//! Suite `returns`: rlax and the seed notebook's estimators against rlgrad-returns.

use rlgrad_core::Float;
use rlgrad_returns::{Episodes, TimeMajor, VtraceParams};

use super::{Array, Case, Outputs};

pub const OPS: &[(&str, super::Handler)] = &[
    ("discounted_cumsum", |c| {
        super::by_dtype!(c, discounted_cumsum)
    }),
    ("discounted_returns", |c| {
        super::by_dtype!(c, discounted_returns)
    }),
    ("gae", |c| super::by_dtype!(c, gae)),
    ("lambda_returns", |c| super::by_dtype!(c, lambda_returns)),
    ("n_step_returns", |c| super::by_dtype!(c, n_step_returns)),
    ("vtrace", |c| super::by_dtype!(c, vtrace)),
];

/// The `[T, B]` layout of input `name`.
fn layout(case: &Case, name: &str) -> Result<TimeMajor, String> {
    match case.input_array(name)?.shape[..] {
        [t, b] => Ok(TimeMajor::new(t, b)),
        ref other => Err(format!(
            "input `{name}` has shape {other:?}, expected [T, B]"
        )),
    }
}

fn config<T: Float>(case: &Case, key: &str) -> Result<T, String> {
    Ok(T::from_f64(case.number(key)?))
}

fn discounted_cumsum<T: Float>(case: &Case) -> Result<Outputs, String> {
    let rewards = case.input::<T>("rewards")?;
    let mut returns = rlgrad_returns::discounted_cumsum(&rewards, config(case, "gamma")?)
        .map_err(|e| e.to_string())?;
    if case.flag("standardize")? {
        returns = rlgrad_returns::standardize(&returns, config(case, "std_eps")?, 0)
            .map_err(|e| e.to_string())?;
    }
    Ok(Outputs::from([(
        "returns".to_owned(),
        Array::new(&[returns.len()], &returns),
    )]))
}

fn discounted_returns<T: Float>(case: &Case) -> Result<Outputs, String> {
    let layout = layout(case, "rewards")?;
    let discounts = case.input::<T>("discounts")?;
    let returns = rlgrad_returns::discounted_returns(
        layout,
        &case.input::<T>("rewards")?,
        Episodes::Discounts(&discounts[..]),
        &case.input::<T>("bootstrap")?,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "returns".to_owned(),
        Array::new(&[layout.t, layout.b], &returns),
    )]))
}

fn gae<T: Float>(case: &Case) -> Result<Outputs, String> {
    let layout = layout(case, "rewards")?;
    let discounts = case.input::<T>("discounts")?;
    let out = rlgrad_returns::gae(
        layout,
        &case.input::<T>("rewards")?,
        &case.input::<T>("values")?,
        &case.input::<T>("bootstrap")?,
        Episodes::Discounts(&discounts[..]),
        config(case, "lambda")?,
    )
    .map_err(|e| e.to_string())?;
    let shape = [layout.t, layout.b];
    Ok(Outputs::from([
        ("advantages".to_owned(), Array::new(&shape, &out.advantages)),
        ("returns".to_owned(), Array::new(&shape, &out.returns)),
    ]))
}

fn lambda_returns<T: Float>(case: &Case) -> Result<Outputs, String> {
    let layout = layout(case, "rewards")?;
    let discounts = case.input::<T>("discounts")?;
    let returns = rlgrad_returns::lambda_returns(
        layout,
        &case.input::<T>("rewards")?,
        &case.input::<T>("next_values")?,
        Episodes::Discounts(&discounts[..]),
        config(case, "lambda")?,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "returns".to_owned(),
        Array::new(&[layout.t, layout.b], &returns),
    )]))
}

fn n_step_returns<T: Float>(case: &Case) -> Result<Outputs, String> {
    let layout = layout(case, "rewards")?;
    let discounts = case.input::<T>("discounts")?;
    let n = case.number("n")?;
    if n < 0.0 || n.fract() != 0.0 {
        return Err(format!("config `n` = {n} is not a count"));
    }
    let returns = rlgrad_returns::n_step_returns(
        layout,
        &case.input::<T>("rewards")?,
        &case.input::<T>("next_values")?,
        Episodes::Discounts(&discounts[..]),
        n as usize,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "returns".to_owned(),
        Array::new(&[layout.t, layout.b], &returns),
    )]))
}

fn vtrace<T: Float>(case: &Case) -> Result<Outputs, String> {
    let layout = layout(case, "rewards")?;
    let discounts = case.input::<T>("discounts")?;
    let next_values = case.input::<T>("next_values")?;
    // rlgrad takes V(s_T) as the bootstrap: the last row of rlax's next values.
    let bootstrap = next_values[next_values.len().saturating_sub(layout.b)..].to_vec();
    let out = rlgrad_returns::vtrace(
        layout,
        &case.input::<T>("rewards")?,
        &case.input::<T>("values")?,
        &bootstrap,
        &case.input::<T>("rhos")?,
        Episodes::Discounts(&discounts[..]),
        VtraceParams {
            lambda: config(case, "lambda")?,
            clip_rho: config(case, "clip_rho")?,
            clip_pg_rho: config(case, "clip_pg_rho")?,
        },
    )
    .map_err(|e| e.to_string())?;
    let shape = [layout.t, layout.b];
    Ok(Outputs::from([
        ("vs".to_owned(), Array::new(&shape, &out.vs)),
        (
            "pg_advantages".to_owned(),
            Array::new(&shape, &out.pg_advantages),
        ),
    ]))
}

/// The suite's ops through the device-level functions of rlgrad-returns on the GPU
/// (`cargo xtask parity --device cuda`): the same cases, the kernels of `rlgrad-cuda`.
/// `discounted_cumsum` has no device-level function and is not among them.
pub const CUDA_OPS: &[(&str, super::Handler)] = &[
    ("discounted_returns", |c| {
        super::by_dtype!(c, discounted_returns_on_gpu)
    }),
    ("gae", |c| super::by_dtype!(c, gae_on_gpu)),
    ("lambda_returns", |c| {
        super::by_dtype!(c, lambda_returns_on_gpu)
    }),
    ("n_step_returns", |c| {
        super::by_dtype!(c, n_step_returns_on_gpu)
    }),
    ("vtrace", |c| super::by_dtype!(c, vtrace_on_gpu)),
];

/// The GPU, the case's layout, and its inputs uploaded by name.
struct OnGpu {
    gpu: rlgrad_cuda::Cuda,
    layout: TimeMajor,
}

impl OnGpu {
    fn new(case: &Case) -> Result<Self, String> {
        Ok(Self {
            gpu: rlgrad_cuda::Cuda::new(0).map_err(|e| e.to_string())?,
            layout: layout(case, "rewards")?,
        })
    }

    fn upload<T: Float>(&self, values: &[T]) -> Result<rlgrad_cuda::CudaBuffer<T>, String> {
        rlgrad_core::Device::upload(&self.gpu, values).map_err(|e| e.to_string())
    }

    fn input<T: Float>(
        &self,
        case: &Case,
        name: &str,
    ) -> Result<rlgrad_cuda::CudaBuffer<T>, String> {
        self.upload(&case.input::<T>(name)?)
    }

    fn output<T: Float>(&self, buffer: &rlgrad_cuda::CudaBuffer<T>) -> Result<Array, String> {
        let host = rlgrad_core::Device::download(&self.gpu, buffer).map_err(|e| e.to_string())?;
        Ok(Array::new(&[self.layout.t, self.layout.b], &host))
    }
}

fn discounted_returns_on_gpu<T: Float>(case: &Case) -> Result<Outputs, String> {
    let on = OnGpu::new(case)?;
    let discounts = on.input::<T>(case, "discounts")?;
    let returns = rlgrad_returns::device::discounted_returns(
        &on.gpu,
        on.layout,
        &on.input(case, "rewards")?,
        Episodes::Discounts(&discounts),
        &on.input(case, "bootstrap")?,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "returns".to_owned(),
        on.output(&returns)?,
    )]))
}

fn gae_on_gpu<T: Float>(case: &Case) -> Result<Outputs, String> {
    let on = OnGpu::new(case)?;
    let discounts = on.input::<T>(case, "discounts")?;
    let out = rlgrad_returns::device::gae(
        &on.gpu,
        on.layout,
        &on.input(case, "rewards")?,
        &on.input(case, "values")?,
        &on.input(case, "bootstrap")?,
        Episodes::Discounts(&discounts),
        config(case, "lambda")?,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([
        ("advantages".to_owned(), on.output(&out.advantages)?),
        ("returns".to_owned(), on.output(&out.returns)?),
    ]))
}

fn lambda_returns_on_gpu<T: Float>(case: &Case) -> Result<Outputs, String> {
    let on = OnGpu::new(case)?;
    let discounts = on.input::<T>(case, "discounts")?;
    let returns = rlgrad_returns::device::lambda_returns(
        &on.gpu,
        on.layout,
        &on.input(case, "rewards")?,
        &on.input(case, "next_values")?,
        Episodes::Discounts(&discounts),
        config(case, "lambda")?,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "returns".to_owned(),
        on.output(&returns)?,
    )]))
}

fn n_step_returns_on_gpu<T: Float>(case: &Case) -> Result<Outputs, String> {
    let on = OnGpu::new(case)?;
    let discounts = on.input::<T>(case, "discounts")?;
    let n = case.number("n")?;
    if n < 0.0 || n.fract() != 0.0 {
        return Err(format!("config `n` = {n} is not a count"));
    }
    let returns = rlgrad_returns::device::n_step_returns(
        &on.gpu,
        on.layout,
        &on.input(case, "rewards")?,
        &on.input(case, "next_values")?,
        Episodes::Discounts(&discounts),
        n as usize,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "returns".to_owned(),
        on.output(&returns)?,
    )]))
}

fn vtrace_on_gpu<T: Float>(case: &Case) -> Result<Outputs, String> {
    let on = OnGpu::new(case)?;
    let discounts = on.input::<T>(case, "discounts")?;
    let next_values = case.input::<T>("next_values")?;
    let bootstrap = on.upload(&next_values[next_values.len().saturating_sub(on.layout.b)..])?;
    let out = rlgrad_returns::device::vtrace(
        &on.gpu,
        on.layout,
        &on.input(case, "rewards")?,
        &on.input(case, "values")?,
        &bootstrap,
        &on.input(case, "rhos")?,
        Episodes::Discounts(&discounts),
        VtraceParams {
            lambda: config(case, "lambda")?,
            clip_rho: config(case, "clip_rho")?,
            clip_pg_rho: config(case, "clip_pg_rho")?,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([
        ("vs".to_owned(), on.output(&out.vs)?),
        ("pg_advantages".to_owned(), on.output(&out.pg_advantages)?),
    ]))
}
