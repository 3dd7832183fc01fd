//! Global statistics over data spread across ranks, in the canonical order of
//! [`rlgrad_core::reduce`], whatever the spread.
//!
//! The *global array* is the concatenation of every rank's `local` slice in rank order.
//! Each function returns, on every rank, the bits that the matching single-process
//! function gives on the global array: [`global_sum`] is `reduce::sum`, [`global_mean_var`]
//! is `reduce::mean_var`, [`global_standardize`] is `rlgrad_returns::standardize` (of this
//! rank's part). So the result depends on the global array only, not on the number of
//! ranks or on where the cuts between them fall.
//!
//! How: the canonical sum splits the global array into leaves of
//! [`LEAF_LEN`](rlgrad_core::reduce::LEAF_LEN) = 64 elements, accumulates each leaf into
//! [`LANES`](rlgrad_core::reduce::LANES) = 16 lanes, combines the leaves' lanes in the
//! canonical tree and folds the root's lanes. A leaf belongs to the rank that holds its
//! first element; the at most 63 elements that a leaf reaches into the next ranks come
//! with one small all-gather (each rank's length and its first 63 elements). Then the
//! leaves are reduced like microbatches (the [crate docs](crate)'s tree argument, with a
//! vector of 16 lanes per leaf) and every rank folds the same root. Several sums ride in
//! one reduction (the tree adds element by element), so a mean and variance costs three
//! all-gathers of a few hundred bytes.
//!
//! The global array's order is yours: for the global array not to depend on the world
//! size, give each rank a contiguous block of environments (by global index) and order
//! each rank's data by environment, then by time (environment-major), as the single
//! process orders it. Episode returns: each rank's finished episodes ordered by
//! environment, then by finish step.

use rlgrad_core::reduce::{LANES, LEAF_LEN};
use rlgrad_core::{Error, Float, Result, check};

use crate::collective::{Collective, Reader, put_floats, put_u64};
use crate::tree::{Roots, Route, add_into, all_reduce_roots, evaluate, subtree_roots};

/// Where every rank's part of the global array lies, with the first elements of each
/// rank's arrays (what the leaf before them reaches into).
struct Spread<T> {
    rank: usize,
    /// Per rank: its offset in the global array, its length and the heads of its arrays.
    parts: Vec<(usize, usize, Vec<Vec<T>>)>,
    total: usize,
}

/// One all-gather of each rank's length and the first `LEAF_LEN - 1` elements of each of
/// `arrays` (all of the same length, checked by the caller).
fn spread<T: Float, C: Collective + ?Sized>(
    comm: &C,
    function: &'static str,
    arrays: &[&[T]],
) -> Result<Spread<T>> {
    let len = arrays[0].len();
    let head = len.min(LEAF_LEN - 1);
    let mut message = Vec::new();
    put_u64(&mut message, len as u64);
    put_u64(&mut message, arrays.len() as u64);
    for a in arrays {
        put_floats(&mut message, &a[..head]);
    }
    let gathered = comm.all_gather(&message)?;
    let mut parts = Vec::with_capacity(gathered.len());
    let mut total = 0usize;
    for (from, bytes) in gathered.iter().enumerate() {
        let mut reader = Reader::new(bytes, function, from);
        let (n, count) = (reader.usize()?, reader.usize()?);
        if count != arrays.len() {
            return Err(Error::Device {
                function,
                device: format!("rank {from}"),
                message: format!(
                    "rank {from} computes a statistic of {count} arrays where this rank computes one of {}: \
                     the ranks do not call the same statistics",
                    arrays.len()
                ),
                cause: None,
            });
        }
        let heads = (0..count)
            .map(|_| reader.floats::<T>(n.min(LEAF_LEN - 1)))
            .collect::<Result<Vec<_>>>()?;
        parts.push((total, n, heads));
        total = total.checked_add(n).ok_or_else(|| {
            Error::out_of_range(function, "local", "a global length that fits usize", "more")
        })?;
    }
    Ok(Spread {
        rank: comm.rank(),
        parts,
        total,
    })
}

/// One sum to compute: `map` of the elements of array `array`.
struct Column<'a, T> {
    array: usize,
    local: &'a [T],
    map: &'a dyn Fn(T) -> T,
}

/// The canonical sums (`reduce::sum_map`) over the global arrays of `columns`, in one
/// reduction.
fn sums<T: Float, C: Collective + ?Sized>(
    comm: &C,
    function: &'static str,
    spread: &Spread<T>,
    columns: &[Column<'_, T>],
) -> Result<Vec<T>> {
    if spread.total == 0 {
        return Ok(vec![T::zero(); columns.len()]);
    }
    let (offset, len, _) = &spread.parts[spread.rank];
    let (offset, len) = (*offset, *len);
    let leaves = spread.total.div_ceil(LEAF_LEN);
    let mine = if len == 0 {
        0..0
    } else {
        offset.div_ceil(LEAF_LEN)..(offset + len).div_ceil(LEAF_LEN)
    };
    // The element `g` of the global array of `column`, for `g` in a leaf this rank owns.
    let element = |column: &Column<'_, T>, g: usize| -> T {
        if g < offset + len {
            return column.local[g - offset];
        }
        let owner = spread.parts.partition_point(|(o, _, _)| *o <= g) - 1;
        let (o, n, heads) = &spread.parts[owner];
        debug_assert!(g < o + n);
        heads[column.array][g - o]
    };
    let mut leaf = |j: usize| -> Result<Vec<T>> {
        let elements = j * LEAF_LEN..((j + 1) * LEAF_LEN).min(spread.total);
        let mut lanes = vec![-T::zero(); LANES * columns.len()];
        for (c, column) in columns.iter().enumerate() {
            let lanes = &mut lanes[c * LANES..(c + 1) * LANES];
            for (k, g) in elements.clone().enumerate() {
                lanes[k % LANES] = lanes[k % LANES] + (column.map)(element(column, g));
            }
        }
        Ok(lanes)
    };
    let roots = subtree_roots(leaves, mine)
        .into_iter()
        .map(|node| Ok((node.clone(), evaluate(node, &mut leaf, &mut add_into)?)))
        .collect::<Result<Vec<_>>>()?;
    let root = all_reduce_roots(
        comm,
        function,
        Roots {
            items: leaves,
            len: LANES * columns.len(),
            roots,
        },
        Route::Replicated,
    )?;
    Ok(root.chunks_exact(LANES).map(fold).collect())
}

/// The lanes of a root folded by halving, as the canonical sum does.
fn fold<T: Float>(lanes: &[T]) -> T {
    let mut l = lanes.to_vec();
    let mut width = LANES / 2;
    while width > 0 {
        for j in 0..width {
            l[j] = l[j] + l[j + width];
        }
        width /= 2;
    }
    l[0]
}

/// The canonical sum of the global array (bitwise `rlgrad_core::reduce::sum` of the
/// concatenation of every rank's `local` in rank order), on every rank. An empty global
/// array sums to `+0.0`.
///
/// ```
/// use rlgrad_core::{Par, reduce};
/// use rlgrad_dist::{Collective, Local, global_sum};
/// use std::time::Duration;
/// let x: Vec<f32> = (0..1000).map(|i| (i as f32).sqrt()).collect();
/// let sums = Local::run(3, Duration::from_secs(10), |comm| {
///     let cut = |r: usize| r * x.len() / 3;
///     global_sum(comm, &x[cut(comm.rank())..cut(comm.rank() + 1)])
/// })?;
/// for s in sums {
///     assert_eq!(s.to_bits(), reduce::sum(&x, Par::Seq).to_bits());
/// }
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn global_sum<T: Float, C: Collective + ?Sized>(comm: &C, local: &[T]) -> Result<T> {
    let function = "global_sum";
    let spread = spread(comm, function, &[local])?;
    let column = Column {
        array: 0,
        local,
        map: &|v| v,
    };
    Ok(sums(comm, function, &spread, &[column])?[0])
}

/// The canonical mean of the global array (bitwise `rlgrad_core::reduce::mean` of the
/// concatenation): for example the mean episode return over every worker's finished
/// episodes. An error when the global array is empty (on every rank).
pub fn global_mean<T: Float, C: Collective + ?Sized>(comm: &C, local: &[T]) -> Result<T> {
    let function = "global_mean";
    let spread = spread(comm, function, &[local])?;
    if spread.total == 0 {
        return Err(Error::empty(
            function,
            "local",
            "at least one element on some rank",
        ));
    }
    let column = Column {
        array: 0,
        local,
        map: &|v| v,
    };
    Ok(sums(comm, function, &spread, &[column])?[0] / T::from_usize(spread.total))
}

/// The canonical mean and two-pass variance `sum((x - mean)^2) / (n - ddof)` of the global
/// array (bitwise `rlgrad_core::reduce::mean_var` of the concatenation). An error when the
/// global length `n <= ddof`.
pub fn global_mean_var<T: Float, C: Collective + ?Sized>(
    comm: &C,
    local: &[T],
    ddof: usize,
) -> Result<(T, T)> {
    let function = "global_mean_var";
    let spread = spread(comm, function, &[local])?;
    mean_var(comm, function, &spread, local, 0, ddof)
}

fn mean_var<T: Float, C: Collective + ?Sized>(
    comm: &C,
    function: &'static str,
    spread: &Spread<T>,
    local: &[T],
    array: usize,
    ddof: usize,
) -> Result<(T, T)> {
    let n = spread.total;
    if n <= ddof {
        return Err(Error::empty(
            function,
            "local",
            format_args!("more than ddof = {ddof} elements over all ranks, got {n}"),
        ));
    }
    let identity = |v: T| v;
    let sum = sums(
        comm,
        function,
        spread,
        &[Column {
            array,
            local,
            map: &identity,
        }],
    )?[0];
    let mean = sum / T::from_usize(n);
    let square = |v: T| (v - mean) * (v - mean);
    let ss = sums(
        comm,
        function,
        spread,
        &[Column {
            array,
            local,
            map: &square,
        }],
    )?[0];
    Ok((mean, ss / T::from_usize(n - ddof)))
}

/// This rank's part of the standardized global array, `(x - mean) / (std + eps)` with the
/// global mean and `std = sqrt(sum((x - mean)^2) / (n - ddof))`: bitwise this rank's part
/// of `rlgrad_returns::standardize(global, eps, ddof)`, the advantage normalization of a
/// single-process run over the whole batch. An empty global array gives an empty result.
/// Errors: `eps` negative or not finite; a non-empty global array with `n <= ddof`.
///
/// ```
/// use rlgrad_dist::{Collective, Local, global_standardize};
/// use std::time::Duration;
/// let adv: Vec<f64> = (0..10).map(|i| (i * i) as f64).collect();
/// let parts = Local::run(4, Duration::from_secs(10), |comm| {
///     let cut = |r: usize| r * adv.len() / 4;
///     global_standardize(comm, &adv[cut(comm.rank())..cut(comm.rank() + 1)], 1e-8, 1)
/// })?;
/// let whole: Vec<f64> = parts.concat();
/// assert_eq!(whole, rlgrad_returns::standardize(&adv, 1e-8, 1)?);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn global_standardize<T: Float, C: Collective + ?Sized>(
    comm: &C,
    local: &[T],
    eps: T,
    ddof: usize,
) -> Result<Vec<T>> {
    let function = "global_standardize";
    check::non_negative(function, "eps", eps.as_f64())?;
    let spread = spread(comm, function, &[local])?;
    if spread.total == 0 {
        return Ok(Vec::new());
    }
    let (mean, var) = mean_var(comm, function, &spread, local, 0, ddof)?;
    let denominator = var.sqrt() + eps;
    Ok(local.iter().map(|&v| (v - mean) / denominator).collect())
}

/// The explained variance of a value function over the global arrays,
/// `1 - var(target - predicted) / var(target)` (population variances, as
/// Stable-Baselines3's `explained_variance` and CleanRL compute it), NaN when
/// `var(target) == 0`. Each variance is the canonical two-pass one of
/// [`global_mean_var`]; the differences are `target - predicted` element by element.
/// Errors: `predicted` and `target` of different lengths; empty global arrays.
pub fn global_explained_variance<T: Float, C: Collective + ?Sized>(
    comm: &C,
    predicted: &[T],
    target: &[T],
) -> Result<T> {
    let function = "global_explained_variance";
    check::len(function, "predicted", target.len(), predicted.len())?;
    let diff: Vec<T> = target.iter().zip(predicted).map(|(&t, &p)| t - p).collect();
    let spread = spread(comm, function, &[target, &diff])?;
    let n = spread.total;
    if n == 0 {
        return Err(Error::empty(
            function,
            "target",
            "at least one element on some rank",
        ));
    }
    let identity = |v: T| v;
    let means: Vec<T> = sums(
        comm,
        function,
        &spread,
        &[
            Column {
                array: 0,
                local: target,
                map: &identity,
            },
            Column {
                array: 1,
                local: &diff,
                map: &identity,
            },
        ],
    )?
    .into_iter()
    .map(|s| s / T::from_usize(n))
    .collect();
    let (mt, md) = (means[0], means[1]);
    let square_t = |v: T| (v - mt) * (v - mt);
    let square_d = |v: T| (v - md) * (v - md);
    let ss = sums(
        comm,
        function,
        &spread,
        &[
            Column {
                array: 0,
                local: target,
                map: &square_t,
            },
            Column {
                array: 1,
                local: &diff,
                map: &square_d,
            },
        ],
    )?;
    let (var_t, var_d) = (ss[0] / T::from_usize(n), ss[1] / T::from_usize(n));
    if var_t == T::zero() {
        return Ok(T::nan());
    }
    Ok(T::one() - var_d / var_t)
}
