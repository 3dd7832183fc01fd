//! Padded batches for the padding-never-matters properties (`padding.rs`, `stacked.rs`):
//! lengths, sizes, the seed of the valid values, and the garbage for the padded positions.

use std::ops::Range;

use proptest::prelude::*;
use rlgrad_core::{Float, Rng};
use rlgrad_testkit::strategies;

/// A padded batch: its lengths, padded length, features and hidden units, the seed of its
/// valid values, and the garbage that fills its padded positions in turn.
#[derive(Debug, Clone)]
pub struct Case<T> {
    pub lengths: Vec<usize>,
    pub max_len: usize,
    pub features: usize,
    pub hidden: usize,
    pub seed: u64,
    pub garbage: Vec<T>,
}

/// Up to 4 sequences of up to 5 steps, padded by up to 2 more, 1 to 3 features, and
/// `hidden` units.
pub fn cases<T: Float>(hidden: Range<usize>) -> impl Strategy<Value = Case<T>> {
    (
        strategies::lengths(4, 5),
        0usize..3,
        1usize..4,
        hidden,
        any::<u64>(),
        strategies::vec(strategies::garbage::<T>(), 1..24),
    )
        .prop_map(|(lengths, extra, features, hidden, seed, garbage)| {
            let longest = lengths.iter().copied().max().unwrap_or(0);
            Case {
                max_len: (longest + extra).max(1),
                lengths,
                features,
                hidden,
                seed,
                garbage,
            }
        })
}

impl<T: Float> Case<T> {
    /// `[B, T, width]` batch-major values drawn from stream `stream`, the padded steps
    /// holding garbage or zeros. The valid values are the same either way.
    pub fn padded_values(&self, width: usize, stream: &str, garbage: bool) -> Vec<T> {
        let mut rng = Rng::new(self.seed, stream);
        let mut fill = self.garbage.iter().copied().cycle();
        let mut values = Vec::new();
        for &len in &self.lengths {
            for t in 0..self.max_len {
                for _ in 0..width {
                    let valid = rng.normal::<T>(0.0, 1.0);
                    values.push(match (t < len, garbage) {
                        (true, _) => valid,
                        (false, true) => fill.next().expect("garbage is never empty"),
                        (false, false) => T::zero(),
                    });
                }
            }
        }
        values
    }
}
