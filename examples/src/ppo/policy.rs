//! The policy and value networks of PPO: an LSTM (or, for comparison, a dense layer with
//! no memory) feeding a hidden layer and a head, as sb3-contrib's `MlpLstmPolicy` with
//! `enable_critic_lstm=True` and `net_arch=dict(pi=[64], vf=[64])`.

use rlgrad_autodiff::nn::{Forward, Init, Linear, Lstm, LstmState, Module};
use rlgrad_autodiff::{Param, Tape, Var};
use rlgrad_core::{Result, Rng};
use rlgrad_mask::Sequences;
use rlgrad_tensor::Tensor;

/// What carries information across time steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// An LSTM: the policy can integrate its observation history.
    Lstm,
    /// A dense layer with ReLU and no state: a memoryless policy of the same depth.
    None,
}

#[derive(Debug, Clone)]
enum Encoder {
    // Boxed: an LSTM is twice a dense layer's size, and both are hundreds of bytes.
    Lstm(Box<Lstm>),
    Dense(Box<Linear>),
}

/// One branch (the actor or the critic): encoder, `hidden` ReLU layer, linear head.
/// Parameters are named `{name}/lstm/...` or `{name}/dense/...`, `{name}/hidden/...`,
/// `{name}/head/...`.
#[derive(Debug, Clone)]
pub struct Branch {
    encoder: Encoder,
    hidden: Linear,
    head: Linear,
}

impl Branch {
    /// A branch of `inputs` features, `units` hidden units and `outputs` outputs, with
    /// PyTorch's initialization drawn from `rng`.
    pub fn new(
        name: &str,
        memory: Memory,
        inputs: usize,
        units: usize,
        outputs: usize,
        rng: &mut Rng,
    ) -> Result<Self> {
        let encoder = match memory {
            Memory::Lstm => Encoder::Lstm(Box::new(Lstm::new(
                &format!("{name}/lstm"),
                inputs,
                units,
                rng,
            )?)),
            Memory::None => Encoder::Dense(Box::new(Linear::new(
                &format!("{name}/dense"),
                inputs,
                units,
                Init::TorchDefault,
                rng,
            )?)),
        };
        let layer = |suffix: &str, inputs, outputs, rng: &mut Rng| {
            Linear::new(
                &format!("{name}/{suffix}"),
                inputs,
                outputs,
                Init::TorchDefault,
                rng,
            )
        };
        Ok(Self {
            encoder,
            hidden: layer("hidden", units, units, rng)?,
            head: layer("head", units, outputs, rng)?,
        })
    }

    /// The recurrent state's width per row: `[h, c]` of the LSTM, nothing without memory.
    pub fn state_width(&self) -> usize {
        match &self.encoder {
            Encoder::Lstm(lstm) => 2 * lstm.hidden(),
            Encoder::Dense(_) => 0,
        }
    }

    fn head<'t>(&self, tape: &'t Tape, features: &Var<'t>) -> Result<Var<'t>> {
        let hidden = self.hidden.forward(tape, features)?.relu()?;
        self.head.forward(tape, &hidden)
    }

    /// One step of `B` rows: the outputs `[B, outputs]` for `x` `[B, F]` from `state`
    /// (`[B, state_width]`, rows `[h, c]`), and the next state.
    pub fn step<'t>(
        &self,
        tape: &'t Tape,
        x: &Var<'t>,
        state: &[f32],
    ) -> Result<(Var<'t>, Vec<f32>)> {
        match &self.encoder {
            Encoder::Lstm(lstm) => {
                let state = split_state(tape, state, lstm.hidden())?;
                let next = lstm.step(tape, x, &state)?;
                let out = self.head(tape, &next.h)?;
                Ok((out, join_state(&next)?))
            }
            Encoder::Dense(dense) => {
                let features = dense.forward(tape, x)?.relu()?;
                Ok((self.head(tape, &features)?, Vec::new()))
            }
        }
    }

    /// The outputs `[S * T, outputs]` (sequence by sequence, padding included) of the
    /// padded batch-major sequences `x` `[S, T, F]`, each starting from its row of
    /// `state0` (`[S, state_width]`). The padded steps of `x` are selected out before
    /// any arithmetic ([`Var::zero_padding`], or the LSTM's own selection), so whatever
    /// they hold, every output and gradient is bitwise that of zero padding.
    pub fn run<'t>(
        &self,
        tape: &'t Tape,
        x: &Var<'t>,
        seqs: &Sequences,
        state0: &[f32],
    ) -> Result<Var<'t>> {
        let (s, t, f) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let features = match &self.encoder {
            Encoder::Lstm(lstm) => {
                let state0 = split_state(tape, state0, lstm.hidden())?;
                let (outputs, _) = lstm.run(tape, x, Some(seqs), Some(&state0))?;
                outputs.reshape([s * t, lstm.hidden()])?
            }
            Encoder::Dense(dense) => {
                let x = x.zero_padding(seqs)?.reshape([s * t, f])?;
                dense.forward(tape, &x)?.relu()?
            }
        };
        self.head(tape, &features)
    }
}

impl Module for Branch {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param)) {
        match &self.encoder {
            Encoder::Lstm(lstm) => lstm.visit(f),
            Encoder::Dense(dense) => dense.visit(f),
        }
        self.hidden.visit(f);
        self.head.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param)) {
        match &mut self.encoder {
            Encoder::Lstm(lstm) => lstm.visit_mut(f),
            Encoder::Dense(dense) => dense.visit_mut(f),
        }
        self.hidden.visit_mut(f);
        self.head.visit_mut(f);
    }
}

/// Rows `[h, c]` of width `2 * hidden` as an LSTM state of constants.
fn split_state<'t>(tape: &'t Tape, rows: &[f32], hidden: usize) -> Result<LstmState<'t>> {
    let batch = rows.len() / (2 * hidden);
    let (mut h, mut c) = (
        Vec::with_capacity(batch * hidden),
        Vec::with_capacity(batch * hidden),
    );
    for row in rows.chunks_exact(2 * hidden) {
        h.extend_from_slice(&row[..hidden]);
        c.extend_from_slice(&row[hidden..]);
    }
    Ok(LstmState {
        h: tape.constant(&Tensor::from_vec(h, [batch, hidden])?),
        c: tape.constant(&Tensor::from_vec(c, [batch, hidden])?),
    })
}

/// An LSTM state as rows `[h, c]`.
fn join_state(state: &LstmState<'_>) -> Result<Vec<f32>> {
    let hidden = state.h.dims()[1];
    let (h, c) = (state.h.to_vec()?, state.c.to_vec()?);
    let mut rows = Vec::with_capacity(h.len() + c.len());
    for (h, c) in h.chunks_exact(hidden).zip(c.chunks_exact(hidden)) {
        rows.extend_from_slice(h);
        rows.extend_from_slice(c);
    }
    Ok(rows)
}

/// The actor (action logits) and the critic (value), each with its own memory.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Logits of the actions.
    pub actor: Branch,
    /// The state value.
    pub critic: Branch,
}

impl Policy {
    /// The networks for `observations` inputs and `actions` discrete actions.
    pub fn new(
        memory: Memory,
        observations: usize,
        actions: usize,
        units: usize,
        rng: &mut Rng,
    ) -> Result<Self> {
        Ok(Self {
            actor: Branch::new("actor", memory, observations, units, actions, rng)?,
            critic: Branch::new("critic", memory, observations, units, 1, rng)?,
        })
    }
}

impl Module for Policy {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param)) {
        self.actor.visit(f);
        self.critic.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param)) {
        self.actor.visit_mut(f);
        self.critic.visit_mut(f);
    }
}
