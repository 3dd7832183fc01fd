//! `#[derive(Module)]`: field order, paths, containers, skipped fields, generic structs,
//! target-network updates, and a TD3 actor/critic pair written with it.

use rlgrad_autodiff::nn::{Activation, Forward, Init, Linear, Mlp, Module, Sequential};
use rlgrad_autodiff::{ApplyGradients, Device, Float, Param, Tape, Var};
use rlgrad_core::{Result, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

#[derive(Module, Clone, Debug)]
struct Head {
    out: Linear,
    scale: Param,
}

#[derive(Module, Clone, Debug)]
struct Net {
    trunk: Vec<Linear>,
    head: Head,
    extra: Option<Linear>,
    missing: Option<Linear>,
    boxed: Box<Linear>,
    #[module(skip)]
    steps: u64,
}

#[derive(Module)]
struct Pair(Linear, #[module(skip)] &'static str, Linear);

#[derive(Module)]
struct Nothing;

#[derive(Module, Clone)]
struct Generic<T: Float, D: Device> {
    layer: Linear<T, D>,
}

fn linear(name: &str, i: usize, o: usize, rng: &mut Rng) -> Result<Linear> {
    Linear::new(name, i, o, Init::TorchDefault, rng)
}

fn net(rng: &mut Rng) -> Result<Net> {
    Ok(Net {
        trunk: vec![linear("t1", 3, 4, rng)?, linear("t2", 4, 4, rng)?],
        head: Head {
            out: linear("out", 4, 1, rng)?,
            scale: Param::new("scale", Tensor::ones([1])?)?,
        },
        extra: Some(linear("extra", 2, 2, rng)?),
        missing: None,
        boxed: Box::new(linear("boxed", 1, 1, rng)?),
        steps: 7,
    })
}

#[test]
fn paths_follow_fields_in_declaration_order() -> Result<()> {
    let net = net(&mut Rng::new(0, "init"))?;
    let named = net.named_parameters();
    let paths: Vec<&str> = named.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "trunk/0/weight",
            "trunk/0/bias",
            "trunk/1/weight",
            "trunk/1/bias",
            "head/out/weight",
            "head/out/bias",
            "head/scale",
            "extra/weight",
            "extra/bias",
            "boxed/weight",
            "boxed/bias",
        ]
    );
    // The same parameters, in the order of `visit`, `visit_mut` and `visit_named_mut`.
    let ids: Vec<_> = net.parameters().iter().map(|p| p.id()).collect();
    assert_eq!(ids, named.iter().map(|(_, p)| p.id()).collect::<Vec<_>>());
    let mut net = net;
    let mut mut_ids = Vec::new();
    net.visit_mut(&mut |p| mut_ids.push(p.id()));
    assert_eq!(mut_ids, ids);
    let mut mut_paths = Vec::new();
    net.visit_named_mut("agent", &mut |path, p| {
        mut_paths.push((path.to_owned(), p.id()))
    });
    assert_eq!(mut_paths[6], ("agent/head/scale".to_owned(), ids[6]));
    assert_eq!(net.steps, 7);
    assert_eq!(net.num_parameters(), 12 + 4 + 20 + 4 + 1 + 1 + 6 + 2);

    let pair = Pair(
        linear("a", 1, 2, &mut Rng::new(1, "init"))?,
        "x",
        linear("b", 2, 1, &mut Rng::new(2, "init"))?,
    );
    let paths: Vec<String> = pair
        .named_parameters()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(paths, ["0/weight", "0/bias", "2/weight", "2/bias"]);
    assert_eq!(pair.1, "x");
    assert!(Module::<f32>::parameters(&Nothing).is_empty());
    Ok(())
}

#[test]
fn layers_name_their_own_paths() -> Result<()> {
    let mut rng = Rng::new(0, "init");
    let mlp = Mlp::<f32>::new(
        "critic",
        &[2, 3, 1],
        Activation::Relu,
        Activation::Identity,
        Init::TorchDefault,
        &mut rng,
    )?;
    let gru = rlgrad_autodiff::nn::Gru::<f32>::new("memory", 2, 3, &mut rng)?;
    let paths = |m: &dyn Module| {
        m.named_parameters()
            .into_iter()
            .map(|(p, _)| p)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        paths(&mlp),
        ["l1/weight", "l1/bias", "l2/weight", "l2/bias"]
    );
    assert_eq!(
        paths(&gru),
        ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    );
    let seq: Sequential = Sequential::new()
        .push(mlp)
        .push(Activation::Tanh)
        .push(linear("x", 1, 1, &mut rng)?);
    assert_eq!(paths(&seq)[4..], ["2/weight", "2/bias"]);
    Ok(())
}

#[test]
fn generic_structs_are_modules_of_their_float_type() -> Result<()> {
    let g = Generic {
        layer: Linear::<f64>::new("g", 2, 2, Init::GlorotUniform, &mut Rng::new(0, "init"))?,
    };
    let tape = Tape::<f64>::new();
    let y = g
        .layer
        .forward(&tape, &tape.constant(&Tensor::ones([1, 2])?))?;
    let grads = tape.gradient(&y.sum_all()?, &[&g])?;
    assert_eq!(grads.get(g.parameters()[0])?.to_vec()?, [1.0; 4]);
    Ok(())
}

#[test]
fn name_by_path_renames_and_refuses_a_nameless_parameter() -> Result<()> {
    let mut net = net(&mut Rng::new(0, "init"))?;
    net.name_by_path("agent")?;
    assert_eq!(net.parameters()[6].name(), "agent/head/scale");
    let mut lone = Param::new("w", Tensor::<f32>::zeros([1])?)?;
    let err = lone.name_by_path("").unwrap_err().to_string();
    assert!(err.contains("non-empty prefix"), "{err}");
    assert_eq!(lone.name(), "w");
    lone.name_by_path("renamed")?;
    assert_eq!(lone.name(), "renamed");
    Ok(())
}

#[test]
fn soft_update_from_is_polyak_update_bit_for_bit() -> Result<()> {
    let mut rng = Rng::new(5, "init");
    let source = net(&mut rng)?;
    let mut target = net(&mut rng)?; // same names and shapes, other values
    let tau = 0.005;
    let mut expected: Vec<Vec<f32>> = Vec::new();
    for (t, s) in target.parameters().iter().zip(source.parameters()) {
        let mut t = t.value().to_vec()?;
        rlgrad_optim::polyak_update(&mut t, &s.value().to_vec()?, tau)?;
        expected.push(t);
    }
    target.soft_update_from(&source, tau)?;
    for (p, e) in target.parameters().iter().zip(&expected) {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&p.value().to_vec()?), bits(e), "{}", p.name());
    }
    assert!(target.soft_update_from(&source, 1.5).is_err());
    let mut other = source.clone();
    other.extra = None;
    let err = other
        .soft_update_from(&source, tau)
        .unwrap_err()
        .to_string();
    assert!(err.contains("parameters"), "{err}");
    target.hard_update_from(&source)?;
    assert_eq!(
        target.parameters()[0].value().to_vec()?,
        source.parameters()[0].value().to_vec()?
    );
    Ok(())
}

/// TD3's networks with the derive: the actor, the twin critics, their targets, one
/// critic step and one Polyak update.
#[test]
fn td3_actor_critic_pair_reads_short() -> Result<()> {
    #[derive(Module, Clone)]
    struct Actor {
        mlp: Mlp,
        #[module(skip)]
        max_action: f32,
    }
    #[derive(Module, Clone)]
    struct Critic {
        q1: Mlp,
        q2: Option<Mlp>,
    }
    impl Actor {
        fn forward<'t>(&self, tape: &'t Tape, s: &Var<'t>) -> Result<Var<'t>> {
            self.max_action * &self.mlp.forward(tape, s)?
        }
    }
    impl Critic {
        fn min_q<'t>(&self, tape: &'t Tape, s: &Var<'t>, a: &Var<'t>) -> Result<Var<'t>> {
            let x = Var::concat(&[s, a], 1)?;
            let q1 = self.q1.forward(tape, &x)?;
            match &self.q2 {
                Some(q2) => q1.minimum(&q2.forward(tape, &x)?),
                None => Ok(q1),
            }
        }
    }
    let mut rng = Rng::new(0, "init");
    let mlp = |name: &str, sizes: &[usize], out, rng: &mut Rng| {
        Mlp::new(name, sizes, Activation::Relu, out, Init::TorchDefault, rng)
    };
    let actor = Actor {
        mlp: mlp("actor", &[3, 16, 1], Activation::Tanh, &mut rng)?,
        max_action: 2.0,
    };
    let mut critic = Critic {
        q1: mlp("critic/q1", &[4, 16, 1], Activation::Identity, &mut rng)?,
        q2: Some(mlp(
            "critic/q2",
            &[4, 16, 1],
            Activation::Identity,
            &mut rng,
        )?),
    };
    let (actor_target, mut critic_target) = (actor.clone(), critic.clone());
    let mut adam = Optimizer::new(Adam::torch(), 1e-3)?;

    let tape = Tape::new();
    let s = tape.constant(&Tensor::rand_normal([8, 3], 0.0, 1.0, &mut rng)?);
    let reward = tape.constant(&Tensor::rand_normal([8, 1], 0.0, 1.0, &mut rng)?);
    let next_q = critic_target
        .min_q(&tape, &s, &actor_target.forward(&tape, &s)?)?
        .detach();
    let target_q = (&reward + &(0.99 * &next_q)?)?;
    let q = critic.q1.forward(
        &tape,
        &Var::concat(&[&s, &actor.forward(&tape, &s)?.detach()], 1)?,
    )?;
    let loss = (&q - &target_q)?.square()?.mean_all()?;
    let grads = tape.gradient(&loss, &[&critic.q1])?;
    adam.apply_gradients(&mut critic.q1, &grads)?;
    let before = critic_target.parameters()[0].value().to_vec()?;
    critic_target.soft_update_from(&critic, 0.005)?;
    assert_ne!(critic_target.parameters()[0].value().to_vec()?, before);
    Ok(())
}
