//! Operators on `Var`s: the bits of the named ops, gradients, and errors (never panics).

use rlgrad_autodiff::{Param, Tape};
use rlgrad_core::Result;
use rlgrad_tensor::Tensor;

fn bits(v: Vec<f32>) -> Vec<u32> {
    v.into_iter().map(f32::to_bits).collect()
}

#[test]
fn scalar_operators_are_the_scalar_ops_bit_for_bit() -> Result<()> {
    let x = Tensor::from_vec(vec![0.3f32, -1.7, 2.5, 1e-3], [4])?;
    let tape = Tape::new();
    let a = tape.constant(&x);
    let cases = [
        ((&a - 1.0)?, (&x - 1.0)?),
        ((&a + 1.5)?, (&x + 1.5)?),
        ((&a * 2.0)?, (&x * 2.0)?),
        ((&a / 3.0)?, (&x / 3.0)?),
        ((0.5 * &a)?, (0.5 * &x)?),
        ((1.0 - &a)?, (1.0 - &x)?),
        ((3.0 / &a)?, (3.0 / &x)?),
        ((2.0 + &a)?, (2.0 + &x)?),
        ((-&a)?, (-&x)?),
        ((a.clone() * 7.0)?, (&x * 7.0)?),
        ((-a.clone())?, (-&x)?),
        (
            a.powf(2.0)?,
            x.unary(rlgrad_core::kernels::UnaryOp::Powf(2.0))?,
        ),
    ];
    for (var, tensor) in cases {
        assert_eq!(bits(var.to_vec()?), bits(tensor.to_vec()?));
    }
    // `s - x` is one op with the bits of the scalar formula, per element.
    let reversed = (1.0 - &a)?.to_vec()?;
    for (r, x) in reversed.iter().zip(x.to_vec()?) {
        assert_eq!(r.to_bits(), (1.0 - x).to_bits());
    }
    Ok(())
}

#[test]
fn operators_have_gradients() -> Result<()> {
    let w = Param::new("w", Tensor::from_vec(vec![2.0f64, -4.0], [2])?)?;
    let tape = Tape::new();
    let x = tape.param(&w);
    // loss = sum(0.5 * (x - 1)^2 + 3 / x - x / 2)
    let loss = ((0.5 * &(&x - 1.0)?.powf(2.0)?)? + (3.0 / &x)?)?;
    let loss = (loss - (x.clone() / 2.0)?)?.sum_all()?;
    let grads = tape.gradient(&loss, &[&w])?;
    let expected: Vec<f64> = [2.0f64, -4.0]
        .iter()
        .map(|x| (x - 1.0) - 3.0 / (x * x) - 0.5)
        .collect();
    for (g, e) in grads.get(&w)?.to_vec()?.iter().zip(expected) {
        assert!((g - e).abs() < 1e-12, "{g} vs {e}");
    }
    Ok(())
}

#[test]
fn operators_report_tape_misuse_as_errors() -> Result<()> {
    let w = Param::new("w", Tensor::from_vec(vec![1.0f32], [1])?)?;
    let tape = Tape::new();
    let x = tape.param(&w);
    let loss = (&x * 2.0)?.sum_all()?;
    tape.gradient(&loss, &[&w])?;
    // The tape is consumed: an op on one of its variables cannot be recorded.
    let err = (&x - 1.0).unwrap_err().to_string();
    assert!(
        err.contains("Var::sub") && err.contains("consumed"),
        "{err}"
    );
    assert!((0.5 * &x).is_err());
    assert!((-&x).is_err());
    // Variables of two tapes.
    let other = Tape::new();
    let err = (&other.param(&w) + &Tape::new().param(&w))
        .unwrap_err()
        .to_string();
    assert!(err.contains("same tape"), "{err}");
    // Shapes that do not broadcast.
    let (y, z) = (
        other.constant(&Tensor::zeros([2])?),
        other.constant(&Tensor::zeros([3])?),
    );
    let err = (&y + &z).unwrap_err().to_string();
    assert!(err.contains("Var::add"), "{err}");
    Ok(())
}
