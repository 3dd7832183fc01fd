//! The canonical tree over `M` items, which items a worker owns, and the distributed
//! evaluation of the tree's sum (the argument is in the [crate docs](crate)).

use std::collections::BTreeMap;
use std::ops::Range;

use rlgrad_core::{Error, Float, Result};

use crate::collective::{
    Collective, Packed, Reader, add_encoded, decode_into, put_floats, put_u64,
};

/// The largest power of two strictly below `n` (`n >= 2`): where the canonical tree splits
/// `n` leaves, as in [`rlgrad_core::reduce::tree_reduce`].
fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// The items of `rank` among `workers`: the contiguous range
/// `[rank * items / workers, (rank + 1) * items / workers)`, so that the ranges of ranks
/// `0..workers` cover `0..items` in order and differ in length by at most one (a rank may
/// own none when `workers > items`). Errors: `workers == 0`, `rank >= workers`.
///
/// ```
/// use rlgrad_dist::owned_range;
/// let ranges: Vec<_> = (0..3).map(|r| owned_range(8, 3, r)).collect::<Result<_, _>>()?;
/// assert_eq!(ranges, [0..2, 2..5, 5..8]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn owned_range(items: usize, workers: usize, rank: usize) -> Result<Range<usize>> {
    let function = "owned_range";
    if workers == 0 {
        return Err(Error::value(function, "workers", "at least one worker", 0));
    }
    if rank >= workers {
        return Err(Error::out_of_range(
            function,
            "rank",
            format_args!("a rank below workers = {workers}"),
            rank,
        ));
    }
    let bound = |r: usize| (r as u128 * items as u128 / workers as u128) as usize;
    Ok(bound(rank)..bound(rank + 1))
}

/// The maximal nodes of the canonical tree over `0..items` that lie inside `range`, left to
/// right: the subtrees a worker owning `range` reduces and sends. They partition `range`;
/// there are at most two per level of the tree, `O(log items)` in all, and exactly one when
/// `range` is itself a node (a power-of-two-aligned range, or everything).
///
/// The canonical tree over leaves `[lo, hi)` splits at `lo + p`, `p` the largest power of
/// two below `hi - lo`, as [`rlgrad_core::reduce::tree_reduce`] does.
///
/// ```
/// use rlgrad_dist::subtree_roots;
/// assert_eq!(subtree_roots(8, 0..8), [0..8]);
/// assert_eq!(subtree_roots(8, 1..7), [1..2, 2..4, 4..6, 6..7]);
/// assert_eq!(subtree_roots(6, 2..6), [2..4, 4..6]); // the tree of 6 is (4, 2)
/// ```
pub fn subtree_roots(items: usize, range: Range<usize>) -> Vec<Range<usize>> {
    fn walk(node: Range<usize>, range: &Range<usize>, out: &mut Vec<Range<usize>>) {
        if node.end <= range.start || range.end <= node.start || node.is_empty() {
            return;
        }
        if range.start <= node.start && node.end <= range.end {
            out.push(node);
            return;
        }
        let mid = node.start + split_point(node.len());
        walk(node.start..mid, range, out);
        walk(mid..node.end, range, out);
    }
    let mut out = Vec::new();
    let range = range.start.min(items)..range.end.min(items);
    walk(0..items, &range, &mut out);
    out
}

/// The value of the canonical subtree `node`: `leaf(i)` for its leaves, called in
/// increasing `i`, combined by `combine(left, right)` bottom-up. At most `log2(len)`
/// partial values are alive at once.
pub(crate) fn evaluate<V>(
    node: Range<usize>,
    leaf: &mut dyn FnMut(usize) -> Result<V>,
    combine: &mut dyn FnMut(V, V) -> V,
) -> Result<V> {
    debug_assert!(!node.is_empty());
    if node.len() == 1 {
        return leaf(node.start);
    }
    let mid = node.start + split_point(node.len());
    let left = evaluate(node.start..mid, leaf, combine)?;
    let right = evaluate(mid..node.end, leaf, combine)?;
    Ok(combine(left, right))
}

/// Whether `range` is a node of the canonical tree over `0..items`.
fn is_node(items: usize, range: &Range<usize>) -> bool {
    let mut node = 0..items;
    loop {
        if node == *range {
            return true;
        }
        if node.len() < 2 {
            return false;
        }
        let mid = node.start + split_point(node.len());
        if range.end <= mid {
            node = node.start..mid;
        } else if range.start >= mid {
            node = mid..node.end;
        } else {
            return false;
        }
    }
}

/// Pushes the value of node `node` onto `stack`, a left-to-right run of adjacent nodes of
/// the canonical tree over `0..items`, and replaces the top two by their parent
/// (`combine(left, right)`) for as long as they are a node's two children: the tree's
/// additions above the pushed nodes, made as soon as both operands exist. Nodes are
/// nested or disjoint, so two adjacent nodes whose union is a node are its children.
/// Pushing the subtree roots of consecutive ranges leaves the roots of their union, and
/// the stack never holds more than two nodes per level of the tree.
pub(crate) fn push_node<V>(
    items: usize,
    stack: &mut Vec<(Range<usize>, V)>,
    node: Range<usize>,
    value: V,
    combine: &mut dyn FnMut(V, V) -> V,
) {
    stack.push((node, value));
    while let [.., (left, _), (right, _)] = stack.as_slice() {
        let parent = left.start..right.end;
        if left.end != right.start || !is_node(items, &parent) {
            break;
        }
        let (_, right) = stack.pop().expect("two nodes");
        let (_, left) = stack.pop().expect("two nodes");
        stack.push((parent, combine(left, right)));
    }
}

/// `left += right`, element by element: the combine of vectors in the canonical tree.
pub(crate) fn add_into<T: Float>(mut left: Vec<T>, right: Vec<T>) -> Vec<T> {
    for (l, r) in left.iter_mut().zip(right) {
        *l = *l + r;
    }
    left
}

/// How the subtree roots travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// All-to-all of shards, each owner combines its shard, all-gather of the shards:
    /// about `2 * len` values sent per worker when its range is one subtree.
    Sharded,
    /// All-gather of whole roots, every rank combines everything: for short vectors
    /// (statistics), where one round of small messages beats two.
    Replicated,
}

impl Route {
    /// Sharding pays once each rank's shard holds this many values.
    const MIN_SHARD: usize = 1024;

    pub(crate) fn for_len(len: usize, workers: usize) -> Self {
        if len >= Self::MIN_SHARD * workers {
            Route::Sharded
        } else {
            Route::Replicated
        }
    }
}

/// The values at the roots of one rank's subtrees, each of length `len`.
pub(crate) struct Roots<T> {
    pub(crate) items: usize,
    pub(crate) len: usize,
    pub(crate) roots: Vec<(Range<usize>, Vec<T>)>,
}

/// The subtree roots of `roots.items` items every rank owns a contiguous range of,
/// evaluated and then reduced over all ranks: the canonical tree's sum over every item,
/// identical on every rank and for every world size.
pub(crate) fn all_reduce_roots<T: Float, C: Collective + ?Sized>(
    comm: &C,
    function: &'static str,
    roots: Roots<T>,
    route: Route,
) -> Result<Vec<T>> {
    let workers = comm.size();
    if workers == 1 {
        // One rank's roots cover every item: the tree above them needs no exchange.
        let mut pieces = BTreeMap::new();
        for (range, values) in roots.roots {
            pieces.insert(range.start, (range.end, Piece::Owned(values)));
        }
        return assemble(function, roots.items, pieces);
    }
    let (items, len) = (roots.items, roots.len);
    match route {
        Route::Replicated => {
            let mut message = Vec::new();
            encode(&mut message, &roots, 0..len);
            drop(roots);
            let gathered = one_per_rank(function, workers, comm.all_gather_packed(message)?)?;
            let pieces = decode_all::<T>(function, (items, len), 0..len, &gathered)?;
            assemble(function, items, pieces)
        }
        Route::Sharded => {
            let shard = |k: usize| {
                let bound = |r: usize| (r as u128 * len as u128 / workers as u128) as usize;
                bound(k)..bound(k + 1)
            };
            let width = std::mem::size_of::<T>();
            let mut outgoing = comm.message_buffer(
                workers * (24 + 16 * roots.roots.len()) + roots.roots.len() * len * width,
            );
            let mut lengths = Vec::with_capacity(workers);
            for k in 0..workers {
                let before = outgoing.len();
                encode(&mut outgoing, &roots, shard(k));
                lengths.push(outgoing.len() - before);
            }
            drop(roots);
            let incoming = one_per_rank(
                function,
                workers,
                comm.all_to_all_packed(outgoing, &lengths)?,
            )?;
            let mine = shard(comm.rank());
            let pieces = decode_all::<T>(function, (items, len), mine, &incoming)?;
            let reduced = assemble(function, items, pieces)?;
            comm.recycle(incoming.into_bytes());
            let mut message = comm.message_buffer(std::mem::size_of_val(reduced.as_slice()));
            put_floats(&mut message, &reduced);
            drop(reduced);
            let shards = one_per_rank(function, workers, comm.all_gather_packed(message)?)?;
            let mut out = vec![T::zero(); len];
            for (from, bytes) in shards.iter().enumerate() {
                let mut reader = Reader::new(bytes, function, from);
                reader.floats_into(&mut out[shard(from)])?;
                check_consumed(function, from, reader)?;
            }
            comm.recycle(shards.into_bytes());
            Ok(out)
        }
    }
}

/// `messages` when there is one per rank: a backend that returns more or fewer would
/// leave parts of the result unwritten or out of range.
fn one_per_rank(function: &'static str, workers: usize, messages: Packed) -> Result<Packed> {
    if messages.len() != workers {
        return Err(Error::Device {
            function,
            device: "collective".to_owned(),
            message: format!(
                "the backend returned {} messages for a world of {workers} ranks",
                messages.len()
            ),
        });
    }
    Ok(messages)
}

/// Appends `[items][len][count]([start][end])*count` and then each root's values in
/// `part`.
fn encode<T: Float>(out: &mut Vec<u8>, roots: &Roots<T>, part: Range<usize>) {
    put_u64(out, roots.items as u64);
    put_u64(out, roots.len as u64);
    put_u64(out, roots.roots.len() as u64);
    for (range, _) in &roots.roots {
        put_u64(out, range.start as u64);
        put_u64(out, range.end as u64);
    }
    for (_, values) in &roots.roots {
        put_floats(out, &values[part.clone()]);
    }
}

/// A subtree root's values: computed on this rank, or still encoded as another rank sent
/// them (decoded only where the tree needs a copy).
enum Piece<'a, T> {
    Owned(Vec<T>),
    Encoded(&'a [u8]),
}

/// The roots every rank sent, cut to `part`, keyed by their first item; `own` is this
/// rank's `(items, len)`, which every rank must share.
fn decode_all<'a, T: Float>(
    function: &'static str,
    own: (usize, usize),
    part: Range<usize>,
    messages: &'a Packed,
) -> Result<BTreeMap<usize, (usize, Piece<'a, T>)>> {
    let mut pieces = BTreeMap::new();
    for (from, bytes) in messages.iter().enumerate() {
        let mut reader = Reader::new(bytes, function, from);
        let (items, len) = (reader.usize()?, reader.usize()?);
        if (items, len) != own {
            return Err(Error::value(
                function,
                "microbatches",
                format_args!(
                    "the same reduction on every rank: this rank reduces {} items of {} values",
                    own.0, own.1
                ),
                format_args!("rank {from} reduces {items} items of {len} values"),
            ));
        }
        let count = reader.usize()?;
        let ranges = (0..count)
            .map(|_| Ok(reader.usize()?..reader.usize()?))
            .collect::<Result<Vec<_>>>()?;
        for range in ranges {
            let values = Piece::Encoded(reader.float_bytes::<T>(part.len())?);
            if pieces.insert(range.start, (range.end, values)).is_some() {
                return Err(overlap(function, from, range.start));
            }
        }
        check_consumed(function, from, reader)?;
    }
    Ok(pieces)
}

/// The canonical tree over `0..items` from the subtree roots in `pieces`. A right child
/// that arrived encoded is added from its bytes, so only the leftmost root is copied.
fn assemble<T: Float>(
    function: &'static str,
    items: usize,
    mut pieces: BTreeMap<usize, (usize, Piece<'_, T>)>,
) -> Result<Vec<T>> {
    fn take<'a, T>(
        range: &Range<usize>,
        pieces: &mut BTreeMap<usize, (usize, Piece<'a, T>)>,
    ) -> Option<Piece<'a, T>> {
        let matches = pieces
            .get(&range.start)
            .is_some_and(|(end, _)| *end == range.end);
        matches.then(|| pieces.remove(&range.start).expect("present").1)
    }
    fn node<T: Float>(
        function: &'static str,
        range: Range<usize>,
        pieces: &mut BTreeMap<usize, (usize, Piece<'_, T>)>,
    ) -> Result<Vec<T>> {
        match take(&range, pieces) {
            Some(Piece::Owned(values)) => return Ok(values),
            Some(Piece::Encoded(bytes)) => {
                let mut values = vec![T::zero(); bytes.len() / std::mem::size_of::<T>()];
                decode_into(&mut values, bytes);
                return Ok(values);
            }
            None => {}
        }
        if range.len() == 1 {
            return Err(Error::Device {
                function,
                device: "collective".to_owned(),
                message: format!(
                    "no rank sent item {}: the ranks disagree on the world size or on who owns what",
                    range.start
                ),
            });
        }
        let mid = range.start + split_point(range.len());
        let mut left = node(function, range.start..mid, pieces)?;
        let right = mid..range.end;
        match take(&right, pieces) {
            Some(Piece::Encoded(bytes)) => add_encoded(&mut left, bytes),
            Some(Piece::Owned(values)) => left = add_into(left, values),
            None => left = add_into(left, node(function, right, pieces)?),
        }
        Ok(left)
    }
    let out = node(function, 0..items, &mut pieces)?;
    match pieces.keys().next() {
        None => Ok(out),
        Some(&start) => Err(overlap(function, usize::MAX, start)),
    }
}

fn overlap(function: &'static str, from: usize, start: usize) -> Error {
    let who = if from == usize::MAX {
        "a rank".to_owned()
    } else {
        format!("rank {from}")
    };
    Error::Device {
        function,
        device: "collective".to_owned(),
        message: format!(
            "{who} sent a subtree starting at item {start} that another rank covers too: \
             the ranks disagree on the world size or on who owns what"
        ),
    }
}

fn check_consumed(function: &'static str, from: usize, reader: Reader<'_>) -> Result<()> {
    let rest = reader.rest().len();
    if rest != 0 {
        return Err(Error::Device {
            function,
            device: format!("rank {from}"),
            message: format!(
                "a message from rank {from} has {rest} bytes more than its header says \
                 (the ranks do not run the same program or the same collectives)"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlgrad_core::{Par, reduce};

    #[test]
    fn roots_partition_the_range_into_nodes_of_the_canonical_tree() {
        fn is_node(items: usize, r: &Range<usize>) -> bool {
            fn walk(node: Range<usize>, r: &Range<usize>) -> bool {
                if node == *r {
                    return true;
                }
                if node.len() < 2 || r.start < node.start || r.end > node.end {
                    return false;
                }
                let mid = node.start + split_point(node.len());
                walk(node.start..mid, r) || walk(mid..node.end, r)
            }
            walk(0..items, r)
        }
        for items in 1..40 {
            for start in 0..=items {
                for end in start..=items {
                    let roots = subtree_roots(items, start..end);
                    let mut at = start;
                    for r in &roots {
                        assert_eq!(r.start, at);
                        assert!(is_node(items, r), "{items} {r:?}");
                        at = r.end;
                    }
                    assert_eq!(at, end);
                    let levels = usize::BITS - items.leading_zeros();
                    assert!(roots.len() <= 2 * levels as usize);
                }
            }
        }
    }

    #[test]
    fn pushing_the_roots_of_groups_leaves_the_roots_of_their_union() {
        for items in 1..40 {
            for start in 0..items {
                for end in start + 1..=items {
                    for groups in 1..=(end - start).min(5) {
                        let mut stack = Vec::new();
                        for g in 0..groups {
                            let part = owned_range(end - start, groups, g).unwrap();
                            for node in subtree_roots(items, start + part.start..start + part.end) {
                                let value = node.clone();
                                push_node(items, &mut stack, node, value, &mut |l, r| {
                                    l.start..r.end
                                });
                                assert!(
                                    stack.len()
                                        <= 2 * (usize::BITS - items.leading_zeros()) as usize
                                );
                            }
                        }
                        let ranges: Vec<_> = stack.into_iter().map(|(node, _)| node).collect();
                        assert_eq!(
                            ranges,
                            subtree_roots(items, start..end),
                            "{items} {start}..{end} {groups}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn evaluate_is_core_tree_reduce() {
        for items in 1..70 {
            let leaf = |i: usize| (i as f32 * 0.37).sin() * 1e3;
            let core = reduce::tree_reduce(items, Par::Seq, leaf, |a, b| a + b).unwrap();
            let ours = evaluate(0..items, &mut |i| Ok(leaf(i)), &mut |a, b| a + b).unwrap();
            assert_eq!(core.to_bits(), ours.to_bits(), "{items}");
        }
    }

    #[test]
    fn owned_ranges_cover_in_order() {
        for items in 0..20 {
            for workers in 1..10 {
                let mut at = 0;
                for rank in 0..workers {
                    let r = owned_range(items, workers, rank).unwrap();
                    assert_eq!(r.start, at);
                    at = r.end;
                }
                assert_eq!(at, items);
            }
        }
        assert!(owned_range(4, 0, 0).is_err());
        assert_eq!(owned_range(4, 2, 2).unwrap_err().argument(), Some("rank"));
    }
}
