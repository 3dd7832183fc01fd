//! Gradients of a named parameter list, reduced over microbatches across ranks, ready for
//! the `rlgrad-optim` engine.

use std::marker::PhantomData;
use std::ops::Range;

use rlgrad_core::{Error, Float, Result};

use crate::collective::Collective;
use crate::params::{ParamSpec, check_same_params};
use crate::reduce::all_reduce_with;
use crate::tree::{Route, owned_range};

/// What the reduced gradient is: the sum of the microbatch gradients, or their mean
/// (the sum divided by the microbatch count, after the tree, in the element type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// `sum_i g_i`: each microbatch gradient is already scaled for the global batch.
    Sum,
    /// `(sum_i g_i) / M`: each microbatch gradient is the mean over its (equal-sized)
    /// microbatch, so this is the gradient of the mean over the global batch.
    Mean,
}

/// The data-parallel gradient step: the gradients of `M` microbatches (the global batch,
/// split by a microbatch size you pick independently of the world size) summed in the
/// canonical tree, on every rank, with the same bits for any number of ranks and as
/// gradient accumulation on one worker (see the [crate docs](crate)).
///
/// Each rank computes the gradients of the microbatches it owns
/// ([`GradientReducer::owned`]); [`GradientReducer::reduce`] asks for them in increasing
/// order and returns the reduced gradients by parameter name, what
/// `rlgrad_optim::Optimizer::step` takes as `grad`, so the optimizer steps on them
/// unchanged and every rank's parameters stay bit-identical. The first `reduce` checks
/// that every rank has the same parameter list ([`check_same_params`]).
///
/// ```
/// use rlgrad_dist::{GradientReducer, Local, ParamSpec, Scale};
/// use std::time::Duration;
/// // Loss of microbatch i: (w - i)^2 summed over w's two values; its gradient 2 (w - i).
/// let w = [0.5f32, -1.0];
/// let grads = Local::run(3, Duration::from_secs(10), |comm| {
///     let mut reducer = GradientReducer::new(vec![ParamSpec::new("w", [2])], 5, Scale::Mean)?;
///     let reduced = reducer.reduce(comm, |i| {
///         Ok(vec![w.iter().map(|&v| 2.0 * (v - i as f32)).collect()])
///     })?;
///     Ok(reduced.get("w").unwrap().to_vec())
/// })?;
/// assert_eq!(grads[0], [2.0 * (0.5 - 2.0), 2.0 * (-1.0 - 2.0)]);
/// assert!(grads.iter().all(|g| *g == grads[0]));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GradientReducer<T> {
    params: Vec<ParamSpec>,
    offsets: Vec<usize>,
    microbatches: usize,
    scale: Scale,
    groups: usize,
    checked: bool,
    element: PhantomData<T>,
}

impl<T: Float> GradientReducer<T> {
    /// A reducer for `params` (in the order the gradients come) over `microbatches`
    /// microbatches. Errors: no parameters, a repeated name, `microbatches == 0`.
    pub fn new(params: Vec<ParamSpec>, microbatches: usize, scale: Scale) -> Result<Self> {
        let function = "GradientReducer::new";
        if params.is_empty() {
            return Err(Error::empty(function, "params", "at least one parameter"));
        }
        if microbatches == 0 {
            return Err(Error::empty(
                function,
                "microbatches",
                "at least one microbatch",
            ));
        }
        for (i, p) in params.iter().enumerate() {
            if params[..i].iter().any(|q| q.name == p.name) {
                return Err(Error::value(
                    function,
                    "params",
                    "distinct names",
                    format_args!("`{}` twice", p.name),
                ));
            }
        }
        let mut offsets = Vec::with_capacity(params.len() + 1);
        let mut at = 0usize;
        offsets.push(0);
        for p in &params {
            at = at.checked_add(p.len()).ok_or_else(|| {
                Error::out_of_range(function, "params", "a total size that fits usize", "more")
            })?;
            offsets.push(at);
        }
        Ok(Self {
            params,
            offsets,
            microbatches,
            scale,
            groups: 1,
            checked: false,
            element: PhantomData,
        })
    }

    /// The parameters, in order.
    pub fn params(&self) -> &[ParamSpec] {
        &self.params
    }

    /// The number of microbatches of a step.
    pub fn microbatches(&self) -> usize {
        self.microbatches
    }

    /// Gradient accumulation in `groups` sequential groups per rank: each rank's
    /// microbatches are split as `groups` virtual workers would own them
    /// ([`owned_range`] of its range), each group's subtree roots are reduced, and the
    /// roots join those of the groups before as soon as the canonical tree allows. The
    /// bits are those of any other grouping and world size; so one worker with
    /// `groups = K` reduces as `K` workers would, group by group (default 1: the rank's
    /// range at once). An error for `groups == 0`.
    pub fn with_groups(mut self, groups: usize) -> Result<Self> {
        if groups == 0 {
            return Err(Error::value(
                "GradientReducer::with_groups",
                "groups",
                "at least 1",
                0,
            ));
        }
        self.groups = groups;
        Ok(self)
    }

    /// The microbatches whose gradients this rank computes: [`owned_range`] of its rank.
    pub fn owned<C: Collective + ?Sized>(&self, comm: &C) -> Result<Range<usize>> {
        owned_range(self.microbatches, comm.size(), comm.rank())
    }

    /// One step's reduced gradients. `grad_of(i)` returns the gradients of microbatch `i`,
    /// one vector per parameter in the order of [`GradientReducer::params`]; it is called
    /// for this rank's microbatches only, in increasing order.
    ///
    /// Errors: `grad_of`'s errors; a wrong number of gradients or a gradient of the wrong
    /// length (naming the parameter and the microbatch); at the first call, ranks whose
    /// parameter lists differ (naming the rank and the parameter); the backend's errors.
    pub fn reduce<C, F>(&mut self, comm: &C, mut grad_of: F) -> Result<ReducedGradients<T>>
    where
        C: Collective + ?Sized,
        F: FnMut(usize) -> Result<Vec<Vec<T>>>,
    {
        let function = "GradientReducer::reduce";
        if !self.checked {
            check_same_params(comm, &self.params, T::DTYPE).map_err(|e| e.in_function(function))?;
            self.checked = true;
        }
        let total = *self.offsets.last().expect("offsets start at 0");
        let params = &self.params;
        let mut flat_of = |i: usize| -> Result<Vec<T>> {
            let grads = grad_of(i)?;
            if grads.len() != params.len() {
                return Err(Error::shape(
                    function,
                    "grad_of",
                    format_args!("one gradient per parameter ({})", params.len()),
                    format_args!("{} for microbatch {i}", grads.len()),
                ));
            }
            let mut flat = Vec::with_capacity(total);
            for (p, g) in params.iter().zip(grads) {
                if g.len() != p.len() {
                    return Err(Error::shape(
                        function,
                        "grad_of",
                        format_args!("{} values for parameter {}", p.len(), p),
                        format_args!("{} for microbatch {i}", g.len()),
                    ));
                }
                flat.extend_from_slice(&g);
            }
            Ok(flat)
        };
        let route = Route::for_len(total, comm.size());
        let mut flat = all_reduce_with(
            comm,
            function,
            self.microbatches,
            total,
            &mut flat_of,
            route,
            self.groups,
        )?;
        if self.scale == Scale::Mean {
            let m = T::from_usize(self.microbatches);
            for v in &mut flat {
                *v = *v / m;
            }
        }
        Ok(ReducedGradients {
            names: self.params.iter().map(|p| p.name.clone()).collect(),
            offsets: self.offsets.clone(),
            flat,
        })
    }
}

/// Reduced gradients by parameter name, the same on every rank.
#[derive(Debug, Clone, PartialEq)]
pub struct ReducedGradients<T> {
    names: Vec<String>,
    offsets: Vec<usize>,
    flat: Vec<T>,
}

impl<T> ReducedGradients<T> {
    /// The gradient of the parameter named `name`.
    pub fn get(&self, name: &str) -> Option<&[T]> {
        let i = self.names.iter().position(|n| n == name)?;
        Some(&self.flat[self.offsets[i]..self.offsets[i + 1]])
    }

    /// `(name, gradient)` for every parameter, in the reducer's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[T])> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), &self.flat[self.offsets[i]..self.offsets[i + 1]]))
    }

    /// Every gradient, concatenated in the reducer's order.
    pub fn as_flat(&self) -> &[T] {
        &self.flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Local;

    #[test]
    fn bad_gradients_name_the_parameter_and_microbatch() {
        let specs = || vec![ParamSpec::new("a", [2]), ParamSpec::new("b", [1])];
        let err = Local::run(2, Local::DEFAULT_TIMEOUT, |c| {
            let mut r = GradientReducer::<f32>::new(specs(), 4, Scale::Sum)?;
            r.reduce(c, |i| {
                Ok(vec![vec![0.0; 2], vec![0.0; if i == 2 { 2 } else { 1 }]])
            })
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("1 values for parameter `b` [1], got 2 for microbatch 2"),
            "{err}"
        );
        assert!(GradientReducer::<f32>::new(specs(), 0, Scale::Sum).is_err());
        assert!(GradientReducer::<f32>::new(Vec::new(), 1, Scale::Sum).is_err());
        let twice = vec![ParamSpec::new("a", [2]), ParamSpec::new("a", [1])];
        assert!(GradientReducer::<f32>::new(twice, 1, Scale::Sum).is_err());
    }

    #[test]
    fn groups_change_no_bit() {
        let specs = || vec![ParamSpec::new("w", [3])];
        let grad = |i: usize| vec![(0..3).map(|j| ((i * 7 + j) as f32 * 0.91).sin()).collect()];
        let reduce = |workers: usize, groups: usize| {
            Local::run(workers, Local::DEFAULT_TIMEOUT, |c| {
                let mut r =
                    GradientReducer::<f32>::new(specs(), 13, Scale::Mean)?.with_groups(groups)?;
                Ok(r.reduce(c, |i| Ok(grad(i)))?
                    .as_flat()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>())
            })
            .unwrap()
        };
        let one = reduce(1, 1);
        for (workers, groups) in [(1, 4), (1, 3), (1, 13), (1, 20), (2, 3), (3, 2)] {
            assert!(
                reduce(workers, groups).iter().all(|g| *g == one[0]),
                "W={workers} groups={groups}"
            );
        }
        let err = GradientReducer::<f32>::new(specs(), 1, Scale::Sum)
            .unwrap()
            .with_groups(0);
        assert_eq!(err.unwrap_err().argument(), Some("groups"));
    }

    #[test]
    fn mismatched_parameters_fail_at_the_first_step() {
        let err = Local::run(3, Local::DEFAULT_TIMEOUT, |c| {
            let b = if c.rank() == 1 { 5 } else { 4 };
            let mut r = GradientReducer::<f32>::new(
                vec![ParamSpec::new("w", [4, 4]), ParamSpec::new("b", [b])],
                6,
                Scale::Mean,
            )?;
            r.reduce(c, |_| Ok(vec![vec![0.0; 16], vec![0.0; b]]))
        })
        .unwrap_err();
        assert_eq!(err.function(), "GradientReducer::reduce");
        assert!(err.to_string().contains("got rank 1's `b` [5]"), "{err}");
    }
}
