//! Observation and action spaces: Gymnasium's `Box` (of f32) and `Discrete`.

use std::fmt::Debug;

use rlgrad_core::{Error, Result, check};

/// Gymnasium's `Box(low, high, dtype=np.float32)` of one dimension: coordinate `i` lies
/// in `[low[i], high[i]]`, where a bound may be infinite.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSpace {
    low: Vec<f32>,
    high: Vec<f32>,
}

impl BoxSpace {
    /// The box `[low[i], high[i]]`; an error if the lengths differ, a bound is NaN or
    /// `low[i] > high[i]`.
    pub fn new(low: Vec<f32>, high: Vec<f32>) -> Result<Self> {
        check::len("BoxSpace::new", "high", low.len(), high.len())?;
        if let Some(i) =
            (0..low.len()).find(|&i| low[i].is_nan() || high[i].is_nan() || low[i] > high[i])
        {
            return Err(Error::value(
                "BoxSpace::new",
                "high",
                format_args!("high[{i}] >= low[{i}] = {}, both not NaN", low[i]),
                high[i],
            ));
        }
        Ok(Self { low, high })
    }

    /// The symmetric box `[-high[i], high[i]]`, as Gymnasium's classic-control
    /// environments build theirs.
    pub(crate) fn symmetric(high: &[f32]) -> Self {
        Self {
            low: high.iter().map(|&h| -h).collect(),
            high: high.to_vec(),
        }
    }

    /// The lower bounds.
    pub fn low(&self) -> &[f32] {
        &self.low
    }

    /// The upper bounds.
    pub fn high(&self) -> &[f32] {
        &self.high
    }

    /// The number of coordinates.
    pub fn dim(&self) -> usize {
        self.low.len()
    }

    /// Whether `x` has `dim()` coordinates, each in its interval (NaN is in none).
    pub fn contains(&self, x: &[f32]) -> bool {
        x.len() == self.dim()
            && x.iter()
                .zip(self.low.iter().zip(&self.high))
                .all(|(&v, (&lo, &hi))| lo <= v && v <= hi)
    }
}

/// Gymnasium's `Discrete(n)`: the actions `0, 1, ..., n - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discrete {
    n: usize,
}

impl Discrete {
    /// `Discrete(n)`; an error for `n = 0`.
    pub fn new(n: usize) -> Result<Self> {
        if n == 0 {
            return Err(Error::value("Discrete::new", "n", "n >= 1", n));
        }
        Ok(Self { n })
    }

    /// The number of actions.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Whether `action < n`.
    pub fn contains(&self, action: usize) -> bool {
        action < self.n
    }
}

/// The action space of an environment.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ActionSpace {
    /// One of `n` actions, passed as a one-element `&[usize]`.
    Discrete(Discrete),
    /// A vector of `dim` f32 coordinates.
    Box(BoxSpace),
}

impl ActionSpace {
    /// The number of elements of one action: 1 for `Discrete`, `dim` for `Box`.
    pub fn action_len(&self) -> usize {
        match self {
            Self::Discrete(_) => 1,
            Self::Box(space) => space.dim(),
        }
    }
}

/// The element type of an action vector: `usize` for a [`Discrete`] space, `f32` for a
/// [`BoxSpace`]. `check` is how every environment and the vector wrapper validate an
/// action before they touch any state.
pub trait ActionElement: Copy + Debug + PartialEq {
    /// Checks one environment's `action` against `space`, naming `function` and the
    /// argument `action` in the error.
    fn check(space: &ActionSpace, function: &'static str, action: &[Self]) -> Result<()>;
}

/// A discrete action is one index below `n`.
impl ActionElement for usize {
    fn check(space: &ActionSpace, function: &'static str, action: &[Self]) -> Result<()> {
        let ActionSpace::Discrete(space) = space else {
            return Err(Error::value(
                function,
                "action",
                "f32 elements for a Box action space",
                "usize elements",
            ));
        };
        check::len(function, "action", 1, action.len())?;
        if space.contains(action[0]) {
            Ok(())
        } else {
            Err(Error::out_of_range(
                function,
                "action",
                format_args!("an action in 0..{}", space.n()),
                action[0],
            ))
        }
    }
}

/// A box action has `dim` elements, none of them NaN. Values outside the bounds pass:
/// the environment decides, as Gymnasium's do (Pendulum clips its torque).
impl ActionElement for f32 {
    fn check(space: &ActionSpace, function: &'static str, action: &[Self]) -> Result<()> {
        let ActionSpace::Box(space) = space else {
            return Err(Error::value(
                function,
                "action",
                "usize elements for a Discrete action space",
                "f32 elements",
            ));
        };
        check::len(function, "action", space.dim(), action.len())?;
        match action.iter().position(|v| v.is_nan()) {
            Some(index) => Err(Error::NonFinite {
                function,
                argument: "action",
                index,
                value: f64::NAN,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_space_checks_its_bounds() {
        assert!(BoxSpace::new(vec![0.0], vec![1.0, 2.0]).is_err());
        assert!(BoxSpace::new(vec![1.0], vec![0.0]).is_err());
        assert!(BoxSpace::new(vec![f32::NAN], vec![0.0]).is_err());
        let space = BoxSpace::new(vec![-1.0, f32::NEG_INFINITY], vec![1.0, f32::INFINITY]).unwrap();
        assert!(space.contains(&[1.0, -1e30]));
        assert!(!space.contains(&[1.5, 0.0]));
        assert!(!space.contains(&[f32::NAN, 0.0]));
        assert!(!space.contains(&[0.0]));
        assert_eq!(
            BoxSpace::symmetric(&[2.0]),
            BoxSpace::new(vec![-2.0], vec![2.0]).unwrap()
        );
    }

    #[test]
    fn actions_are_checked_against_their_space() {
        let discrete = ActionSpace::Discrete(Discrete::new(2).unwrap());
        let torque = ActionSpace::Box(BoxSpace::symmetric(&[2.0]));
        assert!(Discrete::new(0).is_err());
        assert!(usize::check(&discrete, "f", &[1]).is_ok());
        let err = usize::check(&discrete, "f", &[2]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: argument `action` is out of range: expected an action in 0..2, got 2"
        );
        assert!(usize::check(&discrete, "f", &[0, 1]).is_err());
        assert!(usize::check(&discrete, "f", &[]).is_err());
        assert!(usize::check(&torque, "f", &[0]).is_err());
        assert!(f32::check(&torque, "f", &[5.0]).is_ok());
        assert!(f32::check(&torque, "f", &[f32::INFINITY]).is_ok());
        assert!(f32::check(&torque, "f", &[f32::NAN]).is_err());
        assert!(f32::check(&torque, "f", &[0.0, 0.0]).is_err());
        assert!(f32::check(&discrete, "f", &[0.0]).is_err());
        assert_eq!(discrete.action_len(), 1);
        assert_eq!(torque.action_len(), 1);
    }
}
