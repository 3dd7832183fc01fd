//! The sum tree (and min tree) under prioritized replay.

/// A complete binary tree over `leaves` non-negative `f64` values, keeping the sum and
/// the minimum of every subtree, for proportional sampling in `O(log n)`.
///
/// Layout: a heap in one array of `2 * P` nodes, `P` the smallest power of two `>= leaves`:
/// the root is node 1, node `i` has children `2i` and `2i + 1`, leaf `k` is node `P + k`
/// (node 0 is unused). Leaves past `leaves` and leaves never set hold 0 (sum) and `+inf`
/// (min).
///
/// **Canonical order**: every internal node is `sum[2i] + sum[2i + 1]`, recomputed from its
/// two children whenever a leaf below it changes. No node is ever updated by adding a
/// difference, so every node, the root included, is a function of the current leaves
/// alone: the same leaves give the same bits whatever order of updates led to them (a
/// restored buffer, a buffer filled in another order).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SumTree {
    leaves: usize,
    /// `P`: the index of leaf 0.
    base: usize,
    pub(crate) sum: Vec<f64>,
    pub(crate) min: Vec<f64>,
}

impl SumTree {
    /// A tree of `leaves` zero leaves (`leaves >= 1`, checked by the caller).
    pub(crate) fn new(leaves: usize) -> Self {
        let base = leaves.next_power_of_two();
        Self {
            leaves,
            base,
            sum: vec![0.0; 2 * base],
            min: vec![f64::INFINITY; 2 * base],
        }
    }

    /// The number of nodes of the arrays (`2 * P`), as checkpoints store them.
    #[cfg(any(test, feature = "checkpoint"))]
    pub(crate) fn nodes(&self) -> usize {
        2 * self.base
    }

    /// Sets leaf `k` (`k < leaves`) to `value`, then recomputes its ancestors.
    pub(crate) fn set(&mut self, k: usize, value: f64) {
        debug_assert!(k < self.leaves);
        let mut node = self.base + k;
        self.sum[node] = value;
        self.min[node] = value;
        node /= 2;
        while node >= 1 {
            self.sum[node] = self.sum[2 * node] + self.sum[2 * node + 1];
            self.min[node] = self.min[2 * node].min(self.min[2 * node + 1]);
            node /= 2;
        }
    }

    /// Leaf `k`'s value.
    pub(crate) fn get(&self, k: usize) -> f64 {
        self.sum[self.base + k]
    }

    /// The sum of all leaves (the root).
    pub(crate) fn total(&self) -> f64 {
        self.sum[1]
    }

    /// The smallest leaf that was set (`+inf` when none was).
    pub(crate) fn min(&self) -> f64 {
        self.min[1]
    }

    /// The leaf where the prefix sum passes `mass`: from the root, go left when
    /// `mass < sum(left)`, else subtract `sum(left)` and go right; a child whose sum is 0 is
    /// never entered (rounding in `mass` can otherwise reach an empty leaf), so from a
    /// root above 0 the walk ends on a leaf above 0.
    pub(crate) fn find(&self, mut mass: f64) -> usize {
        let mut node = 1;
        while node < self.base {
            let (left, right) = (self.sum[2 * node], self.sum[2 * node + 1]);
            if right == 0.0 || (left > 0.0 && mass < left) {
                node *= 2;
            } else {
                mass -= left;
                node = 2 * node + 1;
            }
        }
        node - self.base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_follow_the_leaves_whatever_the_update_order() {
        let values = [0.1, 2.5, 1e-3, 7.0, 0.3];
        let mut forward = SumTree::new(5);
        for (k, &v) in values.iter().enumerate() {
            forward.set(k, v);
        }
        let mut backward = SumTree::new(5);
        for (k, &v) in values.iter().enumerate().rev() {
            backward.set(k, 99.0);
            backward.set(k, v);
        }
        assert_eq!(forward, backward);
        assert_eq!(forward.total(), ((0.1 + 2.5) + (1e-3 + 7.0)) + 0.3);
        assert_eq!(forward.min(), 1e-3);
        assert_eq!(forward.nodes(), 16);
    }

    #[test]
    fn find_walks_prefix_sums_and_skips_empty_leaves() {
        let mut tree = SumTree::new(6);
        for (k, v) in [1.0, 0.0, 2.0, 3.0].into_iter().enumerate() {
            tree.set(k, v);
        }
        assert_eq!(tree.find(0.0), 0);
        assert_eq!(tree.find(0.999), 0);
        assert_eq!(tree.find(1.0), 2);
        assert_eq!(tree.find(2.999), 2);
        assert_eq!(tree.find(3.0), 3);
        // Past the total (rounding): the last leaf above 0, never an empty one.
        assert_eq!(tree.find(100.0), 3);
        assert_eq!(tree.find(-1.0), 0);
        assert_eq!(tree.find(f64::NAN), 3);
    }
}
