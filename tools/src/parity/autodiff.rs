//! Suite `autodiff`: small programs differentiated by torch autograd, written with
//! rlgrad-autodiff's public API the way a user would write them (layers, losses, the tape),
//! never with hand-derived gradients.

use rlgrad_autodiff::losses::{Reduction, huber_loss, mse_loss};
use rlgrad_autodiff::nn::{Forward, Gru, Linear, Module, l2_penalty};
use rlgrad_autodiff::{Tape, Var};
use rlgrad_core::Float;
use rlgrad_mask::Sequences;

use super::case::{err, grad_output, param, tensor};
use super::{Array, Case, Outputs};

pub const OPS: &[(&str, super::Handler)] = &[
    ("mlp_mse", |c| super::by_dtype!(c, mlp_mse)),
    ("actor_critic_loss", |c| {
        super::by_dtype!(c, actor_critic_loss)
    }),
    ("td3_losses", |c| super::by_dtype!(c, td3_losses)),
    ("gru_masked_mean", |c| super::by_dtype!(c, gru_masked_mean)),
    ("ppo_clip_loss", |c| super::by_dtype!(c, ppo_clip_loss)),
    ("l2_regularized", |c| super::by_dtype!(c, l2_regularized)),
];

/// A dense layer from inputs `{prefix}w{k}` and `{prefix}b{k}`.
fn layer<T: Float>(case: &Case, weight: &str, bias: &str) -> Result<Linear<T>, String> {
    Linear::from_params(param(case, weight)?, Some(param(case, bias)?)).map_err(err)
}

fn scalar_output<T: Float>(
    outputs: &mut Outputs,
    name: &str,
    v: &Var<'_, T>,
) -> Result<(), String> {
    outputs.insert(
        name.to_owned(),
        Array::scalar(v.to_scalar().map_err(err)?.as_f64()),
    );
    Ok(())
}

fn mlp_mse<T: Float>(case: &Case) -> Result<Outputs, String> {
    let activation = case.text("activation")?.to_owned();
    let x = param::<T>(case, "x")?;
    let (l1, l2) = (layer::<T>(case, "w1", "b1")?, layer::<T>(case, "w2", "b2")?);
    let tape = Tape::new();
    let h = l1.forward(&tape, &tape.param(&x)).map_err(err)?;
    let h = match activation.as_str() {
        "relu" => h.relu(),
        "tanh" => h.tanh(),
        other => return Err(format!("unknown activation `{other}`")),
    }
    .map_err(err)?;
    let prediction = l2.forward(&tape, &h).map_err(err)?;
    let y = tape.constant(&tensor(case, "y")?);
    let loss = mse_loss(&prediction, &y, Reduction::Mean).map_err(err)?;
    let grads = tape.gradient(&loss, &[&l1, &l2, &x]).map_err(err)?;
    let mut out = Outputs::new();
    scalar_output(&mut out, "loss", &loss)?;
    let [w1, b1] = l1.parameters()[..] else {
        unreachable!("a layer with a bias")
    };
    let [w2, b2] = l2.parameters()[..] else {
        unreachable!("a layer with a bias")
    };
    for (name, p) in [
        ("grad_w1", w1),
        ("grad_b1", b1),
        ("grad_w2", w2),
        ("grad_b2", b2),
        ("grad_x", &x),
    ] {
        grad_output(&mut out, name, &grads, p)?;
    }
    Ok(out)
}

fn actor_critic_loss<T: Float>(case: &Case) -> Result<Outputs, String> {
    let delta = T::from_f64(case.number("huber_delta")?);
    let trunk = layer::<T>(case, "w_h", "b_h")?;
    let policy = layer::<T>(case, "w_pi", "b_pi")?;
    let value_head = layer::<T>(case, "w_v", "b_v")?;
    let actions = case.input_usize("actions")?;
    let batch = actions.len();
    let tape = Tape::new();
    let x = tape.constant(&tensor(case, "x")?);
    let returns = tape.constant(&tensor::<T>(case, "returns")?);
    let h = trunk
        .forward(&tape, &x)
        .and_then(|h| h.relu())
        .map_err(err)?;
    let logits = policy.forward(&tape, &h).map_err(err)?;
    let value = value_head
        .forward(&tape, &h)
        .and_then(|v| v.reshape([batch]))
        .map_err(err)?;
    let advantage = returns.sub(&value).map_err(err)?.detach();
    let log_prob = logits
        .log_softmax(1)
        .and_then(|lp| lp.gather(1, &actions, [batch, 1]))
        .and_then(|lp| lp.reshape([batch]))
        .map_err(err)?;
    let actor_loss = log_prob
        .mul(&advantage)
        .and_then(|t| t.sum_all())
        .and_then(|s| s.neg())
        .map_err(err)?;
    let critic_loss = huber_loss(
        &value.reshape([batch, 1]).map_err(err)?,
        &returns.reshape([batch, 1]).map_err(err)?,
        delta,
        Reduction::Sum,
    )
    .map_err(err)?;
    let loss = actor_loss.add(&critic_loss).map_err(err)?;
    let grads = tape
        .gradient(&loss, &[&trunk, &policy, &value_head])
        .map_err(err)?;
    let mut out = Outputs::new();
    scalar_output(&mut out, "loss", &loss)?;
    scalar_output(&mut out, "actor_loss", &actor_loss)?;
    scalar_output(&mut out, "critic_loss", &critic_loss)?;
    for (layer, suffix) in [(&trunk, "h"), (&policy, "pi"), (&value_head, "v")] {
        let [w, b] = layer.parameters()[..] else {
            unreachable!("a layer with a bias")
        };
        grad_output(&mut out, &format!("grad_w_{suffix}"), &grads, w)?;
        grad_output(&mut out, &format!("grad_b_{suffix}"), &grads, b)?;
    }
    Ok(out)
}

/// Fujimoto's one-hidden-layer actor: `max_action * tanh(relu(s W1 + b1) W2 + b2)`.
struct Actor<T: Float> {
    l1: Linear<T>,
    l2: Linear<T>,
    max_action: T,
}

impl<T: Float> Actor<T> {
    fn load(case: &Case, prefix: &str, max_action: T) -> Result<Self, String> {
        Ok(Self {
            l1: layer(case, &format!("{prefix}w1"), &format!("{prefix}b1"))?,
            l2: layer(case, &format!("{prefix}w2"), &format!("{prefix}b2"))?,
            max_action,
        })
    }

    fn act<'t>(&self, tape: &'t Tape<T>, state: &Var<'t, T>) -> rlgrad_core::Result<Var<'t, T>> {
        let h = self.l1.forward(tape, state)?.relu()?;
        &self.l2.forward(tape, &h)?.tanh()? * self.max_action
    }
}

/// Fujimoto's one-hidden-layer critic: `relu([s, a] W1 + b1) W2 + b2`.
struct Critic<T: Float> {
    l1: Linear<T>,
    l2: Linear<T>,
}

impl<T: Float> Critic<T> {
    fn load(case: &Case, prefix: &str) -> Result<Self, String> {
        Ok(Self {
            l1: layer(case, &format!("{prefix}w1"), &format!("{prefix}b1"))?,
            l2: layer(case, &format!("{prefix}w2"), &format!("{prefix}b2"))?,
        })
    }

    fn q<'t>(
        &self,
        tape: &'t Tape<T>,
        state: &Var<'t, T>,
        action: &Var<'t, T>,
    ) -> rlgrad_core::Result<Var<'t, T>> {
        let sa = Var::concat(&[state, action], 1)?;
        let h = self.l1.forward(tape, &sa)?.relu()?;
        self.l2.forward(tape, &h)
    }
}

fn td3_losses<T: Float>(case: &Case) -> Result<Outputs, String> {
    let number = |key: &str| case.number(key).map(T::from_f64);
    let (gamma, noise_clip, max_action) = (
        number("gamma")?,
        number("noise_clip")?,
        number("max_action")?,
    );
    let actor = Actor::<T>::load(case, "a_", max_action)?;
    let (q1, q2) = (
        Critic::<T>::load(case, "q1_")?,
        Critic::<T>::load(case, "q2_")?,
    );
    let target_actor = Actor::<T>::load(case, "t_a_", max_action)?;
    let (target_q1, target_q2) = (
        Critic::<T>::load(case, "t_q1_")?,
        Critic::<T>::load(case, "t_q2_")?,
    );

    // The critic update: the target under no_grad, as TD3.py computes it.
    let target = {
        let tape = Tape::new().no_grad();
        let next_state = tape.constant(&tensor(case, "next_state")?);
        let noise = tape
            .constant(&tensor(case, "noise")?)
            .clamp(-noise_clip, noise_clip)
            .map_err(err)?;
        let next_action = target_actor
            .act(&tape, &next_state)
            .and_then(|a| a.add(&noise))
            .and_then(|a| a.clamp(-max_action, max_action))
            .map_err(err)?;
        let target_q = target_q1
            .q(&tape, &next_state, &next_action)
            .and_then(|a| a.minimum(&target_q2.q(&tape, &next_state, &next_action)?))
            .map_err(err)?;
        let reward = tape.constant(&tensor(case, "reward")?);
        let not_done = tape.constant(&tensor(case, "not_done")?);
        // TD3.py: reward + not_done * discount * target_Q, evaluated left to right.
        let discount = (&not_done * gamma)
            .and_then(|d| d.mul(&target_q))
            .map_err(err)?;
        reward.add(&discount).map_err(err)?.into_value()
    };
    let tape = Tape::new();
    let state = tape.constant(&tensor(case, "state")?);
    let action = tape.constant(&tensor(case, "action")?);
    let target = tape.constant(&target);
    let current_q1 = q1.q(&tape, &state, &action).map_err(err)?;
    let current_q2 = q2.q(&tape, &state, &action).map_err(err)?;
    let critic_loss = mse_loss(&current_q1, &target, Reduction::Mean)
        .and_then(|l| l.add(&mse_loss(&current_q2, &target, Reduction::Mean)?))
        .map_err(err)?;
    let critic_grads = tape
        .gradient(&critic_loss, &[&q1.l1, &q1.l2, &q2.l1, &q2.l2])
        .map_err(err)?;

    // The actor update: through the first critic, gradients for the actor only.
    let tape = Tape::new();
    let state = tape.constant(&tensor(case, "state")?);
    let actor_loss = actor
        .act(&tape, &state)
        .and_then(|a| q1.q(&tape, &state, &a))
        .and_then(|q| q.mean_all())
        .and_then(|m| m.neg())
        .map_err(err)?;
    let actor_grads = tape
        .gradient(&actor_loss, &[&actor.l1, &actor.l2])
        .map_err(err)?;

    let mut out = Outputs::new();
    scalar_output(&mut out, "critic_loss", &critic_loss)?;
    scalar_output(&mut out, "actor_loss", &actor_loss)?;
    let nets = [
        ("q1", [&q1.l1, &q1.l2], &critic_grads),
        ("q2", [&q2.l1, &q2.l2], &critic_grads),
        ("a", [&actor.l1, &actor.l2], &actor_grads),
    ];
    for (prefix, [l1, l2], grads) in nets {
        for (k, l) in [(1, l1), (2, l2)] {
            let [w, b] = l.parameters()[..] else {
                unreachable!("a layer with a bias")
            };
            grad_output(&mut out, &format!("grad_{prefix}_w{k}"), grads, w)?;
            grad_output(&mut out, &format!("grad_{prefix}_b{k}"), grads, b)?;
        }
    }
    Ok(out)
}

fn gru_masked_mean<T: Float>(case: &Case) -> Result<Outputs, String> {
    let x = param::<T>(case, "x")?;
    let u = param::<T>(case, "u")?;
    let [batch, steps, _] = x.value().dims()[..] else {
        return Err("input `x` is not [B, T, F]".to_owned());
    };
    let hidden = u.value().numel();
    let seqs = Sequences::new(&case.input_usize("lengths")?, Some(steps)).map_err(err)?;
    let gru = Gru::from_params(
        param(case, "w_ih")?,
        param(case, "w_hh")?,
        param(case, "b_ih")?,
        param(case, "b_hh")?,
    )
    .map_err(err)?;
    let tape = Tape::new();
    let (outputs, _) = gru
        .run(&tape, &tape.param(&x), Some(&seqs), None)
        .map_err(err)?;
    let loss = outputs
        .matmul(&tape.param(&u).reshape([hidden, 1]).map_err(err)?)
        .and_then(|y| y.reshape([batch, steps]))
        .and_then(|y| y.masked_mean(&seqs))
        .map_err(err)?;
    let grads = tape.gradient(&loss, &[&gru, &x, &u]).map_err(err)?;
    let mut out = Outputs::new();
    scalar_output(&mut out, "loss", &loss)?;
    let names = ["grad_w_ih", "grad_w_hh", "grad_b_ih", "grad_b_hh"];
    for (name, p) in names.into_iter().zip(gru.parameters()) {
        grad_output(&mut out, name, &grads, p)?;
    }
    grad_output(&mut out, "grad_x", &grads, &x)?;
    grad_output(&mut out, "grad_u", &grads, &u)?;
    Ok(out)
}

fn ppo_clip_loss<T: Float>(case: &Case) -> Result<Outputs, String> {
    let clip = T::from_f64(case.number("clip")?);
    let ent_coef = T::from_f64(case.number("ent_coef")?);
    let logits = param::<T>(case, "logits")?;
    let [batch, steps, _] = logits.value().dims()[..] else {
        return Err("input `logits` is not [B, T, A]".to_owned());
    };
    let seqs = Sequences::new(&case.input_usize("lengths")?, Some(steps)).map_err(err)?;
    let actions = case.input_usize("actions")?;
    let tape = Tape::new();
    let logits_var = tape.param(&logits);
    let old_logp = tape.constant(&tensor(case, "old_logp")?);
    let advantages = tape.constant(&tensor(case, "advantages")?);
    let loss = (|| {
        let log_probs = logits_var.log_softmax(2)?;
        let logp = log_probs
            .gather(2, &actions, [batch, steps, 1])?
            .reshape([batch, steps])?;
        let ratio = logp.sub(&old_logp)?.exp()?;
        let clipped = ratio.clamp(T::one() - clip, T::one() + clip)?;
        let surrogate = ratio
            .mul(&advantages)?
            .minimum(&clipped.mul(&advantages)?)?;
        let entropy = logits_var
            .softmax(2)?
            .mul(&log_probs)?
            .sum(2, false)?
            .neg()?;
        let policy_loss = surrogate.masked_mean(&seqs)?.neg()?;
        policy_loss.sub(&entropy.masked_mean(&seqs)?.mul_scalar(ent_coef)?)
    })()
    .map_err(err)?;
    let grads = tape.gradient(&loss, &[&logits]).map_err(err)?;
    let mut out = Outputs::new();
    scalar_output(&mut out, "loss", &loss)?;
    grad_output(&mut out, "grad_logits", &grads, &logits)?;
    Ok(out)
}

fn l2_regularized<T: Float>(case: &Case) -> Result<Outputs, String> {
    let dense = layer::<T>(case, "w", "b")?
        .with_kernel_l2(case.number("l2")?)
        .map_err(err)?;
    let tape = Tape::new();
    let prediction = dense
        .forward(&tape, &tape.constant(&tensor(case, "x")?))
        .map_err(err)?;
    let target = tape.constant(&tensor(case, "t")?);
    let loss = mse_loss(&prediction, &target, Reduction::Mean)
        .and_then(|l| l.add(&l2_penalty(&tape, &dense)?))
        .map_err(err)?;
    let grads = tape.gradient(&loss, &[&dense]).map_err(err)?;
    let mut out = Outputs::new();
    scalar_output(&mut out, "loss", &loss)?;
    let [w, b] = dense.parameters()[..] else {
        unreachable!("a layer with a bias")
    };
    grad_output(&mut out, "grad_w", &grads, w)?;
    grad_output(&mut out, "grad_b", &grads, b)?;
    Ok(out)
}
