//! The gradients of narrowed parts: the tape places the parts of one input together
//! instead of padding each to the whole shape, and the result is the same bits as
//! gradients of the whole shape added in the same order (`index_select`'s, whose
//! backward is a zero-filled `index_add`), whatever the mix of parts, overlaps, axes and
//! whole-shape uses.

use proptest::prelude::*;
use rlgrad_autodiff::{Param, Tape, Var};
use rlgrad_core::{Result, Rng};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::config;

/// One use of the input `x` `[rows, cols]`, in recording order.
#[derive(Debug, Clone)]
enum Use {
    /// `narrow(axis, start, len)`, scaled.
    Part {
        axis: usize,
        start: usize,
        len: usize,
    },
    /// The whole of `x`, squared.
    Whole,
}

fn uses(rows: usize, cols: usize) -> impl Strategy<Value = Vec<Use>> {
    let part = (0usize..2, any::<usize>(), any::<usize>()).prop_map(move |(axis, a, b)| {
        let size = if axis == 0 { rows } else { cols };
        let start = a % size;
        let len = 1 + b % (size - start);
        Use::Part { axis, start, len }
    });
    let one = prop_oneof![4 => part, 1 => Just(Use::Whole)];
    proptest::collection::vec(one, 1..40)
}

/// `sum_k sum(u_k(x) * w_k)` with a fixed random `w_k` per use; `by_index` takes each
/// part with `index_select` instead of `narrow`.
fn loss<'t>(x: &Var<'t, f64>, uses: &[Use], by_index: bool) -> Result<Var<'t, f64>> {
    let mut rng = Rng::new(5, "weights");
    let mut total: Option<Var<'t, f64>> = None;
    for u in uses {
        let term = match *u {
            Use::Part { axis, start, len } if by_index => {
                let indices: Vec<usize> = (start..start + len).collect();
                x.index_select(axis, &indices)?
            }
            Use::Part { axis, start, len } => x.narrow(axis, start, len)?,
            Use::Whole => x.square()?,
        };
        let w = Tensor::rand_uniform(term.shape().clone(), -1.0, 1.0, &mut rng)?;
        let term = term.mul(&x.tape().constant(&w))?.sum_all()?;
        total = Some(match total {
            None => term,
            Some(sum) => sum.add(&term)?,
        });
    }
    Ok(total.expect("at least one use"))
}

fn gradient(x: &Param<f64>, uses: &[Use], by_index: bool) -> Vec<u64> {
    let tape = Tape::new();
    let loss = loss(&tape.param(x), uses, by_index).unwrap();
    let grads = tape.gradient(&loss, &[x]).unwrap();
    grads
        .get(x)
        .unwrap()
        .to_vec()
        .unwrap()
        .iter()
        .map(|g| g.to_bits())
        .collect()
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn prop_narrowed_parts_add_up_as_whole_gradients(
        (rows, cols, uses) in (1usize..12, 1usize..6).prop_flat_map(|(r, c)| (Just(r), Just(c), uses(r, c))),
        seed in any::<u64>(),
    ) {
        let value = Tensor::rand_normal([rows, cols], 0.0, 1.0, &mut Rng::new(seed, "x")).unwrap();
        let x = Param::new("x", value).unwrap();
        prop_assert_eq!(gradient(&x, &uses, false), gradient(&x, &uses, true));
    }
}

#[test]
fn a_recurrence_over_narrowed_steps_gets_every_step_its_gradient() {
    // The shape of an RNN's input gates: [T * B, G], one [B, G] step narrowed at a time.
    let (steps, batch, gates) = (50, 3, 4);
    let x = Param::<f64>::new(
        "gates",
        Tensor::rand_normal([steps * batch, gates], 0.0, 1.0, &mut Rng::new(1, "x")).unwrap(),
    )
    .unwrap();
    let tape = Tape::new();
    let all = tape.param(&x);
    let mut h = tape.constant(&Tensor::zeros([batch, gates]).unwrap());
    for t in 0..steps {
        h = h
            .add(&all.narrow(0, t * batch, batch).unwrap())
            .unwrap()
            .tanh()
            .unwrap();
    }
    let loss = h.sum_all().unwrap();
    let grads = tape.gradient(&loss, &[&x]).unwrap();
    let g = grads.get(&x).unwrap().to_vec().unwrap();
    // Every step's rows get a nonzero gradient, the earliest the smallest.
    let row = |t: usize| g[t * batch * gates].abs();
    assert!((0..steps).all(|t| row(t) > 0.0));
    assert!(row(0) < row(steps - 1));
}
