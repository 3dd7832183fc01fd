//! Sampling discrete actions.

use rlgrad_core::Rng;

/// An index drawn with the probabilities `probabilities` (one row of a softmax): the
/// first index whose cumulative probability, summed in f64 in index order, exceeds one
/// uniform draw of `rng`. The last index when rounding leaves the total below the draw.
pub fn sample(probabilities: &[f32], rng: &mut Rng) -> usize {
    let u = rng.uniform_f64();
    let mut cumulative = 0.0;
    for (i, &p) in probabilities.iter().enumerate() {
        cumulative += f64::from(p);
        if u < cumulative {
            return i;
        }
    }
    probabilities.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_follow_the_probabilities() {
        let mut rng = Rng::new(0, "test");
        let mut counts = [0usize; 3];
        for _ in 0..30_000 {
            counts[sample(&[0.2, 0.5, 0.3], &mut rng)] += 1;
        }
        for (count, expected) in counts.iter().zip([6_000.0, 15_000.0, 9_000.0]) {
            assert!((*count as f64 - expected).abs() < 400.0, "{counts:?}");
        }
        assert_eq!(sample(&[0.0, 1.0], &mut rng), 1);
        assert_eq!(sample(&[0.0, 0.0], &mut rng), 1);
    }
}
