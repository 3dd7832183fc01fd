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
    add_assign(&mut left, &right);
    left
}

/// `left[i] = left[i] + right[i]` for every `i`.
fn add_assign<T: Float>(left: &mut [T], right: &[T]) {
    for (l, r) in left.iter_mut().zip(right) {
        *l = *l + *r;
    }
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
///
/// The tree above the roots is evaluated block by block ([`Plan`]), reading every root
/// once where it lies (this rank's own vectors, the others' in the bytes received) and
/// writing each block of the sum once; a large result is written into this rank's first
/// root, whose pages are mapped already.
pub(crate) fn all_reduce_roots<T: Float, C: Collective + ?Sized>(
    comm: &C,
    function: &'static str,
    roots: Roots<T>,
    route: Route,
) -> Result<Vec<T>> {
    let (workers, rank) = (comm.size(), comm.rank());
    let Roots {
        items,
        len,
        roots: mut own,
    } = roots;
    if workers == 1 {
        // One rank's roots cover every item: the tree above them needs no exchange, and
        // when they are one root (what `push_node` leaves) it is the sum.
        if let [(range, _)] = own.as_slice()
            && *range == (0..items)
        {
            return Ok(own.pop().expect("one root").1);
        }
        return Sources::new(function, rank, (items, len), &own, 0..len, None)?.collect();
    }
    match route {
        Route::Replicated => {
            let mut message = Vec::new();
            encode(&mut message, (items, len), &own, 0..len);
            let gathered = one_per_rank(function, workers, comm.all_gather_packed(message)?)?;
            Sources::new(function, rank, (items, len), &own, 0..len, Some(&gathered))?.collect()
        }
        Route::Sharded => {
            let shard = |k: usize| {
                let bound = |r: usize| (r as u128 * len as u128 / workers as u128) as usize;
                bound(k)..bound(k + 1)
            };
            let mine = shard(rank);
            let width = std::mem::size_of::<T>();
            // This rank's own shard stays where it is; every other rank gets its shard
            // of each root.
            let mut outgoing = comm.message_buffer(
                (workers - 1) * (24 + 16 * own.len()) + own.len() * (len - mine.len()) * width,
            );
            let mut lengths = Vec::with_capacity(workers);
            for k in 0..workers {
                let before = outgoing.len();
                if k != rank {
                    encode(&mut outgoing, (items, len), &own, shard(k));
                }
                lengths.push(outgoing.len() - before);
            }
            let incoming = one_per_rank(
                function,
                workers,
                comm.all_to_all_packed(outgoing, &lengths)?,
            )?;
            let sources = Sources::new(
                function,
                rank,
                (items, len),
                &own,
                mine.clone(),
                Some(&incoming),
            )?;
            let mut message = comm.message_buffer(mine.len() * width);
            sources.sum(&mut |block| put_floats(&mut message, block))?;
            comm.recycle(incoming.into_bytes());
            let shards = one_per_rank(function, workers, comm.all_gather_packed(message)?)?;
            // The sum goes into this rank's first root, whose pages are mapped already.
            let mut out = if own.is_empty() {
                vec![T::zero(); len]
            } else {
                own.swap_remove(0).1
            };
            drop(own);
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
            cause: None,
        });
    }
    Ok(messages)
}

/// Appends `[items][len][count]([start][end])*count` and then each root's values in
/// `part`; `shape` is `(items, len)`.
fn encode<T: Float>(
    out: &mut Vec<u8>,
    shape: (usize, usize),
    roots: &[(Range<usize>, Vec<T>)],
    part: Range<usize>,
) {
    put_u64(out, shape.0 as u64);
    put_u64(out, shape.1 as u64);
    put_u64(out, roots.len() as u64);
    for (range, _) in roots {
        put_u64(out, range.start as u64);
        put_u64(out, range.end as u64);
    }
    for (_, values) in roots {
        put_floats(out, &values[part.clone()]);
    }
}

/// Where a subtree root's values are, cut to the part of the vector being reduced.
enum Source<'a, T> {
    /// Computed on this rank.
    Values(&'a [T]),
    /// Encoded, as another rank sent them.
    Encoded(&'a [u8]),
}

/// The subtree roots of every rank, cut to the part being reduced: their values, and by
/// first item `(end, index into list)`.
struct Sources<'a, T> {
    function: &'static str,
    items: usize,
    part_len: usize,
    list: Vec<Source<'a, T>>,
    by_start: BTreeMap<usize, (usize, usize)>,
}

impl<'a, T: Float> Sources<'a, T> {
    /// The roots of this rank (`rank`, reducing `shape = (items, len)`), `own`, and those
    /// the other ranks sent in `received` (this rank's own message skipped), cut to `part`.
    fn new(
        function: &'static str,
        rank: usize,
        shape: (usize, usize),
        own: &'a [(Range<usize>, Vec<T>)],
        part: Range<usize>,
        received: Option<&'a Packed>,
    ) -> Result<Self> {
        let mut sources = Sources {
            function,
            items: shape.0,
            part_len: part.len(),
            list: Vec::with_capacity(own.len()),
            by_start: BTreeMap::new(),
        };
        for (range, values) in own {
            sources.insert(rank, range, Source::Values(&values[part.clone()]))?;
        }
        for (from, bytes) in received.into_iter().flat_map(Packed::iter).enumerate() {
            if from != rank {
                sources.decode(shape, part.clone(), from, bytes)?;
            }
        }
        Ok(sources)
    }

    /// The canonical tree's sum of the roots, handed to `emit` block by block, in order.
    /// Errors: roots that do not cover every item exactly once.
    fn sum(self, emit: &mut dyn FnMut(&[T])) -> Result<()> {
        Plan::new(self.function, self.items, self.by_start)?.run(&self.list, self.part_len, emit);
        Ok(())
    }

    /// [`Sources::sum`] in a new vector.
    fn collect(self) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.part_len);
        self.sum(&mut |block| out.extend_from_slice(block))?;
        Ok(out)
    }

    fn insert(&mut self, from: usize, range: &Range<usize>, source: Source<'a, T>) -> Result<()> {
        if self
            .by_start
            .insert(range.start, (range.end, self.list.len()))
            .is_some()
        {
            return Err(overlap(self.function, from, range.start));
        }
        self.list.push(source);
        Ok(())
    }

    /// Adds the roots rank `from` sent in `bytes`, cut to `part`; `own` is this rank's
    /// `(items, len)`, which every rank must share.
    fn decode(
        &mut self,
        own: (usize, usize),
        part: Range<usize>,
        from: usize,
        bytes: &'a [u8],
    ) -> Result<()> {
        let function = self.function;
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
            let values = Source::Encoded(reader.float_bytes::<T>(part.len())?);
            self.insert(from, &range, values)?;
        }
        check_consumed(function, from, reader)
    }
}

/// The additions of the canonical tree over `0..items` above the subtree roots, in the
/// order of a depth-first evaluation, on `slots` blocks of values: run block by block,
/// so that each root is read once and no partial sum is a vector of its own.
struct Plan {
    ops: Vec<Op>,
    slots: usize,
}

/// One step of a [`Plan`]; `source` indexes [`Sources::list`].
#[derive(Debug, Clone, Copy)]
enum Op {
    /// `slot = source`.
    Load { slot: usize, source: usize },
    /// `slot = slot + source`.
    Add { slot: usize, source: usize },
    /// `slot = slot + (slot + 1)`.
    AddNext { slot: usize },
}

impl Plan {
    /// Values per block: the slots stay in the core's first-level cache.
    const BLOCK: usize = 2048;

    /// The plan of the canonical tree over `0..items` from the roots in `by_start`
    /// (`start -> (end, source)`), which must cover every item exactly once.
    fn new(
        function: &'static str,
        items: usize,
        mut by_start: BTreeMap<usize, (usize, usize)>,
    ) -> Result<Plan> {
        fn take(
            by_start: &mut BTreeMap<usize, (usize, usize)>,
            range: &Range<usize>,
        ) -> Option<usize> {
            let matches = by_start
                .get(&range.start)
                .is_some_and(|(end, _)| *end == range.end);
            matches.then(|| by_start.remove(&range.start).expect("present").1)
        }
        fn node(
            function: &'static str,
            range: Range<usize>,
            slot: usize,
            by_start: &mut BTreeMap<usize, (usize, usize)>,
            plan: &mut Plan,
        ) -> Result<()> {
            plan.slots = plan.slots.max(slot + 1);
            if let Some(source) = take(by_start, &range) {
                plan.ops.push(Op::Load { slot, source });
                return Ok(());
            }
            if range.len() == 1 {
                return Err(Error::Device {
                    function,
                    device: "collective".to_owned(),
                    message: format!(
                        "no rank sent item {}: the ranks disagree on the world size or on who owns what",
                        range.start
                    ),
                    cause: None,
                });
            }
            let mid = range.start + split_point(range.len());
            node(function, range.start..mid, slot, by_start, plan)?;
            let right = mid..range.end;
            match take(by_start, &right) {
                Some(source) => plan.ops.push(Op::Add { slot, source }),
                None => {
                    node(function, right, slot + 1, by_start, plan)?;
                    plan.ops.push(Op::AddNext { slot });
                }
            }
            Ok(())
        }
        let mut plan = Plan {
            ops: Vec::new(),
            slots: 0,
        };
        node(function, 0..items, 0, &mut by_start, &mut plan)?;
        match by_start.keys().next() {
            None => Ok(plan),
            Some(&start) => Err(overlap(function, usize::MAX, start)),
        }
    }

    /// The sum of `sources` (each `len` values), handed to `emit` in blocks, in order.
    fn run<T: Float>(&self, sources: &[Source<'_, T>], len: usize, emit: &mut dyn FnMut(&[T])) {
        let block = Self::BLOCK;
        let width = std::mem::size_of::<T>();
        let mut slots = vec![T::zero(); self.slots * block];
        for start in (0..len).step_by(block) {
            let part = start..(start + block).min(len);
            let n = part.len();
            let bytes = part.start * width..part.end * width;
            for op in &self.ops {
                match *op {
                    Op::Load { slot, source } => {
                        let to = &mut slots[slot * block..][..n];
                        match &sources[source] {
                            Source::Values(v) => to.copy_from_slice(&v[part.clone()]),
                            Source::Encoded(b) => decode_into(to, &b[bytes.clone()]),
                        }
                    }
                    Op::Add { slot, source } => {
                        let to = &mut slots[slot * block..][..n];
                        match &sources[source] {
                            Source::Values(v) => add_assign(to, &v[part.clone()]),
                            Source::Encoded(b) => add_encoded(to, &b[bytes.clone()]),
                        }
                    }
                    Op::AddNext { slot } => {
                        let (to, next) = slots.split_at_mut((slot + 1) * block);
                        add_assign(&mut to[slot * block..][..n], &next[..n]);
                    }
                }
            }
            emit(&slots[..n]);
        }
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
        cause: None,
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
            cause: None,
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
