//! GRU and LSTM layers with PyTorch's equations, gate order and parameter layout, and a
//! runner over padded batches with lengths.

use std::marker::PhantomData;
use std::sync::OnceLock;

use rlgrad_core::kernels::cell::{LstmBackward, LstmForward};
use rlgrad_core::kernels::sequence::Sequences;
use rlgrad_core::kernels::{CellKernel, RandomKernel};
use rlgrad_core::{Cpu, Device, Error, Float, Result, Rng, Shape};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use super::{Module, child_path};
use crate::backward::CustomOp;
use crate::param::Param;
use crate::tape::{Tape, Var};

/// What makes a recurrent layer a GRU or an LSTM: its number of gates and the names of
/// its constructors in messages (the equations are the `step` and `run` methods of
/// [`Gru`] and [`Lstm`]). Sealed: those two are the cells.
pub trait Cell: sealed::Sealed + std::fmt::Debug + Clone {
    /// Gates per hidden unit: 3 for a GRU, 4 for an LSTM.
    const GATES: usize;
    /// The constructors, as errors name them.
    const CONSTRUCTORS: (&'static str, &'static str);
    /// The constructor of the stacked layer ([`StackedRecurrent`](super::StackedRecurrent)),
    /// as errors name it.
    const STACKED_CONSTRUCTOR: &'static str;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::GruCell {}
    impl Sealed for super::LstmCell {}
}

/// The GRU cell ([`Gru`]).
#[derive(Debug, Clone, Copy)]
pub struct GruCell;

impl Cell for GruCell {
    const GATES: usize = 3;
    const CONSTRUCTORS: (&'static str, &'static str) = ("Gru::new", "Gru::from_params");
    const STACKED_CONSTRUCTOR: &'static str = "StackedGru::new";
}

/// The LSTM cell ([`Lstm`]).
#[derive(Debug, Clone, Copy)]
pub struct LstmCell;

impl Cell for LstmCell {
    const GATES: usize = 4;
    const CONSTRUCTORS: (&'static str, &'static str) = ("Lstm::new", "Lstm::from_params");
    const STACKED_CONSTRUCTOR: &'static str = "StackedLstm::new";
}

/// A one-layer recurrent network of cell `K` with PyTorch's parameters: `{name}/weight_ih`
/// `[gates * H, F]`, `{name}/weight_hh` `[gates * H, H]`, `{name}/bias_ih` and
/// `{name}/bias_hh` `[gates * H]` (as `torch.nn.GRU`/`LSTM`'s `*_l0`), all drawn uniform
/// in `[-1/sqrt(H), 1/sqrt(H))` as PyTorch does. Use it as [`Gru`] or [`Lstm`].
#[derive(Debug, Clone)]
pub struct Recurrent<K: Cell, T: Float = f32, D: Device = Cpu> {
    weight_ih: Param<T, D>,
    weight_hh: Param<T, D>,
    bias_ih: Param<T, D>,
    bias_hh: Param<T, D>,
    hidden: usize,
    cell: PhantomData<K>,
}

impl<K: Cell, T: Float> Recurrent<K, T, Cpu> {
    /// A layer of `inputs` features and `hidden` units on the default [`Cpu`].
    pub fn new(name: &str, inputs: usize, hidden: usize, rng: &mut Rng) -> Result<Self> {
        Self::new_on(&Cpu::default(), name, inputs, hidden, rng)
    }
}

impl<K: Cell, T: Float, D: Device> Recurrent<K, T, D> {
    /// A layer on `device`. An error when `inputs` or `hidden` is zero.
    pub fn new_on(
        device: &D,
        name: &str,
        inputs: usize,
        hidden: usize,
        rng: &mut Rng,
    ) -> Result<Self>
    where
        D: RandomKernel<T>,
    {
        Self::drawn(device, K::CONSTRUCTORS.0, inputs, hidden, rng, |field| {
            format!("{name}/{field}")
        })
    }

    /// A layer drawn as [`Recurrent::new_on`] says, its parameters in PyTorch's order
    /// (`weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`), each named `name(field)`: the
    /// stacked layers name theirs as PyTorch's `state_dict` does (`weight_ih_l1_reverse`).
    pub(super) fn drawn(
        device: &D,
        function: &'static str,
        inputs: usize,
        hidden: usize,
        rng: &mut Rng,
        name: impl Fn(&str) -> String,
    ) -> Result<Self>
    where
        D: RandomKernel<T>,
    {
        for (argument, value) in [("inputs", inputs), ("hidden", hidden)] {
            if value == 0 {
                return Err(Error::value(function, argument, "at least 1 feature", 0));
            }
        }
        let gates = K::GATES;
        rlgrad_core::check::product(function, "hidden", gates, hidden)?;
        let bound = T::from_f64(1.0 / (hidden as f64).sqrt());
        let mut draw = |field: &str, shape: Shape| -> Result<Param<T, D>> {
            Param::new(
                name(field),
                Tensor::rand_uniform_on(device, shape, -bound, bound, rng)
                    .map_err(|e| e.in_function(function))?,
            )
        };
        Ok(Self {
            weight_ih: draw("weight_ih", Shape::from([gates * hidden, inputs]))?,
            weight_hh: draw("weight_hh", Shape::from([gates * hidden, hidden]))?,
            bias_ih: draw("bias_ih", Shape::from([gates * hidden]))?,
            bias_hh: draw("bias_hh", Shape::from([gates * hidden]))?,
            hidden,
            cell: PhantomData,
        })
    }

    /// A layer from PyTorch-layout parameters (`weight_ih` `[gates * H, F]`, `weight_hh`
    /// `[gates * H, H]`, biases `[gates * H]`), for instance loaded from a checkpoint of
    /// `torch.nn.GRU` or `LSTM`. An error for other shapes.
    pub fn from_params(
        weight_ih: Param<T, D>,
        weight_hh: Param<T, D>,
        bias_ih: Param<T, D>,
        bias_hh: Param<T, D>,
    ) -> Result<Self> {
        let (function, gates) = (K::CONSTRUCTORS.1, K::GATES);
        let hidden = match weight_hh.shape().dims() {
            &[rows, h] if h > 0 && rows == gates * h => h,
            _ => {
                return Err(Error::shape(
                    function,
                    "weight_hh",
                    format_args!("[{gates} * H, H]"),
                    weight_hh.shape(),
                ));
            }
        };
        match weight_ih.shape().dims() {
            &[rows, f] if f > 0 && rows == gates * hidden => {}
            _ => {
                return Err(Error::shape(
                    function,
                    "weight_ih",
                    format_args!("[{}, F]", gates * hidden),
                    weight_ih.shape(),
                ));
            }
        }
        for (argument, bias) in [("bias_ih", &bias_ih), ("bias_hh", &bias_hh)] {
            if bias.shape().dims() != [gates * hidden] {
                return Err(Error::shape(
                    function,
                    argument,
                    format_args!("[{}]", gates * hidden),
                    bias.shape(),
                ));
            }
        }
        Ok(Self {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            hidden,
            cell: PhantomData,
        })
    }
}

impl<K: Cell, T: Float, D: Device> Recurrent<K, T, D> {
    /// The number of hidden units `H`.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The number of input features `F`.
    pub fn inputs(&self) -> usize {
        self.weight_ih.shape().dims()[1]
    }
}

impl<K: Cell, T: Float, D: Device> Recurrent<K, T, D> {
    /// The parameters with their field names, in PyTorch's order.
    pub(super) fn fields(&self) -> [(&'static str, &Param<T, D>); 4] {
        [
            ("weight_ih", &self.weight_ih),
            ("weight_hh", &self.weight_hh),
            ("bias_ih", &self.bias_ih),
            ("bias_hh", &self.bias_hh),
        ]
    }

    /// [`Recurrent::fields`], mutably.
    pub(super) fn fields_mut(&mut self) -> [(&'static str, &mut Param<T, D>); 4] {
        [
            ("weight_ih", &mut self.weight_ih),
            ("weight_hh", &mut self.weight_hh),
            ("bias_ih", &mut self.bias_ih),
            ("bias_hh", &mut self.bias_hh),
        ]
    }
}

impl<K: Cell, T: Float, D: Device> Module<T, D> for Recurrent<K, T, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        self.fields().into_iter().for_each(|(_, p)| f(p));
    }

    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        self.fields_mut().into_iter().for_each(|(_, p)| f(p));
    }

    /// `prefix/weight_ih`, `prefix/weight_hh`, `prefix/bias_ih`, `prefix/bias_hh`.
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        for (field, p) in self.fields() {
            f(&child_path(prefix, field), p);
        }
    }

    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        for (field, p) in self.fields_mut() {
            f(&child_path(prefix, field), p);
        }
    }
}

impl<K: Cell, T: Float, D: TensorDevice<T>> Recurrent<K, T, D> {
    /// `x @ weight_ih^T + bias_ih` for `x: [N, F]`.
    #[track_caller]
    fn input_gates_of<'t>(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        x.matmul(&tape.param(&self.weight_ih).t()?)?
            .add(&tape.param(&self.bias_ih))
    }

    /// `h @ weight_hh^T + bias_hh`.
    #[track_caller]
    fn hidden_gates<'t>(&self, tape: &'t Tape<T, D>, h: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        h.matmul(&tape.param(&self.weight_hh).t()?)?
            .add(&tape.param(&self.bias_hh))
    }

    fn check_step(
        &self,
        function: &'static str,
        x: &Var<'_, T, D>,
        state: &Var<'_, T, D>,
    ) -> Result<()> {
        if x.shape().ndim() != 2 || x.dims()[1] != self.inputs() {
            return Err(Error::shape(
                function,
                "x",
                format_args!("[B, {}]", self.inputs()),
                x.shape(),
            ));
        }
        if state.dims() != [x.dims()[0], self.hidden] {
            return Err(Error::shape(
                function,
                "state",
                format_args!("[{}, {}]", x.dims()[0], self.hidden),
                state.shape(),
            ));
        }
        Ok(())
    }
}

/// A recurrent cell: one step from the input gates, and how a finished sequence keeps its
/// state; [`Recurrence::run`] is the runner over padded batches that GRU and LSTM share.
pub(super) trait Recurrence<'t, T: Float, D: TensorDevice<T>> {
    type State;

    /// The number of [`Recurrence::parts`].
    const PARTS: usize;

    /// The variables a state is made of: `h`, or `h` and `c`.
    fn parts(state: &Self::State) -> SmallVec<[Var<'t, T, D>; 2]>;

    /// The state made of `parts`, in the order of [`Recurrence::parts`] (as many).
    fn from_parts(parts: SmallVec<[Var<'t, T, D>; 2]>) -> Self::State;

    fn inputs(&self) -> usize;

    /// `x @ weight_ih^T + bias_ih` for `x: [N, F]`.
    fn input_gates(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>>;

    /// The output and the next state from the input gates `x W_ih^T + b_ih` of one step.
    fn advance(
        &self,
        tape: &'t Tape<T, D>,
        gates: &Var<'t, T, D>,
        state: &Self::State,
    ) -> Result<(Var<'t, T, D>, Self::State)>;

    /// `next` for the sequences where `valid` (`[B, 1]`, 0/1) is 1, else `previous`.
    #[track_caller]
    fn keep(
        valid: &Tensor<T, D>,
        next: &Self::State,
        previous: &Self::State,
    ) -> Result<Self::State> {
        let mut kept = SmallVec::new();
        for (next, previous) in Self::parts(next).iter().zip(&Self::parts(previous)) {
            kept.push(Var::where_cond(valid, next, previous)?);
        }
        Ok(Self::from_parts(kept))
    }

    /// The cell over a padded batch-major `x` `[B, T, F]`: the input gates of all steps in
    /// one matmul, then the recurrence; with `seqs`, a sequence's state stops changing
    /// after its last valid step and its outputs past it are 0.
    ///
    /// The cell still runs over padded steps (the batch keeps its rows), so padding is
    /// made harmless by selection at both ends: the input's padded steps are replaced by
    /// zeros before the input gates (as [`Var::zero_padding`] does), and the state and outputs
    /// past a sequence's end are selected ([`Var::where_cond`]). The cell then only ever
    /// sees finite padded rows, whose zero gradients stay zero, and every value and
    /// gradient is bitwise what it is with zero padding, whatever the padding held.
    #[track_caller]
    fn run(
        &self,
        function: &'static str,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        seqs: Option<&Sequences>,
        mut state: Self::State,
    ) -> Result<(Var<'t, T, D>, Self::State)> {
        let inputs = self.inputs();
        let (batch, steps) = check_input(function, inputs, x, seqs)?;
        // Up to the shortest sequence every row is valid, and the step needs no masking.
        let all_valid = seqs.map_or(steps, |s| s.lengths().iter().copied().min().unwrap_or(0));
        // Whether step `t` of each sequence is valid, `[T, B, 1]`, when some step is not.
        let valid = match seqs {
            Some(s) if all_valid < steps => {
                let flags: Vec<T> = (0..steps)
                    .flat_map(|t| {
                        s.lengths()
                            .iter()
                            .map(move |&len| if t < len { T::one() } else { T::zero() })
                    })
                    .collect();
                Some(Tensor::from_vec_on(
                    tape.device(),
                    flags,
                    [steps, batch, 1],
                )?)
            }
            _ => None,
        };
        let zero = tape.constant(&Tensor::zeros_on(tape.device(), Shape::scalar())?);
        let time_major = x.transpose(0, 1)?;
        // The input's padded steps selected to zeros (what `Var::zero_padding` does, here
        // with the time-major flags the steps below select with).
        let time_major = match &valid {
            Some(valid) => Var::where_cond(valid, &time_major, &zero)?,
            None => time_major,
        };
        let gates = self.input_gates(tape, &time_major.reshape([steps * batch, inputs])?)?;
        let mut outputs: SmallVec<[Var<'t, T, D>; 16]> = SmallVec::with_capacity(steps);
        for t in 0..steps {
            let (output, next) = self.advance(tape, &gates.narrow(0, t * batch, batch)?, &state)?;
            match &valid {
                Some(valid) if t >= all_valid => {
                    let here = valid.narrow(0, t, 1)?.squeeze(0)?;
                    state = Self::keep(&here, &next, &state)?;
                    outputs.push(Var::where_cond(&here, &output, &zero)?);
                }
                _ => {
                    state = next;
                    outputs.push(output);
                }
            }
        }
        let refs: SmallVec<[&Var<'t, T, D>; 16]> = outputs.iter().collect();
        Ok((Var::stack(&refs, 1)?, state))
    }
}

/// `[B, T]` of a padded batch-major `x` `[B, T, inputs]` with at least one step, whose
/// `seqs` (if any) are `B` sequences padded to `T`.
pub(super) fn check_input<T: Float, D: TensorDevice<T>>(
    function: &'static str,
    inputs: usize,
    x: &Var<'_, T, D>,
    seqs: Option<&Sequences>,
) -> Result<(usize, usize)> {
    if x.shape().ndim() != 3 || x.dims()[2] != inputs {
        return Err(Error::shape(
            function,
            "x",
            format_args!("[B, T, {inputs}]"),
            x.shape(),
        ));
    }
    let (batch, steps) = (x.dims()[0], x.dims()[1]);
    if steps == 0 {
        return Err(Error::empty(function, "x", "at least one time step"));
    }
    if let Some(s) = seqs
        && (s.batch(), s.max_len()) != (batch, steps)
    {
        return Err(Error::shape(
            function,
            "seqs",
            format_args!("{batch} sequences padded to {steps} steps, like x"),
            format_args!("{} sequences padded to {}", s.batch(), s.max_len()),
        ));
    }
    Ok((batch, steps))
}

/// A one-layer GRU with PyTorch's equations and gate order (`r`, `z`, `n`):
///
/// ```text
/// r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr)
/// z = sigmoid(x W_iz^T + b_iz + h W_hz^T + b_hz)
/// n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))
/// h' = (h - n) * z + n            (= (1 - z) n + z h, in ATen's order of operations)
/// ```
///
/// Parameters as [`Recurrent`] says, with `gates = 3`.
///
/// ```
/// use rlgrad_autodiff::nn::Gru;
/// use rlgrad_autodiff::Tape;
/// use rlgrad_core::Rng;
/// use rlgrad_mask::Sequences;
/// use rlgrad_tensor::Tensor;
/// let gru = Gru::<f32>::new("policy/gru", 3, 8, &mut Rng::new(0, "init"))?;
/// let tape = Tape::new();
/// let x = tape.constant(&Tensor::ones([2, 5, 3])?);       // [B, T, F], batch-major
/// let seqs = Sequences::new(&[5, 2], Some(5))?;
/// let (outputs, last) = gru.run(&tape, &x, Some(&seqs), None)?;
/// assert_eq!((outputs.dims(), last.dims()), (&[2, 5, 8][..], &[2, 8][..]));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub type Gru<T = f32, D = Cpu> = Recurrent<GruCell, T, D>;

/// A one-layer LSTM with PyTorch's equations and gate order (`i`, `f`, `g`, `o`):
///
/// ```text
/// gates = (x W_ih^T + b_ih) + (h W_hh^T + b_hh)
/// i, f, o = sigmoid(gates_i), sigmoid(gates_f), sigmoid(gates_o);  g = tanh(gates_g)
/// c' = f * c + i * g;   h' = o * tanh(c')
/// ```
///
/// Parameters as [`Recurrent`] says, with `gates = 4`. After the two matmuls, a step is
/// one fused op ([`CellKernel`], so the device must be a [`CellDevice`]) rather than a dozen
/// elementwise ops over narrowed gates: the same formulas in the same order, so the same
/// forward bits, and its backward follows the unfused ops' rules (a test finds the same
/// gradient bits too).
pub type Lstm<T = f32, D = Cpu> = Recurrent<LstmCell, T, D>;

/// A device that runs tensors and the fused recurrent cells ([`CellKernel`]): what an
/// [`Lstm`] needs.
pub trait CellDevice<T: Float>: TensorDevice<T> + CellKernel<T> {}

impl<T: Float, D: TensorDevice<T> + CellKernel<T>> CellDevice<T> for D {}

/// The fused LSTM cell ([`CellKernel`]) as a custom op: `gates` `[B, 4H]` and `c` `[B, H]`
/// in, `[2, B, H]` (`h'`, then `c'`) out. The forward's activations stay with the op for
/// its backward, as the unfused ops keep their outputs.
struct FusedLstmCell<T: Float, D: CellDevice<T>> {
    cache: OnceLock<Tensor<T, D>>,
}

/// The dense buffer of a tensor made dense.
fn buffer_of<T: Float, D: CellDevice<T>>(t: &Tensor<T, D>) -> &D::Buffer<T> {
    t.dense_buffer()
        .expect("Tensor::dense gives a dense buffer")
}

/// Two new tensors of `shapes` that one kernel call `fill` writes entirely.
fn two_outputs<T: Float, D: CellDevice<T>>(
    device: &D,
    (first, second): (Shape, Shape),
    fill: impl FnOnce(&mut D::Buffer<T>, &mut D::Buffer<T>) -> Result<()>,
) -> Result<(Tensor<T, D>, Tensor<T, D>)> {
    let mut inner = None;
    let outer = Tensor::from_kernel(device, first, |a| {
        inner = Some(Tensor::from_kernel(device, second, |b| fill(a, b))?);
        Ok(())
    })?;
    Ok((outer, inner.expect("the kernel wrote both outputs")))
}

impl<T: Float, D: CellDevice<T>> FusedLstmCell<T, D> {
    /// `[batch, hidden]` of the cell state input.
    fn sizes(c: &Tensor<T, D>) -> Result<(usize, usize)> {
        match *c.dims() {
            [batch, hidden] => Ok((batch, hidden)),
            _ => Err(Error::shape("lstm_cell", "c", "[B, H]", c.shape())),
        }
    }
}

impl<T: Float, D: CellDevice<T>> CustomOp<T, D> for FusedLstmCell<T, D> {
    fn name(&self) -> &str {
        "lstm_cell"
    }

    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>> {
        let (gates, c) = (inputs[0].dense()?, inputs[1].dense()?);
        let (batch, hidden) = Self::sizes(&c)?;
        let device = c.device();
        let shapes = ([batch, 5 * hidden].into(), [2, batch, hidden].into());
        let (cache, state) = two_outputs(device, shapes, |cache, state| {
            let buffers = LstmForward {
                gates: buffer_of(&gates),
                c: buffer_of(&c),
                cache,
                state,
            };
            device.lstm_cell(batch, hidden, buffers)
        })?;
        self.cache
            .set(cache)
            .map_err(|_| Error::state("lstm_cell", "forward", "one call per op", "a second"))?;
        Ok(state)
    }

    fn backward(
        &self,
        inputs: &[&Tensor<T, D>],
        _output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>> {
        let cache = self.cache.get().ok_or_else(|| {
            Error::state("lstm_cell", "backward", "a forward first", "no forward")
        })?;
        let (c, grad) = (inputs[1].dense()?, grad.dense()?);
        let (batch, hidden) = Self::sizes(&c)?;
        let device = c.device();
        let shapes = ([batch, 4 * hidden].into(), [batch, hidden].into());
        let (grad_gates, grad_c) = two_outputs(device, shapes, |grad_gates, grad_c| {
            let buffers = LstmBackward {
                cache: buffer_of(cache),
                c: buffer_of(&c),
                grad_state: buffer_of(&grad),
                grad_gates,
                grad_c,
            };
            device.lstm_cell_backward(batch, hidden, buffers)
        })?;
        Ok(vec![Some(grad_gates), Some(grad_c)])
    }
}

/// The state of an [`Lstm`]: hidden `h` and cell `c`, `[B, H]` each.
#[derive(Debug, Clone)]
pub struct LstmState<'t, T: Float = f32, D: TensorDevice<T> = Cpu> {
    /// The hidden state.
    pub h: Var<'t, T, D>,
    /// The cell state.
    pub c: Var<'t, T, D>,
}

impl<K: Cell, T: Float, D: TensorDevice<T>> Recurrent<K, T, D> {
    /// The state a run starts from: `given` when it is `[batch, H]`, zeros when `None`.
    #[track_caller]
    fn initial_state<'t>(
        &self,
        function: &'static str,
        tape: &'t Tape<T, D>,
        given: Option<&Var<'t, T, D>>,
        batch: usize,
    ) -> Result<Var<'t, T, D>> {
        match given {
            Some(h) if h.dims() == [batch, self.hidden] => Ok(h.clone()),
            Some(h) => Err(Error::shape(
                function,
                "state0",
                format_args!("[{batch}, {}]", self.hidden),
                h.shape(),
            )),
            None => Ok(tape.constant(&Tensor::zeros_on(tape.device(), [batch, self.hidden])?)),
        }
    }
}

impl<T: Float, D: TensorDevice<T>> Gru<T, D> {
    #[track_caller]
    fn cell<'t>(
        &self,
        tape: &'t Tape<T, D>,
        gi: &Var<'t, T, D>,
        h: &Var<'t, T, D>,
    ) -> Result<Var<'t, T, D>> {
        let hidden = self.hidden;
        let gh = self.hidden_gates(tape, h)?;
        let gate = |v: &Var<'t, T, D>, k: usize| v.narrow(1, k * hidden, hidden);
        let r = gate(gi, 0)?.add(&gate(&gh, 0)?)?.sigmoid()?;
        let z = gate(gi, 1)?.add(&gate(&gh, 1)?)?.sigmoid()?;
        let n = gate(gi, 2)?.add(&r.mul(&gate(&gh, 2)?)?)?.tanh()?;
        h.sub(&n)?.mul(&z)?.add(&n)
    }

    /// One step: the next hidden state `[B, H]` from `x` `[B, F]` and `h` `[B, H]`.
    #[track_caller]
    pub fn step<'t>(
        &self,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        h: &Var<'t, T, D>,
    ) -> Result<Var<'t, T, D>> {
        self.check_step("Gru::step", x, h)?;
        self.cell(tape, &Recurrence::input_gates(self, tape, x)?, h)
    }

    /// The GRU over a padded batch-major `x` `[B, T, F]` from `h0` `[B, H]` (zeros when
    /// `None`): the outputs `[B, T, H]` and the last state `[B, H]`. With `seqs`, each
    /// sequence's state is the one after its last valid step and its outputs past it are
    /// 0. Padding is selected out, never multiplied by zero: whatever the padded steps of
    /// `x` hold (NaN, inf, garbage), the outputs, the last state and every gradient are
    /// bitwise those of zero padding.
    #[track_caller]
    pub fn run<'t>(
        &self,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        seqs: Option<&Sequences>,
        h0: Option<&Var<'t, T, D>>,
    ) -> Result<(Var<'t, T, D>, Var<'t, T, D>)> {
        let batch = x.dims().first().copied().unwrap_or(0);
        let h0 = self.initial_state("Gru::run", tape, h0, batch)?;
        Recurrence::run(self, "Gru::run", tape, x, seqs, h0)
    }
}

impl<T: Float, D: CellDevice<T>> Lstm<T, D> {
    fn cell<'t>(
        &self,
        tape: &'t Tape<T, D>,
        gi: &Var<'t, T, D>,
        state: &LstmState<'t, T, D>,
    ) -> Result<LstmState<'t, T, D>> {
        let gates = gi.add(&self.hidden_gates(tape, &state.h)?)?;
        let cell = FusedLstmCell {
            cache: OnceLock::new(),
        };
        let next = tape.custom(cell, &[&gates, &state.c])?;
        Ok(LstmState {
            h: next.narrow(0, 0, 1)?.squeeze(0)?,
            c: next.narrow(0, 1, 1)?.squeeze(0)?,
        })
    }

    /// One step from `x` `[B, F]` and `state`.
    pub fn step<'t>(
        &self,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        state: &LstmState<'t, T, D>,
    ) -> Result<LstmState<'t, T, D>> {
        self.check_step("Lstm::step", x, &state.h)?;
        self.check_step("Lstm::step", x, &state.c)?;
        self.cell(tape, &Recurrence::input_gates(self, tape, x)?, state)
    }

    /// The LSTM over a padded batch-major `x` `[B, T, F]` from `state0` (zeros when
    /// `None`): the outputs (`h` at every step) `[B, T, H]` and the last state, with
    /// `seqs` handled as in [`Gru::run`].
    #[track_caller]
    pub fn run<'t>(
        &self,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        seqs: Option<&Sequences>,
        state0: Option<&LstmState<'t, T, D>>,
    ) -> Result<(Var<'t, T, D>, LstmState<'t, T, D>)> {
        let batch = x.dims().first().copied().unwrap_or(0);
        let state0 = LstmState {
            h: self.initial_state("Lstm::run", tape, state0.map(|s| &s.h), batch)?,
            c: self.initial_state("Lstm::run", tape, state0.map(|s| &s.c), batch)?,
        };
        Recurrence::run(self, "Lstm::run", tape, x, seqs, state0)
    }
}

impl<'t, T: Float, D: TensorDevice<T>> Recurrence<'t, T, D> for Gru<T, D> {
    type State = Var<'t, T, D>;
    const PARTS: usize = 1;

    fn parts(h: &Var<'t, T, D>) -> SmallVec<[Var<'t, T, D>; 2]> {
        smallvec::smallvec![h.clone()]
    }

    fn from_parts(parts: SmallVec<[Var<'t, T, D>; 2]>) -> Var<'t, T, D> {
        parts.into_iter().next().expect("a GRU state is one part")
    }

    fn inputs(&self) -> usize {
        Recurrent::inputs(self)
    }

    #[track_caller]
    fn input_gates(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        self.input_gates_of(tape, x)
    }

    #[track_caller]
    fn advance(
        &self,
        tape: &'t Tape<T, D>,
        gates: &Var<'t, T, D>,
        h: &Var<'t, T, D>,
    ) -> Result<(Var<'t, T, D>, Var<'t, T, D>)> {
        let next = self.cell(tape, gates, h)?;
        Ok((next.clone(), next))
    }
}

impl<'t, T: Float, D: CellDevice<T>> Recurrence<'t, T, D> for Lstm<T, D> {
    type State = LstmState<'t, T, D>;
    const PARTS: usize = 2;

    fn parts(state: &LstmState<'t, T, D>) -> SmallVec<[Var<'t, T, D>; 2]> {
        smallvec::smallvec![state.h.clone(), state.c.clone()]
    }

    fn from_parts(parts: SmallVec<[Var<'t, T, D>; 2]>) -> LstmState<'t, T, D> {
        let mut parts = parts.into_iter();
        let mut next = || parts.next().expect("an LSTM state is two parts");
        LstmState {
            h: next(),
            c: next(),
        }
    }

    fn inputs(&self) -> usize {
        Recurrent::inputs(self)
    }

    #[track_caller]
    fn input_gates(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        self.input_gates_of(tape, x)
    }

    #[track_caller]
    fn advance(
        &self,
        tape: &'t Tape<T, D>,
        gates: &Var<'t, T, D>,
        state: &LstmState<'t, T, D>,
    ) -> Result<(Var<'t, T, D>, LstmState<'t, T, D>)> {
        let next = self.cell(tape, gates, state)?;
        Ok((next.h.clone(), next))
    }
}
