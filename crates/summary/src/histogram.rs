//! Histograms as TensorFlow builds them (`tensorflow/core/lib/histogram/histogram.cc`):
//! its default exponential buckets, with runs of empty buckets collapsed.

use std::sync::OnceLock;

use crate::proto::HistogramProto;

/// TensorFlow's default bucket limits: `±1e-12 * 1.1^k` up to `1e20`, `±f64::MAX` at the
/// ends and `0` in the middle, ascending. Bucket `i` holds the values `v` with
/// `limit[i-1] <= v < limit[i]`.
fn default_limits() -> &'static [f64] {
    static LIMITS: OnceLock<Vec<f64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut positive = Vec::new();
        let mut v = 1.0e-12;
        while v < 1.0e20 {
            positive.push(v);
            v *= 1.1;
        }
        positive.push(f64::MAX);
        let mut limits: Vec<f64> = positive.iter().rev().map(|v| -v).collect();
        limits.push(0.0);
        limits.extend(positive);
        limits
    })
}

/// The histogram of `values` (finite, at least one): statistics summed in f64 in index
/// order, counts in TensorFlow's default buckets, consecutive empty buckets collapsed into
/// one (TensorFlow's encoding without `preserve_zero_buckets`).
pub(crate) fn histogram(values: &[f64]) -> HistogramProto {
    let limits = default_limits();
    let mut counts = vec![0.0f64; limits.len()];
    let (mut min, mut max, mut sum, mut sum_squares) = (f64::MAX, f64::MIN, 0.0, 0.0);
    for &v in values {
        min = min.min(v);
        max = max.max(v);
        sum += v;
        sum_squares += v * v;
        let bucket = limits.partition_point(|&limit| limit <= v);
        counts[bucket.min(limits.len() - 1)] += 1.0;
    }
    let (mut bucket_limit, mut bucket) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < counts.len() {
        let (mut end, mut count) = (limits[i], counts[i]);
        i += 1;
        if count <= 0.0 {
            while i < counts.len() && counts[i] <= 0.0 {
                (end, count) = (limits[i], counts[i]);
                i += 1;
            }
        }
        bucket_limit.push(end);
        bucket.push(count);
    }
    HistogramProto {
        min,
        max,
        num: values.len() as f64,
        sum,
        sum_squares,
        bucket_limit,
        bucket,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_tensorflows() {
        let limits = default_limits();
        // 774 positive limits below 1e20, f64::MAX, their negatives, and zero.
        assert_eq!(limits.len(), 2 * 775 + 1);
        assert!(limits.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(limits[775], 0.0);
        assert_eq!(limits[776], 1e-12);
        assert_eq!(*limits.last().unwrap(), f64::MAX);
    }

    #[test]
    fn counts_statistics_and_collapsed_empty_runs() {
        let h = histogram(&[0.0, 1.0, 1.0, -2.0]);
        assert_eq!(
            (h.min, h.max, h.num, h.sum, h.sum_squares),
            (-2.0, 1.0, 4.0, 0.0, 6.0)
        );
        assert_eq!(h.bucket.iter().sum::<f64>(), 4.0);
        assert_eq!(h.bucket.len(), h.bucket_limit.len());
        // Non-empty buckets alternate with single collapsed empty runs.
        let non_empty: Vec<f64> = h.bucket.iter().copied().filter(|&c| c > 0.0).collect();
        assert_eq!(non_empty, [1.0, 1.0, 2.0]);
        assert!(h.bucket.windows(2).all(|w| w[0] > 0.0 || w[1] > 0.0));
        // 0 falls in [0, 1e-12): the bucket whose limit is 1e-12.
        let zero = h.bucket_limit.iter().position(|&l| l == 1e-12).unwrap();
        assert_eq!(h.bucket[zero], 1.0);
    }

    #[test]
    fn every_value_lands_below_its_bucket_limit() {
        let values = [-1e30, -3.5, -1e-13, 5e-13, 2.0, 2.0000001, 7.25e19, 1e25];
        let h = histogram(&values);
        let mut lower = f64::NEG_INFINITY;
        for (&limit, &count) in h.bucket_limit.iter().zip(&h.bucket) {
            let inside = values.iter().filter(|&&v| lower <= v && v < limit).count();
            assert_eq!(count, inside as f64, "[{lower}, {limit})");
            lower = limit;
        }
        assert_eq!(lower, f64::MAX);
        // f64::MAX itself goes to the last bucket rather than past it.
        assert_eq!(histogram(&[f64::MAX]).bucket.last(), Some(&1.0));
    }
}
