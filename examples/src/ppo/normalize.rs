//! Observation normalization with running statistics, as Stable-Baselines3's
//! `VecNormalize(norm_obs=True, norm_reward=False)` does it.

use rlgrad_checkpoint::State;

/// SB3's `RunningMeanStd` over observations, and `VecNormalize`'s normalization:
///
/// ```text
/// update with a batch of n rows (batch mean m_b, population variance v_b):
///   delta = m_b - mean,  total = count + n
///   mean += delta * n / total
///   var = (var * count + v_b * n + delta^2 * count * n / total) / total,  count = total
/// normalize: clip((x - mean) / sqrt(var + 1e-8), -10, 10), in f64, rounded to f32
/// ```
///
/// starting from `mean = 0`, `var = 1`, `count = 1e-4`. Sums run in f64 in row order.
#[derive(Debug, Clone, PartialEq, State)]
pub struct Normalizer {
    mean: Vec<f64>,
    var: Vec<f64>,
    count: f64,
}

/// `VecNormalize`'s `epsilon` and `clip_obs`.
const EPSILON: f64 = 1e-8;
const CLIP: f64 = 10.0;

impl Normalizer {
    /// Statistics of `dim` features, before any observation.
    pub fn new(dim: usize) -> Self {
        Self {
            mean: vec![0.0; dim],
            var: vec![1.0; dim],
            count: 1e-4,
        }
    }

    /// Adds the rows of `batch` (`[n, dim]`) to the statistics.
    pub fn update(&mut self, batch: &[f32]) {
        let dim = self.mean.len();
        let n = (batch.len() / dim) as f64;
        let total = self.count + n;
        for f in 0..dim {
            let column = || batch.iter().skip(f).step_by(dim).map(|&x| f64::from(x));
            let batch_mean = column().sum::<f64>() / n;
            let batch_var = column().map(|x| (x - batch_mean).powi(2)).sum::<f64>() / n;
            let delta = batch_mean - self.mean[f];
            self.mean[f] += delta * n / total;
            let m2 =
                self.var[f] * self.count + batch_var * n + delta * delta * self.count * n / total;
            self.var[f] = m2 / total;
        }
        self.count = total;
    }

    /// `batch` (`[n, dim]`) normalized.
    pub fn normalize(&self, batch: &[f32]) -> Vec<f32> {
        let dim = self.mean.len();
        batch
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = i % dim;
                ((f64::from(x) - self.mean[f]) / (self.var[f] + EPSILON).sqrt()).clamp(-CLIP, CLIP)
                    as f32
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_converge_to_the_data_and_normalize_it() {
        let mut normalizer = Normalizer::new(2);
        let batches: Vec<Vec<f32>> = (0..50)
            .map(|k| {
                (0..16)
                    .map(|i| ((k * 16 + i) % 7) as f32 * if i % 2 == 0 { 1.0 } else { -2.0 })
                    .collect()
            })
            .collect();
        for batch in &batches {
            normalizer.update(batch);
        }
        let all: Vec<f32> = batches.concat();
        let normalized = normalizer.normalize(&all);
        for f in 0..2 {
            let column: Vec<f64> = normalized
                .iter()
                .skip(f)
                .step_by(2)
                .map(|&x| f64::from(x))
                .collect();
            let mean = column.iter().sum::<f64>() / column.len() as f64;
            let var = column.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / column.len() as f64;
            assert!(
                mean.abs() < 1e-3 && (var - 1.0).abs() < 1e-3,
                "{mean} {var}"
            );
        }
        assert_eq!(normalizer.normalize(&[1e9, -1e9]), [10.0, -10.0]);
    }
}
