//! Suite `mask`: TensorFlow, PyTorch and RLlib's sequence utilities against rlgrad-mask.

use rlgrad_core::Float;
use rlgrad_mask::{ChopConfig, Column, Sequences};

use super::{Array, Case, Outputs};

pub const OPS: &[(&str, super::Handler)] = &[
    ("sequence_mask", sequence_mask),
    ("pad", |c| super::by_dtype!(c, pad)),
    ("unpad", |c| super::by_dtype!(c, unpad)),
    ("masked_mean", |c| super::by_dtype!(c, masked_mean)),
    ("chop_into_sequences", |c| {
        super::by_dtype!(c, chop_into_sequences)
    }),
];

/// `F`: the last dimension of input `name` (`[N, F]` or `[B, T, F]`).
fn features(case: &Case, name: &str) -> Result<usize, String> {
    case.input_array(name)?
        .shape
        .last()
        .copied()
        .ok_or_else(|| format!("input `{name}` has no feature dimension"))
}

fn sequence_mask(case: &Case) -> Result<Outputs, String> {
    let mask = rlgrad_mask::sequence_mask(
        &case.input_usize("lengths")?,
        case.optional_count("max_len")?,
    )
    .map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "mask".to_owned(),
        Array::new(
            &[mask.batch(), mask.max_len()],
            &mask.to_float::<f64>().map_err(|e| e.to_string())?,
        ),
    )]))
}

fn pad<T: Float>(case: &Case) -> Result<Outputs, String> {
    let seqs = Sequences::new(
        &case.input_usize("lengths")?,
        case.optional_count("max_len")?,
    )
    .map_err(|e| e.to_string())?;
    let f = features(case, "flat")?;
    let padded =
        rlgrad_mask::pad(&seqs, &case.input::<T>("flat")?, f).map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "padded".to_owned(),
        Array::new(&[seqs.batch(), seqs.max_len(), f], &padded),
    )]))
}

fn unpad<T: Float>(case: &Case) -> Result<Outputs, String> {
    let padded = case.input_array("padded")?;
    let max_len = *padded
        .shape
        .get(1)
        .ok_or("input `padded` is not [B, T, F]")?;
    let seqs =
        Sequences::new(&case.input_usize("lengths")?, Some(max_len)).map_err(|e| e.to_string())?;
    let f = features(case, "padded")?;
    let flat =
        rlgrad_mask::unpad(&seqs, &case.input::<T>("padded")?, f).map_err(|e| e.to_string())?;
    Ok(Outputs::from([(
        "flat".to_owned(),
        Array::new(&[seqs.total(), f], &flat),
    )]))
}

fn masked_mean<T: Float>(case: &Case) -> Result<Outputs, String> {
    let x = case.input_array("x")?;
    let max_len = *x.shape.get(1).ok_or("input `x` is not [B, T]")?;
    let seqs =
        Sequences::new(&case.input_usize("lengths")?, Some(max_len)).map_err(|e| e.to_string())?;
    let mean =
        rlgrad_mask::masked_mean(&seqs, &case.input::<T>("x")?, 1).map_err(|e| e.to_string())?;
    let grad = rlgrad_mask::masked_mean_backward(&seqs, 1, T::one()).map_err(|e| e.to_string())?;
    Ok(Outputs::from([
        ("mean".to_owned(), Array::scalar(mean.as_f64())),
        ("grad_x".to_owned(), Array::new(&x.shape, &grad)),
    ]))
}

fn chop_into_sequences<T: Float>(case: &Case) -> Result<Outputs, String> {
    let max_seq_len = case
        .optional_count("max_seq_len")?
        .ok_or("missing config `max_seq_len`")?;
    let config = ChopConfig {
        dynamic_max: case.flag("dynamic_max")?,
        ..ChopConfig::new(max_seq_len)
    };
    let width = features(case, "features")?;
    let data = case.input::<T>("features")?;
    let batch = rlgrad_mask::chop_into_sequences(
        &case.input_i64("episode_ids")?,
        &[Column { data: &data, width }],
        config,
    )
    .map_err(|e| e.to_string())?;
    let lengths: Vec<f64> = batch.seqs().lengths().iter().map(|&l| l as f64).collect();
    Ok(Outputs::from([
        (
            "seq_lens".to_owned(),
            Array::new(&[lengths.len()], &lengths),
        ),
        (
            "padded".to_owned(),
            Array::new(
                &[batch.seqs().padded_steps(), width],
                batch.column(0).ok_or("no padded column")?,
            ),
        ),
    ]))
}
