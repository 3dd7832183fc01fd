//! The policy and value networks of PPO: an LSTM (or, for comparison, a dense layer with
//! no memory) feeding a hidden layer and a head, as sb3-contrib's `MlpLstmPolicy` with
//! `enable_critic_lstm=True` and `net_arch=dict(pi=[64], vf=[64])`, on any
//! [`TrainDevice`].

use rlgrad_autodiff::nn::{Forward, Init, Linear, Lstm, LstmState, Module};
use rlgrad_autodiff::{Param, Tape, Var};
use rlgrad_core::{Cpu, Error, Result, Rng};
use rlgrad_mask::Sequences;
use rlgrad_tensor::Tensor;

use crate::device::TrainDevice;

/// What carries information across time steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// An LSTM: the policy can integrate its observation history.
    Lstm,
    /// A dense layer with ReLU and no state: a memoryless policy of the same depth.
    None,
}

/// What [`Branch::step`] gives: the outputs and the next state (`None` without memory).
type Stepped<'t, D> = (Var<'t, f32, D>, Option<Var<'t, f32, D>>);

#[derive(Debug, Clone)]
enum Encoder<D: TrainDevice> {
    // Boxed: an LSTM is twice a dense layer's size, and both are hundreds of bytes.
    Lstm(Box<Lstm<f32, D>>),
    Dense(Box<Linear<f32, D>>),
}

/// One branch (the actor or the critic) on device `D`: encoder, `hidden` ReLU layer,
/// linear head. Parameters are named `{name}/lstm/...` or `{name}/dense/...`,
/// `{name}/hidden/...`, `{name}/head/...`.
///
/// Its recurrent state is a `[B, state_width]` tensor on the device, rows `[h, c]` (no
/// columns without memory), so that a caller moves the states of a batch, with whatever
/// else goes along, in one transfer.
#[derive(Debug, Clone)]
pub struct Branch<D: TrainDevice = Cpu> {
    encoder: Encoder<D>,
    hidden: Linear<f32, D>,
    head: Linear<f32, D>,
}

impl<D: TrainDevice> Branch<D> {
    /// A branch of `inputs` features, `units` hidden units and `outputs` outputs on
    /// `device`, with PyTorch's initialization drawn from `rng` (on the host, then
    /// uploaded: the same bits on every device).
    pub fn new_on(
        device: &D,
        name: &str,
        memory: Memory,
        inputs: usize,
        units: usize,
        outputs: usize,
        rng: &mut Rng,
    ) -> Result<Self> {
        let layer = |suffix: &str, inputs, outputs, rng: &mut Rng| {
            Linear::new_on(
                device,
                &format!("{name}/{suffix}"),
                inputs,
                outputs,
                Init::TorchDefault,
                rng,
            )
        };
        let encoder = match memory {
            Memory::Lstm => Encoder::Lstm(Box::new(Lstm::new_on(
                device,
                &format!("{name}/lstm"),
                inputs,
                units,
                rng,
            )?)),
            Memory::None => Encoder::Dense(Box::new(layer("dense", inputs, units, rng)?)),
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

    fn head<'t>(
        &self,
        tape: &'t Tape<f32, D>,
        features: &Var<'t, f32, D>,
    ) -> Result<Var<'t, f32, D>> {
        let hidden = self.hidden.forward(tape, features)?.relu()?;
        self.head.forward(tape, &hidden)
    }

    /// One step of `B` rows: the outputs `[B, outputs]` for `x` `[B, F]` from `state`
    /// (`[B, state_width]`), and the next state (`None` without memory).
    pub fn step<'t>(
        &self,
        tape: &'t Tape<f32, D>,
        x: &Var<'t, f32, D>,
        state: &Tensor<f32, D>,
    ) -> Result<Stepped<'t, D>> {
        match &self.encoder {
            Encoder::Lstm(lstm) => {
                let rows = x.dims().first().copied().unwrap_or(0);
                let state = split_state("Branch::step", tape, state, rows, lstm.hidden())?;
                let next = lstm.step(tape, x, &state)?;
                let out = self.head(tape, &next.h)?;
                Ok((out, Some(Var::concat(&[&next.h, &next.c], 1)?)))
            }
            Encoder::Dense(dense) => {
                let features = dense.forward(tape, x)?.relu()?;
                Ok((self.head(tape, &features)?, None))
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
        tape: &'t Tape<f32, D>,
        x: &Var<'t, f32, D>,
        seqs: &Sequences,
        state0: &Tensor<f32, D>,
    ) -> Result<Var<'t, f32, D>> {
        let (s, t, f) = (x.dims()[0], x.dims()[1], x.dims()[2]);
        let features = match &self.encoder {
            Encoder::Lstm(lstm) => {
                let state0 = split_state("Branch::run", tape, state0, s, lstm.hidden())?;
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

impl<D: TrainDevice> Module<f32, D> for Branch<D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<f32, D>)) {
        match &self.encoder {
            Encoder::Lstm(lstm) => lstm.visit(f),
            Encoder::Dense(dense) => dense.visit(f),
        }
        self.hidden.visit(f);
        self.head.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<f32, D>)) {
        match &mut self.encoder {
            Encoder::Lstm(lstm) => lstm.visit_mut(f),
            Encoder::Dense(dense) => dense.visit_mut(f),
        }
        self.hidden.visit_mut(f);
        self.head.visit_mut(f);
    }
}

/// `state` (`[rows, 2 * hidden]`, rows `[h, c]`) as an LSTM state of constants; an error naming
/// `function` for another shape.
fn split_state<'t, D: TrainDevice>(
    function: &'static str,
    tape: &'t Tape<f32, D>,
    state: &Tensor<f32, D>,
    rows: usize,
    hidden: usize,
) -> Result<LstmState<'t, f32, D>> {
    if state.dims() != [rows, 2 * hidden] {
        return Err(Error::shape(
            function,
            "state",
            format_args!("[{rows}, {}], rows [h, c]", 2 * hidden),
            state.shape(),
        ));
    }
    Ok(LstmState {
        h: tape.constant(&state.narrow(1, 0, hidden)?),
        c: tape.constant(&state.narrow(1, hidden, hidden)?),
    })
}

/// The actor (action logits) and the critic (value) on device `D`, each with its own
/// memory.
#[derive(Debug, Clone)]
pub struct Policy<D: TrainDevice = Cpu> {
    /// Logits of the actions.
    pub actor: Branch<D>,
    /// The state value.
    pub critic: Branch<D>,
}

impl Policy {
    /// The networks for `observations` inputs and `actions` discrete actions, on the Cpu.
    pub fn new(
        memory: Memory,
        observations: usize,
        actions: usize,
        units: usize,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::new_on(&Cpu::default(), memory, observations, actions, units, rng)
    }
}

impl<D: TrainDevice> Policy<D> {
    /// [`Policy::new`]'s networks on `device`, with their bits on every device.
    pub fn new_on(
        device: &D,
        memory: Memory,
        observations: usize,
        actions: usize,
        units: usize,
        rng: &mut Rng,
    ) -> Result<Self> {
        let branch = |name, outputs, rng: &mut Rng| {
            Branch::new_on(device, name, memory, observations, units, outputs, rng)
        };
        Ok(Self {
            actor: branch("actor", actions, rng)?,
            critic: branch("critic", 1, rng)?,
        })
    }
}

impl<D: TrainDevice> Module<f32, D> for Policy<D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<f32, D>)) {
        self.actor.visit(f);
        self.critic.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<f32, D>)) {
        self.actor.visit_mut(f);
        self.critic.visit_mut(f);
    }
}
