//! The all-reduce of per-microbatch vectors in the canonical tree.

use rlgrad_core::{Error, Float, Result};

use crate::collective::Collective;
use crate::tree::{
    Roots, Route, add_into, all_reduce_roots, evaluate, owned_range, push_node, subtree_roots,
};

/// The sum over `i` in `0..microbatches` of `leaf(i)` (vectors of `len` values) in the
/// canonical tree over microbatch indices, on every rank: the same bits for every world
/// size, and equal to gradient accumulation on one worker (`comm.size() == 1`) and to
/// [`rlgrad_core::reduce::tree_reduce`] of the element-wise sum over the microbatches.
///
/// Each rank calls `leaf` only for the microbatches it owns, [`owned_range`]`(microbatches,
/// size, rank)`, in increasing order, and keeps at most `log2` of their count partial sums
/// alive. Every rank must call it with the same `microbatches` and `len` (an error naming
/// the rank otherwise).
///
/// Errors: `microbatches == 0`; a `leaf` whose length is not `len` (naming the
/// microbatch); the errors of `leaf` itself; the backend's errors (a dead rank, a timeout).
///
/// ```
/// use rlgrad_dist::{Local, all_reduce};
/// use std::time::Duration;
/// let microbatch = |i: usize| vec![0.1f32 * i as f32, 1.0];
/// let on = |workers| {
///     Local::run(workers, Duration::from_secs(10), |comm| {
///         all_reduce(comm, 7, 2, |i| Ok(microbatch(i)))
///     })
/// };
/// let one = on(1)?.remove(0);
/// for workers in 2..=4 {
///     for sum in on(workers)? {
///         assert_eq!(sum.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
///                    one.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
///     }
/// }
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn all_reduce<T, C, F>(comm: &C, microbatches: usize, len: usize, mut leaf: F) -> Result<Vec<T>>
where
    T: Float,
    C: Collective + ?Sized,
    F: FnMut(usize) -> Result<Vec<T>>,
{
    let function = "all_reduce";
    all_reduce_with(
        comm,
        function,
        microbatches,
        len,
        &mut leaf,
        Route::for_len(len, comm.size()),
        1,
    )
}

pub(crate) fn all_reduce_with<T, C>(
    comm: &C,
    function: &'static str,
    microbatches: usize,
    len: usize,
    leaf: &mut dyn FnMut(usize) -> Result<Vec<T>>,
    route: Route,
    groups: usize,
) -> Result<Vec<T>>
where
    T: Float,
    C: Collective + ?Sized,
{
    if microbatches == 0 {
        return Err(Error::empty(
            function,
            "microbatches",
            "at least one microbatch",
        ));
    }
    let mine = owned_range(microbatches, comm.size(), comm.rank())?;
    let mut checked_leaf = |i: usize| -> Result<Vec<T>> {
        let v = leaf(i)?;
        if v.len() != len {
            return Err(Error::shape(
                function,
                "leaf",
                format_args!("{len} values for every microbatch"),
                format_args!("{} for microbatch {i}", v.len()),
            ));
        }
        Ok(v)
    };
    // Group g is what virtual worker g of `groups` would own of this rank's range; the
    // roots of each group join those before as the tree allows, so what stays alive
    // between groups is a few roots, never a group's leaves.
    let mut roots = Vec::new();
    for g in 0..groups {
        let part = owned_range(mine.len(), groups, g)?;
        let group = mine.start + part.start..mine.start + part.end;
        for node in subtree_roots(microbatches, group) {
            let value = evaluate(node.clone(), &mut checked_leaf, &mut add_into)?;
            push_node(microbatches, &mut roots, node, value, &mut add_into);
        }
    }
    all_reduce_roots(
        comm,
        function,
        Roots {
            items: microbatches,
            len,
            roots,
        },
        route,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Local;
    use rlgrad_core::{Par, reduce};

    fn bits(x: &[f32]) -> Vec<u32> {
        x.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn both_routes_give_the_bits_of_core_tree_reduce() {
        let len = 37;
        let leaf = |i: usize| -> Vec<f32> {
            (0..len)
                .map(|j| ((i * 31 + j) as f32 * 0.731).sin() * 10f32.powi((j % 7) as i32 - 3))
                .collect()
        };
        for microbatches in [1, 2, 3, 5, 8, 12, 13] {
            let expected = reduce::tree_reduce(microbatches, Par::Seq, leaf, add_into).unwrap();
            for workers in 1..=5 {
                for route in [Route::Sharded, Route::Replicated] {
                    for groups in [1, 2, 3, 4] {
                        let out = Local::run(workers, Local::DEFAULT_TIMEOUT, |c| {
                            let mut leaf = |i| Ok(leaf(i));
                            all_reduce_with(c, "t", microbatches, len, &mut leaf, route, groups)
                        })
                        .unwrap();
                        for got in out {
                            assert_eq!(
                                bits(&got),
                                bits(&expected),
                                "M={microbatches} W={workers} {route:?} groups={groups}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn leaves_are_computed_only_by_their_owner() {
        let out = Local::run(3, Local::DEFAULT_TIMEOUT, |c| {
            let mut seen = Vec::new();
            all_reduce(c, 8, 1, |i| {
                seen.push(i);
                Ok(vec![1.0f64])
            })?;
            Ok(seen)
        })
        .unwrap();
        assert_eq!(out, [vec![0, 1], vec![2, 3, 4], vec![5, 6, 7]]);
    }

    #[test]
    fn bad_input_is_an_error() {
        let short = std::time::Duration::from_secs(5);
        let err = Local::run(2, short, |c| all_reduce(c, 0, 1, |_| Ok(vec![0.0f32]))).unwrap_err();
        assert_eq!(err.argument(), Some("microbatches"));
        let err = Local::run(2, short, |c| {
            all_reduce(c, 4, 2, |i| Ok(vec![0.0f32; if i == 3 { 1 } else { 2 }]))
        })
        .unwrap_err();
        assert!(err.to_string().contains("1 for microbatch 3"), "{err}");
        // Ranks that disagree on the microbatch count.
        let err = Local::run(2, short, |c| {
            all_reduce(c, 4 + c.rank(), 2, |_| Ok(vec![0.0f32; 2]))
        })
        .unwrap_err();
        assert!(err.to_string().contains("reduces 5 items"), "{err}");
    }
}
