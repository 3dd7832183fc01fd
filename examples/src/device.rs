//! Where an agent's networks train: the `--device` choice, what a device must offer an
//! agent ([`TrainDevice`]), and opening the GPU.
//!
//! The environments, replay buffers and episode logs stay on the host on every device;
//! the networks, optimizer slots and tapes live on the device. A checkpoint holds host
//! copies under the same names on every device, so a run saved on one device resumes on
//! another with the same bits.

use std::fmt;
use std::str::FromStr;

use rlgrad_core::kernels::{CellKernel, OptimKernel, SequenceKernel};
use rlgrad_core::{Error, Result};
use rlgrad_cuda::Cuda;
use rlgrad_tensor::TensorDevice;

/// What an agent's training step needs of its device: the tensor and autodiff kernels,
/// the LSTM cell and the sequence kernels of padded batches (recurrent PPO), and the
/// fused optimizers, in f32. The Cpu and [`Cuda`] are ones.
pub trait TrainDevice:
    TensorDevice<f32> + CellKernel<f32> + SequenceKernel<f32> + OptimKernel<f32>
{
}

impl<D> TrainDevice for D where
    D: TensorDevice<f32> + CellKernel<f32> + SequenceKernel<f32> + OptimKernel<f32>
{
}

/// The device a run asks for (`--device cpu|cuda`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceKind {
    /// The host, the default.
    #[default]
    Cpu,
    /// The first CUDA GPU (`Cuda::new(0)`).
    Cuda,
}

impl DeviceKind {
    /// The choices, as `--help` and errors name them.
    pub const CHOICES: &'static str = "cpu or cuda";

    /// The GPU, or an error naming the option and why there is none (the text of
    /// `Cuda::new`'s error).
    pub fn open_cuda() -> Result<Cuda> {
        Cuda::new(0).map_err(|why| {
            Error::value(
                "rlgrad-examples",
                "--device",
                "cpu, or cuda on a machine with a CUDA GPU",
                format_args!("cuda, and there is no GPU: {why}"),
            )
        })
    }
}

impl FromStr for DeviceKind {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        match text {
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda),
            other => Err(Error::value(
                "DeviceKind::from_str",
                "text",
                Self::CHOICES,
                format_args!("`{other}`"),
            )),
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choices_parse_and_print_alike() {
        for kind in [DeviceKind::Cpu, DeviceKind::Cuda] {
            assert_eq!(kind.to_string().parse::<DeviceKind>().unwrap(), kind);
        }
        let error = "gpu".parse::<DeviceKind>().unwrap_err().to_string();
        assert!(error.contains("expected cpu or cuda, got `gpu`"), "{error}");
    }

    #[test]
    fn without_a_gpu_cuda_is_an_error_that_says_why() {
        // On a GPU machine there is nothing to check here (the GPU test trains there).
        if let Err(error) = DeviceKind::open_cuda() {
            let error = error.to_string();
            assert!(
                error.contains("`--device`") && error.contains("Cuda::new"),
                "{error}"
            );
        }
    }
}
