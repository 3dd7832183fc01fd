//! PyTorch weights in and out: the networks of `tests/torch/make_fixtures.py` (a TD3
//! actor, an LSTM, a GRU; torch 2.15.0, safetensors 0.8.0), imported into rlgrad modules,
//! give PyTorch's forward outputs (f64 to 1e-12, f32 to a few ulps); exported, they give
//! the file's tensors back bit for bit. Nothing is trained, and CI needs no torch: the
//! fixtures are checked in.

use std::path::PathBuf;

use rlgrad_autodiff::Tape;
use rlgrad_autodiff::nn::{Activation, Forward, Gru, Init, Lstm, Mlp, Module};
use rlgrad_checkpoint::{Checkpoint, Restore, Scalar, TorchNames};
use rlgrad_core::{Float, Rng};
use rlgrad_tensor::Tensor;

fn fixture(name: &str) -> Checkpoint {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "torch", name]
        .iter()
        .collect();
    Checkpoint::load(&path).unwrap()
}

/// rlgrad twins of the PyTorch `Nets`, under other names, freshly initialized.
struct Nets<T: Float> {
    actor: Mlp<T>,
    lstm: Lstm<T>,
    gru: Gru<T>,
}

impl<T: Float> Nets<T> {
    fn new(hidden: usize) -> Self {
        let mut rng = Rng::new(42, "init");
        Self {
            actor: Mlp::new(
                "pi",
                &[3, hidden, 8, 2],
                Activation::Relu,
                Activation::Tanh,
                Init::TorchDefault,
                &mut rng,
            )
            .unwrap(),
            lstm: Lstm::new("encoder/lstm", 3, 4, &mut rng).unwrap(),
            gru: Gru::new("gru", 3, 4, &mut rng).unwrap(),
        }
    }
}

/// rlgrad `pi/l1/weight` is PyTorch `actor.l1.weight`, `encoder/lstm/weight_ih` is
/// `lstm.weight_ih_l0`; `gru/...` maps as it is.
fn names() -> TorchNames {
    TorchNames::new()
        .prefix("pi", "actor")
        .prefix("encoder/lstm", "lstm")
}

fn import<T: Float + Scalar>(
    nets: &mut Nets<T>,
    state_dict: &Checkpoint,
) -> rlgrad_core::Result<()> {
    let names = names();
    let mut plan = Restore::new();
    plan.torch_module(&mut nets.actor, &names)
        .torch_module(&mut nets.lstm, &names)
        .torch_module(&mut nets.gru, &names);
    state_dict.restore(plan)
}

/// Distance in units in the last place between two finite floats of one sign, as f64
/// bit patterns of the values rounded to `T` (exact: both are `T` values).
fn ulps<T: Float>(a: T, b: T) -> u64 {
    match T::DTYPE {
        rlgrad_core::DType::F32 => {
            let (a, b) = (a.as_f64() as f32, b.as_f64() as f32);
            let key = |x: f32| {
                let bits = i64::from(x.to_bits() as i32);
                if bits < 0 {
                    i64::from(i32::MIN) - bits
                } else {
                    bits
                }
            };
            key(a).abs_diff(key(b))
        }
        _ => {
            let key = |x: f64| {
                let bits = x.to_bits() as i64;
                if bits < 0 { i64::MIN - bits } else { bits }
            };
            key(a.as_f64()).abs_diff(key(b.as_f64()))
        }
    }
}

/// Compares `got` with the stored `expected`: f64 within `1e-12` absolutely; f32 within
/// `max_ulps` ulps, or, for outputs below 1 in magnitude (where the last steps cancel),
/// within `max_ulps` ulps of 1 (`max_ulps * f32::EPSILON`) absolutely. Returns the largest
/// ulp distance and the largest absolute difference seen.
fn agree<T: Float + Scalar>(
    what: &str,
    got: &Tensor<T>,
    outputs: &Checkpoint,
    max_ulps: u64,
) -> (u64, f64) {
    let expected: Vec<T> = outputs.read(what, got.dims()).unwrap();
    let got = got.to_vec().unwrap();
    let (mut worst_ulps, mut worst_abs) = (0, 0.0f64);
    for (i, (&g, &e)) in got.iter().zip(&expected).enumerate() {
        let (distance, abs) = (ulps(g, e), (g.as_f64() - e.as_f64()).abs());
        worst_ulps = worst_ulps.max(distance);
        worst_abs = worst_abs.max(abs);
        match <T as rlgrad_core::Element>::DTYPE {
            rlgrad_core::DType::F32 => assert!(
                distance <= max_ulps || abs <= max_ulps as f64 * f64::from(f32::EPSILON),
                "{what}[{i}]: {g:?} vs PyTorch {e:?} ({distance} ulps, {abs:e} apart)"
            ),
            _ => assert!(abs <= 1e-12, "{what}[{i}]: {g:?} vs PyTorch {e:?}"),
        }
    }
    (worst_ulps, worst_abs)
}

fn forward_matches_pytorch<T: Float + Scalar>(suffix: &str) -> (u64, f64) {
    let state_dict = fixture(&format!("nets_{suffix}.safetensors"));
    let outputs = fixture(&format!("outputs_{suffix}.safetensors"));
    let mut nets = Nets::<T>::new(8);
    import(&mut nets, &state_dict).unwrap();

    let tape = Tape::<T>::new().no_grad();
    let obs = Tensor::from_vec(outputs.read::<T>("obs", &[2, 3]).unwrap(), [2, 3]).unwrap();
    let seq = Tensor::from_vec(outputs.read::<T>("seq", &[2, 5, 3]).unwrap(), [2, 5, 3]).unwrap();
    let actor = nets.actor.forward(&tape, &tape.constant(&obs)).unwrap();
    let x = tape.constant(&seq);
    let (lstm, lstm_state) = nets.lstm.run(&tape, &x, None, None).unwrap();
    let (gru, gru_h) = nets.gru.run(&tape, &x, None, None).unwrap();

    const MAX_ULPS: u64 = 4;
    [
        agree("actor", actor.value(), &outputs, MAX_ULPS),
        agree("lstm", lstm.value(), &outputs, MAX_ULPS),
        agree("lstm_h", lstm_state.h.value(), &outputs, MAX_ULPS),
        agree("lstm_c", lstm_state.c.value(), &outputs, MAX_ULPS),
        agree("gru", gru.value(), &outputs, MAX_ULPS),
        agree("gru_h", gru_h.value(), &outputs, MAX_ULPS),
    ]
    .into_iter()
    .fold((0, 0.0), |(u, a), (v, b)| (u.max(v), a.max(b)))
}

#[test]
fn imported_networks_give_pytorchs_outputs() {
    let (_, worst_f64) = forward_matches_pytorch::<f64>("f64");
    let (ulps, worst_f32) = forward_matches_pytorch::<f32>("f32");
    eprintln!(
        "from PyTorch: f64 at most {worst_f64:e} apart; f32 at most {ulps} ulps, {worst_f32:e} apart"
    );
}

fn export_round_trips<T: Float + Scalar>(suffix: &str) {
    let state_dict = fixture(&format!("nets_{suffix}.safetensors"));
    let mut nets = Nets::<T>::new(8);
    import(&mut nets, &state_dict).unwrap();

    let names = names();
    let mut exported = Checkpoint::new();
    exported.put_torch_module(&nets.actor, &names).unwrap();
    exported.put_torch_module(&nets.lstm, &names).unwrap();
    exported.put_torch_module(&nets.gru, &names).unwrap();
    let keys: Vec<&str> = exported.names().collect();
    assert_eq!(keys, state_dict.names().collect::<Vec<_>>());
    for key in keys {
        let info = state_dict.tensor_info(key).unwrap();
        assert_eq!(exported.tensor_info(key), Some(info), "{key}");
        let bits = |c: &Checkpoint| {
            c.read::<T>(key, &info.shape)
                .unwrap()
                .iter()
                .map(|x| x.as_f64().to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&exported), bits(&state_dict), "{key}");
    }
    // Through a file too: the bytes Python reads are the ones it wrote.
    let reloaded = Checkpoint::from_bytes(&exported.to_bytes().unwrap()).unwrap();
    let mut again = Nets::<T>::new(8);
    import(&mut again, &reloaded).unwrap();
    for (a, b) in again.actor.parameters().iter().zip(nets.actor.parameters()) {
        assert_eq!(a.value().to_vec().unwrap(), b.value().to_vec().unwrap());
    }
}

#[test]
fn exported_weights_round_trip_bit_for_bit() {
    export_round_trips::<f64>("f64");
    export_round_trips::<f32>("f32");
}

#[test]
fn a_missing_key_a_wrong_shape_and_a_wrong_dtype_are_named() {
    let state_dict = fixture("nets_f64.safetensors");

    // A missing key: a state_dict without `lstm.bias_hh_l0`.
    let mut partial = Checkpoint::new();
    for name in state_dict.names().filter(|n| *n != "lstm.bias_hh_l0") {
        let shape = state_dict.tensor_info(name).unwrap().shape.clone();
        partial
            .put(name, &shape, &state_dict.read::<f64>(name, &shape).unwrap())
            .unwrap();
    }
    let mut nets = Nets::<f64>::new(8);
    let before = nets.lstm.parameters()[0].value().to_vec().unwrap();
    let message = import(&mut nets, &partial).unwrap_err().to_string();
    assert!(
        message.contains(
            "`lstm.bias_hh_l0`: missing from the state_dict (the PyTorch key of rlgrad \
             `encoder/lstm/bias_hh` [16])"
        ),
        "{message}"
    );
    // Nothing was written.
    assert_eq!(nets.lstm.parameters()[0].value().to_vec().unwrap(), before);

    // A wrong shape: an actor with 9 hidden units where PyTorch's has 8, reported in both
    // layouts, with the key nobody read.
    let mut wider = Nets::<f64>::new(9);
    let message = import(&mut wider, &state_dict).unwrap_err().to_string();
    assert!(
        message.contains(
            "`actor.l1.weight`: expected F64 [9, 3] for rlgrad `pi/l1/weight` [3, 9], \
             transposed, found F64 [8, 3]"
        ),
        "{message}"
    );
    assert!(
        message.contains("`actor.l2.weight`: expected F64 [8, 9]"),
        "{message}"
    );

    // A wrong dtype: an f32 model from an f64 state_dict.
    let mut narrow = Nets::<f32>::new(8);
    let message = import(&mut narrow, &state_dict).unwrap_err().to_string();
    assert!(
        message.contains(
            "`gru.weight_hh_l0`: expected F32 [12, 4] for rlgrad `gru/weight_hh` [12, 4], \
             found F64 [12, 4]"
        ),
        "{message}"
    );
    assert!(message.contains("14 mismatches"), "{message}");

    // Keys no parameter reads: refused by the strict load, allowed by a plan that says so.
    let mut actor_only = Nets::<f64>::new(8).actor;
    let names = names();
    let message = state_dict
        .load_torch_module(&mut actor_only, &names)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("`gru.bias_hh_l0`: stored but not restored"),
        "{message}"
    );
    let mut plan = Restore::new();
    plan.allow_extra(true).torch_module(&mut actor_only, &names);
    state_dict.restore(plan).unwrap();
}
