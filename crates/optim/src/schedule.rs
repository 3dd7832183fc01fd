//! Learning-rate schedules. The optimizer's `k`-th step (`k = 1, 2, ...`) uses
//! `schedule.lr(k - 1)`: `lr(0)` is the first learning rate, as with a PyTorch scheduler
//! stepped after each optimizer step. Values are computed in f64 on the host. A plain
//! `f64` or `f32` is a constant rate, and every schedule is `Clone` (boxed ones too), so
//! one value can configure several optimizers or groups.

use std::f64::consts::PI;
use std::fmt::Debug;

/// A learning rate per step. Implement it on a `Clone` type ([`CloneSchedule`] then comes
/// for free).
///
/// ```
/// use rlgrad_optim::{Cosine, LinearWarmup, Schedule};
/// let schedule = LinearWarmup { steps: 10, then: Cosine { base: 3e-4, min: 0.0, steps: 100 } };
/// let boxed: Box<dyn Schedule> = Box::new(schedule.clone());
/// assert_eq!(boxed.clone().lr(9), schedule.lr(9));
/// assert_eq!(1e-3f32.lr(7), f64::from(1e-3f32));
/// ```
pub trait Schedule: Debug + Send + Sync + CloneSchedule {
    /// The learning rate after `step` completed optimizer steps.
    fn lr(&self, step: u64) -> f64;

    /// What tells this schedule from any other, exact values included: a constant rate is
    /// its value (`0.001`), the others name their kind and parameters
    /// (`cosine(base 0.0003, min 0.0, steps 1000)`). Recorded in exported state with the
    /// step counter (the schedule's position), and a state saved with another schedule is
    /// refused on import, naming both. `None`, the default, leaves a custom schedule
    /// unverified on import.
    fn spec(&self) -> Option<String> {
        None
    }
}

/// Cloning behind a `Box<dyn Schedule>`; implemented for every `Schedule + Clone`.
pub trait CloneSchedule {
    /// A boxed copy of this schedule.
    fn clone_box(&self) -> Box<dyn Schedule>;
}

impl<S: Schedule + Clone + 'static> CloneSchedule for S {
    fn clone_box(&self) -> Box<dyn Schedule> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Schedule> {
    fn clone(&self) -> Self {
        // The boxed schedule's own copy: `self.clone_box()` would be the box's, which
        // clones the box again.
        (**self).clone_box()
    }
}

/// A boxed schedule is a schedule, so schedules can be chosen at run time.
impl Schedule for Box<dyn Schedule> {
    fn lr(&self, step: u64) -> f64 {
        (**self).lr(step)
    }
    fn spec(&self) -> Option<String> {
        (**self).spec()
    }
}

/// A fixed learning rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Constant(pub f64);

impl Schedule for Constant {
    fn lr(&self, _step: u64) -> f64 {
        self.0
    }
    fn spec(&self) -> Option<String> {
        Some(format!("{:?}", self.0))
    }
}

impl Schedule for f64 {
    fn lr(&self, _step: u64) -> f64 {
        *self
    }
    fn spec(&self) -> Option<String> {
        Constant(*self).spec()
    }
}

/// An `f32` learning rate, widened exactly to f64 (so `1e-3f32` is
/// `Constant(0.0010000000474974513)`, not `Constant(1e-3)`).
impl Schedule for f32 {
    fn lr(&self, _step: u64) -> f64 {
        f64::from(*self)
    }
    fn spec(&self) -> Option<String> {
        Constant(f64::from(*self)).spec()
    }
}

/// `base * gamma^floor(step / step_size)` (`torch.optim.lr_scheduler.StepLR`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepDecay {
    /// The initial rate.
    pub base: f64,
    /// Steps between decays.
    pub step_size: u64,
    /// The factor of each decay.
    pub gamma: f64,
}

impl Schedule for StepDecay {
    fn lr(&self, step: u64) -> f64 {
        let decays = step.checked_div(self.step_size).unwrap_or(0);
        self.base * self.gamma.powi(decays.min(i32::MAX as u64) as i32)
    }
    fn spec(&self) -> Option<String> {
        let Self {
            base,
            step_size,
            gamma,
        } = self;
        Some(format!(
            "step_decay(base {base:?}, step_size {step_size}, gamma {gamma:?})"
        ))
    }
}

/// `base * gamma^step` (`ExponentialLR`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exponential {
    /// The initial rate.
    pub base: f64,
    /// The factor per step.
    pub gamma: f64,
}

impl Schedule for Exponential {
    fn lr(&self, step: u64) -> f64 {
        self.base * self.gamma.powf(step as f64)
    }
    fn spec(&self) -> Option<String> {
        let Self { base, gamma } = self;
        Some(format!("exponential(base {base:?}, gamma {gamma:?})"))
    }
}

/// Cosine annealing from `base` to `min` over `steps` steps, then `min`
/// (`CosineAnnealingLR` without restarts): `min + (base - min) (1 + cos(pi k / steps)) / 2`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cosine {
    /// The initial rate.
    pub base: f64,
    /// The final rate.
    pub min: f64,
    /// The length of the annealing.
    pub steps: u64,
}

impl Schedule for Cosine {
    fn lr(&self, step: u64) -> f64 {
        if self.steps == 0 || step >= self.steps {
            return self.min;
        }
        let progress = step as f64 / self.steps as f64;
        self.min + (self.base - self.min) * (1.0 + libm_cos(PI * progress)) / 2.0
    }
    fn spec(&self) -> Option<String> {
        let Self { base, min, steps } = self;
        Some(format!("cosine(base {base:?}, min {min:?}, steps {steps})"))
    }
}

/// A portable cosine: the schedule's values must not depend on the platform's libm.
fn libm_cos(x: f64) -> f64 {
    use rlgrad_core::Float;
    x.cos_portable()
}

/// A linear ramp from 0 (exclusive) to `then.lr(0)` over `steps` steps, then `then`,
/// shifted so that it starts where the warm-up ends: `lr(k) = then.lr(0) * (k + 1) / steps`
/// for `k < steps`, else `then.lr(k - steps)`.
#[derive(Debug, Clone)]
pub struct LinearWarmup<S> {
    /// Steps of the ramp.
    pub steps: u64,
    /// The schedule after the ramp.
    pub then: S,
}

impl<S: Schedule + Clone + 'static> Schedule for LinearWarmup<S> {
    fn lr(&self, step: u64) -> f64 {
        if step < self.steps {
            self.then.lr(0) * (step + 1) as f64 / self.steps as f64
        } else {
            self.then.lr(step - self.steps)
        }
    }
    fn spec(&self) -> Option<String> {
        let then = self.then.spec()?;
        Some(format!("linear_warmup(steps {}, then {then})", self.steps))
    }
}

/// Schedules one after the other: the first runs for `boundaries[0]` steps, the second
/// (restarted at its step 0) until `boundaries[1]`, and so on (optax's `join_schedules`).
#[derive(Debug, Clone)]
pub struct Sequence {
    schedules: Vec<Box<dyn Schedule>>,
    boundaries: Vec<u64>,
}

impl Sequence {
    /// `boundaries` must be increasing and one shorter than `schedules`.
    pub fn new(
        schedules: Vec<Box<dyn Schedule>>,
        boundaries: Vec<u64>,
    ) -> rlgrad_core::Result<Self> {
        if schedules.is_empty() || boundaries.len() + 1 != schedules.len() {
            return Err(rlgrad_core::Error::shape(
                "Sequence::new",
                "boundaries",
                format_args!(
                    "{} boundaries for {} schedules",
                    schedules.len().saturating_sub(1),
                    schedules.len()
                ),
                boundaries.len(),
            ));
        }
        if boundaries.windows(2).any(|w| w[0] >= w[1]) {
            return Err(rlgrad_core::Error::value(
                "Sequence::new",
                "boundaries",
                "strictly increasing steps",
                format_args!("{boundaries:?}"),
            ));
        }
        Ok(Self {
            schedules,
            boundaries,
        })
    }
}

impl Schedule for Sequence {
    fn lr(&self, step: u64) -> f64 {
        let index = self.boundaries.partition_point(|&b| b <= step);
        let start = if index == 0 {
            0
        } else {
            self.boundaries[index - 1]
        };
        self.schedules[index].lr(step - start)
    }
    fn spec(&self) -> Option<String> {
        let mut parts = Vec::with_capacity(self.schedules.len());
        for (k, schedule) in self.schedules.iter().enumerate() {
            let spec = schedule.spec()?;
            parts.push(match self.boundaries.get(k) {
                Some(until) => format!("{spec} until step {until}"),
                None => spec,
            });
        }
        Some(format!("sequence({})", parts.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(Constant(0.1).lr(99), 0.1);
        let s = StepDecay {
            base: 1.0,
            step_size: 10,
            gamma: 0.5,
        };
        assert_eq!((s.lr(9), s.lr(10), s.lr(25)), (1.0, 0.5, 0.25));
        assert_eq!(
            Exponential {
                base: 2.0,
                gamma: 0.5
            }
            .lr(3),
            0.25
        );
        let c = Cosine {
            base: 1.0,
            min: 0.0,
            steps: 4,
        };
        assert_eq!(c.lr(0), 1.0);
        assert!((c.lr(2) - 0.5).abs() < 1e-15);
        assert_eq!(c.lr(4), 0.0);
        let w = LinearWarmup {
            steps: 4,
            then: Constant(1.0),
        };
        assert_eq!((w.lr(0), w.lr(3), w.lr(4)), (0.25, 1.0, 1.0));
        let seq = Sequence::new(
            vec![
                Box::new(Constant(1.0)),
                Box::new(Exponential {
                    base: 0.5,
                    gamma: 0.5,
                }),
            ],
            vec![3],
        )
        .unwrap();
        assert_eq!((seq.lr(2), seq.lr(3), seq.lr(4)), (1.0, 0.5, 0.25));
        assert!(Sequence::new(vec![Box::new(Constant(1.0))], vec![3]).is_err());
    }

    #[test]
    fn specs_tell_schedules_apart_exactly() {
        // One constant rate, however it is written.
        assert_eq!(1e-3f64.spec().as_deref(), Some("0.001"));
        assert_eq!(Constant(1e-3).spec(), 1e-3f64.spec());
        assert_eq!(1e-3f32.spec(), Constant(f64::from(1e-3f32)).spec());
        assert_ne!(1e-3f32.spec(), 1e-3f64.spec());
        assert_ne!(Constant(0.1 + 0.2).spec(), Constant(0.3).spec());
        let cosine = Cosine {
            base: 3e-4,
            min: 0.0,
            steps: 1000,
        };
        let warmup: Box<dyn Schedule> = Box::new(LinearWarmup {
            steps: 10,
            then: cosine,
        });
        assert_eq!(
            warmup.spec().as_deref(),
            Some("linear_warmup(steps 10, then cosine(base 0.0003, min 0.0, steps 1000))")
        );
        let seq = Sequence::new(vec![warmup, Box::new(Constant(1e-5))], vec![500]).unwrap();
        assert_eq!(
            seq.spec().as_deref(),
            Some(
                "sequence(linear_warmup(steps 10, then cosine(base 0.0003, min 0.0, steps 1000)) \
                 until step 500, 1e-5)"
            )
        );
        // A part without a spec leaves the whole unverified.
        #[derive(Debug, Clone)]
        struct Custom;
        impl Schedule for Custom {
            fn lr(&self, _step: u64) -> f64 {
                0.1
            }
        }
        let custom = LinearWarmup {
            steps: 1,
            then: Custom,
        };
        assert_eq!(custom.spec(), None);
        assert_eq!(
            Sequence::new(vec![Box::new(1e-3), Box::new(Custom)], vec![5])
                .unwrap()
                .spec(),
            None
        );
    }
}
