//! Every public function of rlgrad-mask with random sizes (zero, small and huge lengths,
//! `max_len` and feature widths up to `usize::MAX`), random arguments and non-finite data:
//! each call returns `Ok` or `Err` (or `None`), never panics or aborts, and a call that
//! fails leaves its outputs as they were.

use proptest::prelude::*;
use rlgrad_mask::Rng;
use rlgrad_mask::device::{self, Cpu};
use rlgrad_mask::*;
use rlgrad_testkit::strategies::{self, config};

/// Sizes that are zero, small, or far beyond any memory (so that no allocation of them
/// can succeed, whatever the machine's overcommit setting).
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        10 => 0usize..5,
        1 => proptest::sample::select(vec![usize::MAX, usize::MAX / 2, 1 << 48, 1 << 62]),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    lengths: Vec<usize>,
    max_len: Option<usize>,
    features: usize,
    values: Vec<f64>,
    picks: Vec<usize>,
    ddof: usize,
    eps: f64,
    grad: f64,
    ids: Vec<i64>,
    chop: (usize, bool, bool),
    par: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        strategies::vec(size(), 0..5),
        proptest::option::of(size()),
        prop_oneof![4 => 1usize..4, 1 => size()],
        strategies::vec(strategies::any_value::<f64>(), 0..80),
        strategies::vec(any::<usize>(), 16),
        (
            size(),
            strategies::any_value::<f64>(),
            strategies::any_value::<f64>(),
        ),
        strategies::vec(0i64..3, 0..12),
        (size(), any::<bool>(), any::<bool>(), 1usize..4),
    )
        .prop_map(
            |(
                lengths,
                max_len,
                features,
                values,
                picks,
                (ddof, eps, grad),
                ids,
                (m, d, s, par),
            )| {
                Case {
                    lengths,
                    max_len,
                    features,
                    values,
                    picks,
                    ddof,
                    eps,
                    grad,
                    ids,
                    chop: (m, d, s),
                    par,
                }
            },
        )
}

/// Data of `want` elements when that is small, else of any small length.
fn data(want: Option<usize>, values: &[f64], pick: usize) -> Vec<f64> {
    let n = match want {
        Some(n) if n <= values.len() && !pick.is_multiple_of(4) => n,
        _ => pick % (values.len() + 1),
    };
    values[..n].to_vec()
}

/// `out` keeps its bits when `result` is an error.
fn unchanged_on_error(result: &Result<()>, before: &[f64], after: &[f64]) -> bool {
    result.is_ok()
        || before
            .iter()
            .map(|v| v.to_bits())
            .eq(after.iter().map(|v| v.to_bits()))
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn prop_every_function_returns_ok_or_err(c in case()) {
        let _ = sequence_mask(&c.lengths, c.max_len).map(|m| (m.to_u8(), m.to_float::<f32>()));
        let f = c.features;
        if let Ok(seqs) = Sequences::new(&c.lengths, c.max_len) {
            let (n, bt) = (seqs.total(), seqs.padded_steps());
            prop_assert_eq!(seqs.offsets().len(), seqs.batch() + 1);
            prop_assert_eq!(seqs.sequence_of(c.picks[0]).is_some(), c.picks[0] < n);
            let _ = seqs.mask();
            let packed = n.checked_mul(f);
            let padded = bt.checked_mul(f);
            let flat = data(packed, &c.values, c.picks[1]);
            let x = data(padded, &c.values, c.picks[2]);
            let g = data(padded, &c.values, c.picks[3]);
            let per_sequence = data(Some(seqs.batch()), &c.values, c.picks[4]);
            let _ = pad(&seqs, &flat, f);
            let _ = pad_time_major(&seqs, &flat, f);
            let _ = unpad(&seqs, &x, f);
            let _ = unpad_time_major(&seqs, &x, f);
            let par = Par::rayon(c.par);
            for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
                let mut out = vec![-3.5f64; data(padded, &c.values, c.picks[5]).len()];
                let before = out.clone();
                let r = pad_into(par, &seqs, &flat, f, order, &mut out);
                prop_assert!(unchanged_on_error(&r, &before, &out));
                let mut out = vec![-3.5f64; data(packed, &c.values, c.picks[6]).len()];
                let before = out.clone();
                let r = unpad_into(par, &seqs, &x, f, order, &mut out);
                prop_assert!(unchanged_on_error(&r, &before, &out));
            }
            let (ddof, eps, grad) = (c.ddof, c.eps, c.grad);
            let _ = masked_sum(&seqs, &x, f);
            let _ = masked_sum_backward(&seqs, f, grad);
            let _ = masked_mean(&seqs, &x, f);
            let _ = masked_mean_backward(&seqs, f, grad);
            let _ = sequence_means(&seqs, &x, f);
            let _ = sequence_means_backward(&seqs, f, &per_sequence);
            let _ = masked_var(&seqs, &x, f, ddof);
            let _ = masked_var_backward(&seqs, &x, f, ddof, grad);
            let _ = masked_std(&seqs, &x, f, ddof);
            let _ = masked_std_backward(&seqs, &x, f, ddof, grad);
            let _ = masked_normalize(&seqs, &x, f, eps, ddof);
            let _ = masked_normalize_backward(&seqs, &x, f, eps, ddof, &g);

            let cpu = Cpu::new(par);
            let order = if c.picks[7] % 2 == 0 { PadOrder::BatchMajor } else { PadOrder::TimeMajor };
            let _ = device::pad(&cpu, &seqs, &flat, f, order);
            let _ = device::unpad(&cpu, &seqs, &x, f, order);
            let _ = device::masked_sum(&cpu, &seqs, &x, f);
            let _ = device::masked_sum_backward(&cpu, &seqs, f, grad);
            let _ = device::masked_mean(&cpu, &seqs, &x, f);
            let _ = device::masked_mean_backward(&cpu, &seqs, f, grad);
            let _ = device::sequence_means(&cpu, &seqs, &x, f);
            let _ = device::sequence_means_backward(&cpu, &seqs, f, &per_sequence);
            let _ = device::masked_var(&cpu, &seqs, &x, f, ddof);
            let _ = device::masked_var_backward(&cpu, &seqs, &x, f, ddof, grad);
            let _ = device::masked_std(&cpu, &seqs, &x, f, ddof);
            let _ = device::masked_std_backward(&cpu, &seqs, &x, f, ddof, grad);
            let _ = device::masked_normalize(&cpu, &seqs, &x, f, eps, ddof);
            let _ = device::masked_normalize_backward(&cpu, &seqs, &x, f, eps, ddof, &g);
        }
        let _ = transpose(&c.values, c.picks[8] % 5, c.features, c.ddof);

        // Chopping, selecting and minibatching.
        let width = c.picks[9] % 3;
        let rows = c.ids.len();
        let column = data(rows.checked_mul(width), &c.values, c.picks[10]);
        let (max_seq_len, dynamic_max, require_contiguous_episodes) = c.chop;
        let config = ChopConfig { max_seq_len, dynamic_max, require_contiguous_episodes };
        let columns = [Column { data: &column, width }, Column { data: &column, width: c.features }];
        for columns in [&columns[..1], &columns[..], &[]] {
            if let Ok(batch) = chop_into_sequences(&c.ids, columns, config) {
                prop_assert_eq!(batch.column_count(), columns.len());
                let k = c.picks[11] % 3;
                prop_assert_eq!(batch.column(k).is_some(), k < columns.len());
                prop_assert_eq!(batch.width(k).is_some(), k < columns.len());
                prop_assert_eq!(batch.starts().len(), batch.seqs().batch());
                let picks: Vec<usize> = c.picks[..c.picks[12] % 6].iter().map(|p| p % 8).collect();
                let _ = batch.select(&picks);
                let mut rng = Rng::new(c.picks[13] as u64, "no-panics");
                let _ = batch.minibatches(c.ddof, &mut rng);
                let _ = batch.minibatches_of_size(c.ddof, &mut rng);
            }
        }
    }
}
