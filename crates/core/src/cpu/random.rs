//! [`RandomKernel`] on the Cpu: the stream's samples drawn in order into the buffer itself.

use crate::kernels::RandomKernel;
use crate::{Cpu, Float, Result, Rng};

impl<T: Float> RandomKernel<T> for Cpu {
    fn fill_uniform(&self, rng: &mut Rng, low: T, high: T, out: &mut Vec<T>) -> Result<()> {
        for value in out.iter_mut() {
            *value = low + (high - low) * rng.uniform::<T>();
        }
        Ok(())
    }

    fn fill_normal(&self, rng: &mut Rng, mean: f64, std: f64, out: &mut Vec<T>) -> Result<()> {
        for value in out.iter_mut() {
            *value = rng.normal::<T>(mean, std);
        }
        Ok(())
    }
}
