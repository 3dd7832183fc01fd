//! Stacked and bidirectional GRUs and LSTMs: PyTorch's `num_layers`, `bidirectional` and
//! `dropout`, over padded batches with lengths.

use rlgrad_core::kernels::RandomKernel;
use rlgrad_core::kernels::sequence::Sequences;
use rlgrad_core::{Cpu, Device, Error, Float, Result, Rng, Shape};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use super::recurrent::{Recurrence, check_input};
use super::{Cell, CellDevice, GruCell, LstmCell, LstmState, Module, Recurrent, child_path};
use crate::param::Param;
use crate::tape::{Tape, Var};

/// The shape of a [`StackedRecurrent`], with PyTorch's defaults (`Default`: one layer,
/// one direction, no dropout).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RnnConfig {
    /// Layers (`num_layers`, default 1): layer 0 reads the input `[B, T, F]`, each later
    /// layer the outputs of the one below, `[B, T, num_directions * H]`.
    pub num_layers: usize,
    /// Whether every layer also reads each sequence backward (`bidirectional`, default
    /// `false`), from its last valid step to its first.
    pub bidirectional: bool,
    /// The probability that an output of a layer below the top one is zeroed on its way
    /// up while training (`dropout`, default 0: off); the kept ones are scaled by
    /// `1 / (1 - dropout)`. Unlike PyTorch, which accepts 1, it must lie in `[0, 1)`.
    pub dropout: f64,
}

impl Default for RnnConfig {
    fn default() -> Self {
        Self {
            num_layers: 1,
            bidirectional: false,
            dropout: 0.0,
        }
    }
}

impl RnnConfig {
    /// 2 for a bidirectional network, else 1 (PyTorch's `num_directions`).
    pub fn num_directions(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }
}

/// A stack of `num_layers` recurrent layers of cell `K`, each optionally bidirectional:
/// `torch.nn.GRU`/`LSTM` with `batch_first=True` on packed sequences. Use it as
/// [`StackedGru`] or [`StackedLstm`].
///
/// **Parameters** are named as PyTorch's `state_dict` names them, under the layer's
/// `name`: `{name}/weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`, and
/// the same with the suffix `_reverse` for the backward direction, in PyTorch's order
/// (layer by layer, the forward direction first) for [`Module::visit`], drawing and
/// paths (`weight_ih_l0`, ...). Their shapes are those of [`Recurrent`], with input width
/// `F` in layer 0 and `num_directions * H` above it, and each is drawn uniform in
/// `[-1/sqrt(H), 1/sqrt(H))` from the `Rng` in that order.
///
/// **Running** ([`StackedGru::run`], [`StackedLstm::run`]) over a batch-major `x`
/// `[B, T, F]` gives the outputs of the top layer, `[B, T, num_directions * H]` (the
/// forward direction's `H` features, then the backward one's), and the last states
/// `[num_layers * num_directions, B, H]`, in PyTorch's order: index
/// `layer * num_directions + direction`. Initial states have that shape too (zeros when
/// `None`).
///
/// **Padding** (`seqs`): the forward direction of sequence `b` of length `L_b` runs over
/// steps `0..L_b` and keeps its state after step `L_b - 1`; the backward direction starts
/// at step `L_b - 1`, not at the padded end, and ends after step 0, so its output at step
/// `t` is that of the reversed valid steps, as with PyTorch's packed sequences. Every
/// output past `L_b` is 0. Each sequence is reversed within its own length by a
/// permutation of the rows (gradients flow back through it), run forward, and its
/// outputs put back in order; padded steps stay in place and are selected out as
/// [`Gru::run`](super::Gru::run) says, so whatever they hold (NaN, inf) the values and
/// gradients are bitwise those of zero padding.
///
/// **Dropout** between layers applies when `config.dropout > 0` and the run is given a
/// `training` [`Rng`] (`None` is evaluation, PyTorch's `eval()`): before each layer above
/// the first, each input value is kept when a uniform draw in `[0, 1)` is at least
/// `dropout` (one draw per value of `[B, T, num_directions * H]`, row-major, layer by
/// layer), and the kept ones are multiplied by `1 / (1 - dropout)`; the dropped ones are
/// selected to 0, never multiplied by 0.
///
/// ```
/// use rlgrad_autodiff::nn::{RnnConfig, StackedLstm};
/// use rlgrad_autodiff::Tape;
/// use rlgrad_core::Rng;
/// use rlgrad_mask::Sequences;
/// use rlgrad_tensor::Tensor;
/// let config = RnnConfig { num_layers: 2, bidirectional: true, ..RnnConfig::default() };
/// let lstm = StackedLstm::<f32>::new("policy/lstm", 3, 8, config, &mut Rng::new(0, "init"))?;
/// let tape = Tape::new();
/// let x = tape.constant(&Tensor::ones([2, 5, 3])?);       // [B, T, F], batch-major
/// let seqs = Sequences::new(&[5, 2], Some(5))?;
/// let (outputs, last) = lstm.run(&tape, &x, Some(&seqs), None, None)?;
/// assert_eq!(outputs.dims(), [2, 5, 16]);                  // [B, T, 2 * H]
/// assert_eq!(last.h.dims(), [4, 2, 8]);                    // [layers * directions, B, H]
/// // The backward direction of the second sequence starts at its step 1, so its step 0
/// // has seen both valid steps; steps 2.. are padding, and 0.
/// assert!(outputs.to_vec()?[5 * 16 + 2 * 16..].iter().all(|&v| v == 0.0));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct StackedRecurrent<K: Cell, T: Float = f32, D: Device = Cpu> {
    /// One layer per layer and direction, in PyTorch's order.
    cells: Vec<Recurrent<K, T, D>>,
    config: RnnConfig,
}

/// A stacked, optionally bidirectional GRU ([`StackedRecurrent`] of [`Gru`](super::Gru)
/// layers).
pub type StackedGru<T = f32, D = Cpu> = StackedRecurrent<GruCell, T, D>;

/// A stacked, optionally bidirectional LSTM ([`StackedRecurrent`] of
/// [`Lstm`](super::Lstm) layers).
pub type StackedLstm<T = f32, D = Cpu> = StackedRecurrent<LstmCell, T, D>;

/// PyTorch's name of `field` (`weight_ih`, ...) in layer `layer`, direction `direction`.
fn torch_name(field: &str, layer: usize, direction: usize) -> String {
    let suffix = if direction == 1 { "_reverse" } else { "" };
    format!("{field}_l{layer}{suffix}")
}

impl<K: Cell, T: Float> StackedRecurrent<K, T, Cpu> {
    /// A network of `inputs` features and `hidden` units per direction on the default
    /// [`Cpu`].
    pub fn new(
        name: &str,
        inputs: usize,
        hidden: usize,
        config: RnnConfig,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::new_on(&Cpu::default(), name, inputs, hidden, config, rng)
    }
}

impl<K: Cell, T: Float, D: Device> StackedRecurrent<K, T, D> {
    /// A network on `device`. Errors: `inputs`, `hidden` or `config.num_layers` zero,
    /// `config.dropout` outside `[0, 1)`.
    pub fn new_on(
        device: &D,
        name: &str,
        inputs: usize,
        hidden: usize,
        config: RnnConfig,
        rng: &mut Rng,
    ) -> Result<Self>
    where
        D: RandomKernel<T>,
    {
        let function = K::STACKED_CONSTRUCTOR;
        if config.num_layers == 0 {
            return Err(Error::value(
                function,
                "config.num_layers",
                "at least 1 layer",
                0,
            ));
        }
        rlgrad_core::check::unit_interval_open(function, "config.dropout", config.dropout)?;
        let directions = config.num_directions();
        let mut cells = Vec::new();
        for layer in 0..config.num_layers {
            let width = if layer == 0 {
                inputs
            } else {
                directions * hidden
            };
            for direction in 0..directions {
                cells.push(Recurrent::drawn(
                    device,
                    function,
                    width,
                    hidden,
                    rng,
                    |field| format!("{name}/{}", torch_name(field, layer, direction)),
                )?);
            }
        }
        Ok(Self { cells, config })
    }

    /// The configuration it was built with.
    pub fn config(&self) -> RnnConfig {
        self.config
    }

    /// The number of hidden units `H` per direction.
    pub fn hidden(&self) -> usize {
        self.cells[0].hidden()
    }

    /// The number of input features `F` of the first layer.
    pub fn inputs(&self) -> usize {
        self.cells[0].inputs()
    }

    /// PyTorch's path of the parameter `field` of layer `k` of `cells`.
    fn path(&self, prefix: &str, field: &str, k: usize) -> String {
        let directions = self.config.num_directions();
        child_path(prefix, &torch_name(field, k / directions, k % directions))
    }
}

impl<K: Cell, T: Float, D: Device> Module<T, D> for StackedRecurrent<K, T, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        self.cells.iter().for_each(|cell| cell.visit(f));
    }

    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        self.cells.iter_mut().for_each(|cell| cell.visit_mut(f));
    }

    /// `prefix/weight_ih_l0`, `prefix/weight_hh_l0`, ..., `prefix/bias_hh_l0_reverse`,
    /// `prefix/weight_ih_l1`, ...: PyTorch's `named_parameters`.
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        for (k, cell) in self.cells.iter().enumerate() {
            for (field, p) in cell.fields() {
                f(&self.path(prefix, field, k), p);
            }
        }
    }

    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        let paths: Vec<String> = (0..self.cells.len())
            .flat_map(|k| {
                self.cells[k]
                    .fields()
                    .map(|(field, _)| self.path(prefix, field, k))
            })
            .collect();
        let params = self.cells.iter_mut().flat_map(|cell| cell.fields_mut());
        for (path, (_, p)) in paths.iter().zip(params) {
            f(path, p);
        }
    }
}

/// For `[B * T, F]` rows of batch-major data: the row that step `t` of sequence `b` reads
/// when each sequence is reversed within its length `L_b` (`T` without `seqs`), step
/// `L_b - 1 - t`; padded steps stay in place. A permutation that is its own inverse.
fn reversal(batch: usize, steps: usize, seqs: Option<&Sequences>) -> Vec<usize> {
    (0..batch)
        .flat_map(|b| {
            let len = seqs.map_or(steps, |s| s.lengths()[b]);
            (0..steps).map(move |t| b * steps + if t < len { len - 1 - t } else { t })
        })
        .collect()
}

/// `v` `[B, T, F]` with its rows permuted by `index` ([`reversal`]).
#[track_caller]
fn reordered<'t, T: Float, D: TensorDevice<T>>(
    v: &Var<'t, T, D>,
    index: &[usize],
) -> Result<Var<'t, T, D>> {
    let (rows, shape) = (index.len(), v.shape().clone());
    v.reshape([rows, v.dims()[2]])?
        .index_select(0, index)?
        .reshape(shape)
}

/// Inverted dropout: each value of `x` kept when a uniform draw from `rng` is at least
/// `p`, then scaled by `1 / (1 - p)`; the others selected to 0.
#[track_caller]
fn dropout<'t, T: Float, D: TensorDevice<T>>(
    x: &Var<'t, T, D>,
    p: f64,
    rng: &mut Rng,
) -> Result<Var<'t, T, D>> {
    let keep: Vec<T> = (0..x.value().numel())
        .map(|_| {
            if rng.uniform_f64() < p {
                T::zero()
            } else {
                T::one()
            }
        })
        .collect();
    let device = x.tape().device();
    let keep = Tensor::from_vec_on(device, keep, x.shape().clone())?;
    let zero = x
        .tape()
        .constant(&Tensor::zeros_on(device, Shape::scalar())?);
    Var::where_cond(&keep, &x.mul_scalar(T::from_f64(1.0 / (1.0 - p)))?, &zero)
}

/// The state type of one layer of cell `K`.
type State<'t, K, T, D> = <Recurrent<K, T, D> as Recurrence<'t, T, D>>::State;

/// The top layer's outputs and the last states.
type Outcome<'t, K, T, D> = (Var<'t, T, D>, State<'t, K, T, D>);

impl<K: Cell, T: Float, D: TensorDevice<T>> StackedRecurrent<K, T, D> {
    /// The network over `x`, for [`StackedGru::run`] and [`StackedLstm::run`].
    #[track_caller]
    fn run_layers<'t>(
        &self,
        function: &'static str,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        seqs: Option<&Sequences>,
        state0: Option<&State<'t, K, T, D>>,
        mut training: Option<&mut Rng>,
    ) -> Result<Outcome<'t, K, T, D>>
    where
        Recurrent<K, T, D>: Recurrence<'t, T, D>,
    {
        let (batch, steps) = check_input(function, self.inputs(), x, seqs)?;
        let (count, hidden) = (self.cells.len(), self.hidden());
        let state0 = match state0 {
            Some(state) => {
                let parts = <Recurrent<K, T, D>>::parts(state);
                for part in &parts {
                    if part.dims() != [count, batch, hidden] {
                        return Err(Error::shape(
                            function,
                            "state0",
                            format_args!(
                                "[{count}, {batch}, {hidden}] \
                                 ([num_layers * num_directions, B, H])"
                            ),
                            part.shape(),
                        ));
                    }
                }
                Some(parts)
            }
            None => None,
        };
        let zeros = tape.constant(&Tensor::zeros_on(tape.device(), [batch, hidden])?);
        let index = reversal(batch, steps, seqs);
        let directions = self.config.num_directions();
        let mut input = x.clone();
        let mut lasts: Vec<SmallVec<[Var<'t, T, D>; 2]>> = Vec::with_capacity(count);
        for (layer, cells) in self.cells.chunks(directions).enumerate() {
            if layer > 0
                && self.config.dropout > 0.0
                && let Some(rng) = training.as_deref_mut()
            {
                input = dropout(&input, self.config.dropout, rng)?;
            }
            let mut outputs: SmallVec<[Var<'t, T, D>; 2]> = SmallVec::new();
            for (direction, cell) in cells.iter().enumerate() {
                let k = layer * directions + direction;
                let mut parts = SmallVec::new();
                match &state0 {
                    Some(given) => {
                        for part in given {
                            parts.push(part.narrow(0, k, 1)?.squeeze(0)?);
                        }
                    }
                    None => parts
                        .extend(std::iter::repeat_n(&zeros, <Recurrent<K, T, D>>::PARTS).cloned()),
                }
                let state = <Recurrent<K, T, D>>::from_parts(parts);
                let (output, last) = if direction == 0 {
                    Recurrence::run(cell, function, tape, &input, seqs, state)?
                } else {
                    let reversed = reordered(&input, &index)?;
                    let (output, last) =
                        Recurrence::run(cell, function, tape, &reversed, seqs, state)?;
                    (reordered(&output, &index)?, last)
                };
                outputs.push(output);
                lasts.push(<Recurrent<K, T, D>>::parts(&last));
            }
            input = match outputs.as_slice() {
                [forward, backward] => Var::concat(&[forward, backward], 2)?,
                _ => outputs.swap_remove(0),
            };
        }
        let mut stacked = SmallVec::new();
        for k in 0..<Recurrent<K, T, D>>::PARTS {
            let refs: Vec<&Var<'t, T, D>> = lasts.iter().map(|parts| &parts[k]).collect();
            stacked.push(Var::stack(&refs, 0)?);
        }
        Ok((input, <Recurrent<K, T, D>>::from_parts(stacked)))
    }
}

impl<T: Float, D: TensorDevice<T>> StackedGru<T, D> {
    /// The network over a padded batch-major `x` `[B, T, F]` from `h0`
    /// `[num_layers * num_directions, B, H]` (zeros when `None`): the top layer's outputs
    /// `[B, T, num_directions * H]` and the last states `[num_layers * num_directions, B,
    /// H]`, padding handled as [`StackedRecurrent`] says. `training`: the [`Rng`] of the
    /// dropout masks, or `None` for no dropout (evaluation). Errors: `x` not
    /// `[B, T, F]` with `T >= 1`, `seqs` not `B` sequences padded to `T`, `h0` of another
    /// shape.
    #[track_caller]
    pub fn run<'t>(
        &self,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        seqs: Option<&Sequences>,
        h0: Option<&Var<'t, T, D>>,
        training: Option<&mut Rng>,
    ) -> Result<(Var<'t, T, D>, Var<'t, T, D>)> {
        self.run_layers("StackedGru::run", tape, x, seqs, h0, training)
    }
}

impl<T: Float, D: CellDevice<T>> StackedLstm<T, D> {
    /// The network over a padded batch-major `x` `[B, T, F]` from `state0` (`h` and `c`
    /// `[num_layers * num_directions, B, H]` each, zeros when `None`): the top layer's
    /// outputs `[B, T, num_directions * H]` and the last states (`h` and `c`, that shape),
    /// as [`StackedGru::run`] says.
    #[track_caller]
    pub fn run<'t>(
        &self,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        seqs: Option<&Sequences>,
        state0: Option<&LstmState<'t, T, D>>,
        training: Option<&mut Rng>,
    ) -> Result<(Var<'t, T, D>, LstmState<'t, T, D>)> {
        self.run_layers("StackedLstm::run", tape, x, seqs, state0, training)
    }
}
