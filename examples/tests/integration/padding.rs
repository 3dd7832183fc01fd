//! The recurrent PPO loss ignores padding: with garbage (NaN, ±inf, ±1e30, random bits)
//! in every padded step of every column of a minibatch, its losses and every gradient are
//! bitwise those of zero padding, for the LSTM policy and the memoryless one.

use proptest::prelude::*;
use rlgrad_autodiff::Tape;
use rlgrad_autodiff::nn::Module;
use rlgrad_core::{Result, Rng};
use rlgrad_examples::ppo::{Config, Memory, Minibatch, Policy, ppo_losses};
use rlgrad_mask::Sequences;
use rlgrad_testkit::strategies::{self, config};

const OBSERVATIONS: usize = 2;
const ACTIONS: usize = 2;
const UNITS: usize = 8;

/// `[S, T, width]` values from `rng` at valid steps; at padded steps zeros, or the
/// garbage in turn.
fn column(seqs: &Sequences, width: usize, rng: &mut Rng, garbage: Option<&[f32]>) -> Vec<f32> {
    let mut fill = garbage.unwrap_or(&[0.0]).iter().copied().cycle();
    let mut values = Vec::new();
    for &len in seqs.lengths() {
        for t in 0..seqs.max_len() {
            for _ in 0..width {
                let valid = rng.normal::<f32>(0.0, 1.0);
                values.push(if t < len { valid } else { fill.next().unwrap() });
            }
        }
    }
    values
}

/// The losses and the policy's gradients, as bits.
fn losses_and_gradients(
    memory: Memory,
    lengths: &[usize],
    seed: u64,
    garbage: Option<&[f32]>,
) -> Result<Vec<Vec<u32>>> {
    let seqs = Sequences::new(lengths, None)?;
    let policy = Policy::new(
        memory,
        OBSERVATIONS,
        ACTIONS,
        UNITS,
        &mut Rng::new(seed, "init"),
    )?;
    let mut rng = Rng::new(seed, "minibatch");
    let observations = column(&seqs, OBSERVATIONS, &mut rng, garbage);
    let actions: Vec<f32> = column(&seqs, 1, &mut rng, garbage)
        .iter()
        .zip(seqs.mask()?.as_bools())
        .map(|(&a, &valid)| if valid { f32::from(a > 0.0) } else { a })
        .collect();
    let [old_log_probs, advantages, returns] =
        [(); 3].map(|()| column(&seqs, 1, &mut rng, garbage));
    let state = |width: usize, rng: &mut Rng| -> Vec<f32> {
        (0..seqs.batch() * width)
            .map(|_| rng.normal(0.0, 0.5))
            .collect()
    };
    let actor_state0 = state(policy.actor.state_width(), &mut rng);
    let critic_state0 = state(policy.critic.state_width(), &mut rng);
    let batch = Minibatch {
        seqs: &seqs,
        observations: &observations,
        actions: &actions,
        old_log_probs: &old_log_probs,
        advantages: &advantages,
        returns: &returns,
        actor_state0: &actor_state0,
        critic_state0: &critic_state0,
    };
    let config = Config {
        ent_coef: 0.01,
        ..Config::recurrent()
    };
    let tape = Tape::new();
    let losses = ppo_losses(&policy, &tape, &batch, 0.2, &config)?;
    let bits = |values: Vec<f32>| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut out = vec![
        bits(losses.total.to_vec()?),
        bits(losses.policy.to_vec()?),
        bits(losses.value.to_vec()?),
        bits(losses.entropy.to_vec()?),
    ];
    let grads = tape.gradient(&losses.total, &[&policy])?;
    for param in policy.parameters() {
        out.push(bits(grads.get(param)?.to_vec()?));
    }
    Ok(out)
}

proptest! {
    #![proptest_config(config(16))]

    #[test]
    fn prop_garbage_in_padded_steps_changes_no_bit_of_the_ppo_loss(
        lengths in strategies::vec(1usize..6, 2..5),
        extra in 0usize..2,
        garbage in strategies::vec(strategies::garbage::<f32>(), 1..16),
        seed in any::<u64>(),
        lstm in any::<bool>(),
    ) {
        let memory = if lstm { Memory::Lstm } else { Memory::None };
        // One more step than the longest, sometimes, so that every sequence is padded.
        let mut lengths = lengths;
        if extra == 1 {
            lengths.push(lengths.iter().copied().max().unwrap_or(1) + 1);
        }
        let zeros = losses_and_gradients(memory, &lengths, seed, None).unwrap();
        let dirty = losses_and_gradients(memory, &lengths, seed, Some(&garbage)).unwrap();
        prop_assert!(zeros == dirty, "garbage in the padding changed the loss or a gradient");
        prop_assert!(zeros.iter().flatten().all(|&v| f32::from_bits(v).is_finite()));
    }
}
