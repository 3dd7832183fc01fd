//! The gradient tape and its variables.

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;

use rlgrad_core::{Cpu, Dims, Error, Float, Result, Shape};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use crate::backward::{Constants, Grad, Op};
use crate::finite::{NodeOrigin, NonFinite, first_non_finite};
use crate::gradients::{Entry, Gradients};
use crate::module::Module;
use crate::param::{Param, ParamId};

/// A record of the ops run on [`Var`]s, for reverse-mode differentiation: TensorFlow's
/// `GradientTape` in Rust.
///
/// Put parameters on the tape with [`Tape::param`] (a parameter used twice is one node, so
/// its gradients add up) and inputs with [`Tape::constant`], compute with [`Var`]'s ops,
/// then ask [`Tape::gradient`] for the gradients of a loss with respect to the parameters
/// of any modules (a [`Param`] is a module; make an input a `Param` to get its gradient).
///
/// - A tape is consumed by its first [`Tape::gradient`] call, which frees what it recorded;
///   a second call is an error, unless the tape is [`Tape::persistent`].
/// - [`Tape::no_grad`] makes a tape that records nothing: evaluation without the cost of
///   recording.
/// - [`Tape::reset`] empties a tape for the next step and keeps its memory, so that a
///   training loop does not allocate once warmed up.
/// - Only what leads from the sources to the loss is differentiated: asking for the
///   actor's gradients through a critic computes no critic weight gradients.
/// - Gradients accumulate in a fixed order (the reverse of the recording order), so they
///   are the same bits at every thread count.
///
/// ```
/// use rlgrad_autodiff::{Param, Tape};
/// use rlgrad_tensor::Tensor;
///
/// let w = Param::new("w", Tensor::from_vec(vec![1.0f64, -2.0], [2, 1])?)?;
/// let tape = Tape::new();
/// let x = tape.constant(&Tensor::from_vec(vec![3.0, 4.0], [1, 2])?);
/// let w_on_tape = tape.param(&w);
/// let y = x.matmul(&w_on_tape)?;              // 3 - 8 = -5
/// let loss = (&y * &y)?.sum_all()?;           // 25
/// let grads = tape.gradient(&loss, &[&w])?;
/// assert_eq!(grads.get(&w)?.to_vec()?, [-30.0, -40.0]); // 2 y x
/// assert!(tape.gradient(&loss, &[&w]).is_err());        // consumed
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Tape<T: Float = f32, D: TensorDevice<T> = Cpu> {
    device: D,
    recording: bool,
    persistent: bool,
    check_finite: bool,
    zero: Tensor<T, D>,
    one: Tensor<T, D>,
    state: RefCell<State<T, D>>,
}

struct State<T: Float, D: TensorDevice<T>> {
    nodes: Vec<Op<T, D>>,
    params: Vec<(ParamId, usize)>,
    consumed: bool,
    // Scratch of `gradient`, kept to be reused.
    grads: Vec<Accumulated<T, D>>,
    marks: Vec<Mark>,
    /// With the finite check on: each node's op, call site and inputs, by node.
    origins: Vec<NodeOrigin>,
    /// The first non-finite value the check found.
    non_finite: Option<NonFinite>,
}

/// The requested parameters: their node on the tape (if they were used) and their entry.
type Requests<T, D> = SmallVec<[(Option<usize>, Entry<T, D>); 8]>;

/// The gradients of the requested parameters, in order.
type SourceGrads<T, D> = SmallVec<[Option<Tensor<T, D>>; 8]>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// Leads to no source: not differentiated.
    Skip,
    /// Depends on a source.
    Needed,
    /// A source itself (and needed).
    Source,
}

impl<T: Float> Tape<T, Cpu> {
    /// A recording, non-persistent tape on the default [`Cpu`].
    pub fn new() -> Self {
        Self::new_on(&Cpu::default())
    }
}

impl<T: Float> Default for Tape<T, Cpu> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Float, D: TensorDevice<T>> Tape<T, D> {
    /// A recording, non-persistent tape on `device`.
    ///
    /// # Panics
    ///
    /// Never for the [`Cpu`]; a device that cannot allocate a two-element buffer panics
    /// (there is nothing a tape could do on it).
    pub fn new_on(device: &D) -> Self {
        let scalar = |value: T| {
            Tensor::from_vec_on(device, vec![value], Shape::scalar())
                .expect("a device holds a one-element tensor")
        };
        Self {
            device: device.clone(),
            recording: true,
            persistent: false,
            check_finite: false,
            zero: scalar(T::zero()),
            one: scalar(T::one()),
            state: RefCell::new(State {
                nodes: Vec::new(),
                params: Vec::new(),
                consumed: false,
                grads: Vec::new(),
                marks: Vec::new(),
                origins: Vec::new(),
                non_finite: None,
            }),
        }
    }

    /// This tape made persistent: [`Tape::gradient`] may be called any number of times,
    /// and what the tape recorded lives until [`Tape::reset`] or the tape's end.
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// This tape made a non-recording one: ops compute values only, every variable is a
    /// constant, and no gradient can be asked for (PyTorch's `torch.no_grad()`).
    pub fn no_grad(mut self) -> Self {
        self.recording = false;
        self
    }

    /// This tape made to find the first NaN or infinity: every op's output, and in
    /// [`Tape::gradient`] every gradient an op's backward sends to its inputs, is checked,
    /// and the first non-finite one is named by [`Tape::first_non_finite`] (the op, your
    /// call site, its input shapes, the parameters that fed it) and carried by the
    /// gradients ([`Gradients::first_non_finite`]), so that an optimizer step with its
    /// finite check on names it in its error. PyTorch's `detect_anomaly` for the price of
    /// one read of each output and gradient, on the host where the values are (the Cpu
    /// reads in place; a GPU downloads them); off, it costs nothing. Values are never
    /// changed: the check only watches.
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_tensor::Tensor;
    ///
    /// let w = Param::new("w", Tensor::from_vec(vec![1.0f32, -1.0], [2])?)?;
    /// let tape = Tape::new().check_finite();
    /// let y = tape.param(&w).log()?; // ln(-1) = NaN
    /// let loss = y.sum_all()?;
    /// let origin = tape.first_non_finite().expect("a NaN was produced");
    /// assert_eq!((origin.op, origin.index, origin.params.clone()), ("Var::log", 1, vec!["w".to_owned()]));
    /// assert_eq!(origin.location.file(), file!());
    /// let grads = tape.gradient(&loss, &[&w])?;
    /// assert_eq!(grads.first_non_finite(), Some(&origin));
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn check_finite(mut self) -> Self {
        self.check_finite = true;
        self
    }

    /// Whether the finite check is on ([`Tape::check_finite`]).
    pub fn checks_finite(&self) -> bool {
        self.check_finite
    }

    /// The origin of the first NaN or infinity since the tape was made or reset, when the
    /// finite check is on ([`Tape::check_finite`]); `None` when everything was finite, or
    /// the check is off.
    pub fn first_non_finite(&self) -> Option<NonFinite> {
        self.state.borrow().non_finite.clone()
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// Whether ops are recorded.
    pub fn is_recording(&self) -> bool {
        self.recording
    }

    /// The number of recorded ops (parameters and watched tensors count one each).
    pub fn len(&self) -> usize {
        self.state.borrow().nodes.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets everything recorded and makes the tape usable again, keeping its memory
    /// for the next step; returns the tape to record on (`let tape = self.tape.reset();`).
    /// The variables of the last step borrow the tape, so none survives this.
    pub fn reset(&mut self) -> &Self {
        let state = self.state.get_mut();
        state.nodes.clear();
        state.params.clear();
        state.grads.clear();
        state.origins.clear();
        state.non_finite = None;
        state.consumed = false;
        self
    }

    /// `param` on the tape: the variable gradients of `param` flow into. A parameter put
    /// on a tape twice is the same node, so the gradients of both uses add up.
    #[track_caller]
    pub fn param<'t>(&'t self, param: &Param<T, D>) -> Var<'t, T, D> {
        let value = param.value().clone();
        if !self.recording {
            return Var::new(self, None, value);
        }
        let mut state = self.state.borrow_mut();
        if state.consumed {
            // A consumed tape records nothing more; ops on this variable will say so.
            return Var::new(self, None, value);
        }
        let node = match state.params.iter().find(|(id, _)| *id == param.id()) {
            Some(&(_, node)) => node,
            None => {
                let node = state.nodes.len();
                state.nodes.push(Op::Leaf);
                state.params.push((param.id(), node));
                if self.check_finite {
                    state.origins.push(NodeOrigin {
                        op: "Tape::param",
                        location: Location::caller(),
                        param: Some(param.shared_name().clone()),
                    });
                }
                node
            }
        };
        Var::new(self, Some(node), value)
    }

    /// `value` on the tape as a constant: no gradient flows into it.
    pub fn constant<'t>(&'t self, value: &Tensor<T, D>) -> Var<'t, T, D> {
        Var::new(self, None, value.clone())
    }

    /// An error unless `var` lives on this tape.
    pub(crate) fn check_same(
        &self,
        function: &'static str,
        argument: &'static str,
        var: &Var<'_, T, D>,
    ) -> Result<()> {
        if std::ptr::eq(self, var.tape) {
            Ok(())
        } else {
            Err(Error::value(
                function,
                argument,
                "a variable of the same tape",
                "a variable of another tape",
            ))
        }
    }

    /// The variable holding `value`, the output of an op on `inputs` (its variable
    /// inputs): recorded with `op()` when the tape records and some input is a node, a
    /// constant otherwise. With the finite check on, `value` is checked first, and the
    /// call site of the op (every op up to here is `#[track_caller]`) is kept.
    #[track_caller]
    pub(crate) fn record<'t>(
        &'t self,
        function: &'static str,
        value: Tensor<T, D>,
        inputs: &[&Var<'t, T, D>],
        op: impl FnOnce() -> Op<T, D>,
    ) -> Result<Var<'t, T, D>> {
        self.record_node(function, value, inputs, op, true)
    }

    /// [`Tape::record`] for an op that only moves its input's values (a reshape, a
    /// narrow, a gather, a concatenation): the finite check has nothing to find in them,
    /// the values having been checked where they were computed.
    #[track_caller]
    pub(crate) fn record_view<'t>(
        &'t self,
        function: &'static str,
        value: Tensor<T, D>,
        inputs: &[&Var<'t, T, D>],
        op: impl FnOnce() -> Op<T, D>,
    ) -> Result<Var<'t, T, D>> {
        self.record_node(function, value, inputs, op, false)
    }

    #[track_caller]
    fn record_node<'t>(
        &'t self,
        function: &'static str,
        value: Tensor<T, D>,
        inputs: &[&Var<'t, T, D>],
        op: impl FnOnce() -> Op<T, D>,
        computes_values: bool,
    ) -> Result<Var<'t, T, D>> {
        let origin = if self.check_finite {
            let origin = NodeOrigin {
                op: function,
                location: Location::caller(),
                param: None,
            };
            if computes_values
                && self.state.borrow().non_finite.is_none()
                && let Some((index, bad)) = first_non_finite(&value)?
            {
                let state = &mut *self.state.borrow_mut();
                let shapes = inputs.iter().map(|v| v.shape().clone()).collect();
                let inputs = inputs.iter().filter_map(|v| v.node());
                let params = fed_by(&state.nodes, &state.origins, inputs);
                state.non_finite = Some(named(&origin, false, shapes, params, index, bad));
            }
            Some(origin)
        } else {
            None
        };
        if !self.recording || inputs.iter().all(|v| v.node().is_none()) {
            return Ok(Var::new(self, None, value));
        }
        let mut state = self.state.borrow_mut();
        if state.consumed {
            return Err(consumed_error(function));
        }
        let node = state.nodes.len();
        state.nodes.push(op());
        state.origins.extend(origin);
        Ok(Var::new(self, Some(node), value))
    }

    /// The gradients of `loss` with respect to every parameter of `sources` (modules, in
    /// order; a [`Param`] is a module of one parameter).
    ///
    /// `loss` must hold one element (a scalar, or any shape of one element): a loss of
    /// several elements is an error, as in PyTorch ("grad can be implicitly created only
    /// for scalar outputs"), never silently summed; reduce it yourself (`sum_all`,
    /// `mean_all`) or give the output's gradient to [`Tape::vjp`]. A parameter the loss
    /// does not depend on gets no gradient, which [`Gradients::get`] reports by name.
    /// Errors: `loss` from another tape or of several elements, a no-grad tape, a consumed
    /// tape (a second call on a non-persistent tape), a custom op whose backward returned
    /// gradients of the wrong shapes.
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_tensor::Tensor;
    /// let w = Param::new("w", Tensor::from_vec(vec![1.0f32, 2.0], [2])?)?;
    /// let tape = Tape::new().persistent();
    /// let doubled = tape.param(&w).mul_scalar(2.0)?; // two elements
    /// let err = tape.gradient(&doubled, &[&w]).unwrap_err();
    /// assert!(err.to_string().contains("one element"), "{err}");
    /// let grads = tape.gradient(&doubled.sum_all()?, &[&w])?;
    /// assert_eq!(grads.get(&w)?.to_vec()?, [2.0, 2.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn gradient(
        &self,
        loss: &Var<'_, T, D>,
        sources: &[&dyn Module<T, D>],
    ) -> Result<Gradients<T, D>> {
        const FUNCTION: &str = "Tape::gradient";
        self.check_same(FUNCTION, "loss", loss)?;
        if loss.value().numel() != 1 {
            return Err(Error::shape(
                FUNCTION,
                "loss",
                "one element (reduce the loss, or give its gradient to Tape::vjp)",
                loss.shape(),
            ));
        }
        self.differentiate(FUNCTION, loss, None, sources)
    }

    /// The vector-Jacobian product: the gradients with respect to every parameter of
    /// `sources` of `sum(output * output_grad)`, that is, the backward pass seeded with
    /// `output_grad` (PyTorch's `output.backward(gradient=output_grad)`, JAX's `vjp`).
    /// `output_grad` must have `output`'s shape. Otherwise as [`Tape::gradient`].
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_tensor::Tensor;
    /// let w = Param::new("w", Tensor::from_vec(vec![1.0f64, 2.0], [2])?)?;
    /// let tape = Tape::new();
    /// let squared = tape.param(&w).square()?;
    /// let weights = Tensor::from_vec(vec![10.0, 100.0], [2])?;
    /// let grads = tape.vjp(&squared, &weights, &[&w])?;
    /// assert_eq!(grads.get(&w)?.to_vec()?, [20.0, 400.0]); // 2 w * weights
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn vjp(
        &self,
        output: &Var<'_, T, D>,
        output_grad: &Tensor<T, D>,
        sources: &[&dyn Module<T, D>],
    ) -> Result<Gradients<T, D>> {
        const FUNCTION: &str = "Tape::vjp";
        self.check_same(FUNCTION, "output", output)?;
        if output_grad.shape() != output.shape() {
            return Err(Error::shape(
                FUNCTION,
                "output_grad",
                format_args!("the shape of output, {}", output.shape()),
                output_grad.shape(),
            ));
        }
        self.differentiate(FUNCTION, output, Some(output_grad), sources)
    }

    /// The backward pass from `output` (of this tape), seeded with `seed` (ones when `None`).
    fn differentiate(
        &self,
        function: &'static str,
        output: &Var<'_, T, D>,
        seed: Option<&Tensor<T, D>>,
        sources: &[&dyn Module<T, D>],
    ) -> Result<Gradients<T, D>> {
        if !self.recording {
            return Err(Error::value(
                function,
                "self",
                "a recording tape",
                "a no_grad tape, which records nothing",
            ));
        }
        let mut state = self.state.borrow_mut();
        if state.consumed {
            return Err(consumed_error(function));
        }
        let mut requested: Requests<T, D> = SmallVec::new();
        for module in sources {
            module.visit(&mut |p| {
                let node = state
                    .params
                    .iter()
                    .find(|(id, _)| *id == p.id())
                    .map(|&(_, n)| n);
                requested.push((node, Entry::new(p)));
            });
        }
        if let Some(output_node) = output.node {
            let state = &mut *state;
            let grads_of_sources = self.backward(
                function,
                state,
                output_node,
                output.value(),
                seed,
                &requested,
            )?;
            for ((_, entry), grad) in requested.iter_mut().zip(grads_of_sources) {
                entry.grad = grad;
            }
        }
        if !self.persistent {
            state.consumed = true;
            state.nodes.clear();
            state.params.clear();
            state.origins.clear();
        }
        Ok(Gradients::new(
            requested.into_iter().map(|(_, entry)| entry).collect(),
            state.non_finite.clone(),
        ))
    }

    /// The reverse pass from `loss_node`, seeded with `seed` (ones when `None`); the
    /// gradient of each requested node, in order.
    fn backward(
        &self,
        function: &'static str,
        state: &mut State<T, D>,
        loss_node: usize,
        loss_value: &Tensor<T, D>,
        seed: Option<&Tensor<T, D>>,
        requested: &[(Option<usize>, Entry<T, D>)],
    ) -> Result<SourceGrads<T, D>> {
        let State {
            nodes,
            grads,
            marks,
            origins,
            non_finite,
            ..
        } = state;
        let count = loss_node + 1;
        marks.clear();
        marks.resize(count, Mark::Skip);
        for &(node, _) in requested {
            if let Some(n) = node.filter(|&n| n < count) {
                marks[n] = Mark::Source;
            }
        }
        for (i, op) in nodes[..count].iter().enumerate() {
            if marks[i] == Mark::Skip {
                let mut needed = false;
                op.for_each_input(|input| needed |= marks[input] != Mark::Skip);
                if needed {
                    marks[i] = Mark::Needed;
                }
            }
        }
        grads.clear();
        grads.resize_with(count, Accumulated::default);
        let zero = &self.zero;
        let result = (|| {
            if marks[loss_node] != Mark::Skip {
                let seed = match seed {
                    Some(seed) => seed.clone(),
                    None => self.one.broadcast_to(loss_value.shape().clone())?,
                };
                grads[loss_node].add(Grad::Full(seed), zero)?;
            }
            let constants = Constants { zero };
            for i in (0..count).rev() {
                if marks[i] == Mark::Skip {
                    continue;
                }
                let Some(g) = grads[i].take(zero)? else {
                    continue;
                };
                let op = &nodes[i];
                let needs = |input: usize| marks[input] != Mark::Skip;
                let check =
                    self.check_finite && non_finite.is_none() && !op.backward_moves_values_only();
                let mut found = None;
                let mut emit = |input: usize, grad: Grad<T, D>| {
                    if check && found.is_none() {
                        let (Grad::Full(tensor) | Grad::Part { grad: tensor, .. }) = &grad;
                        found = first_non_finite(tensor)?;
                    }
                    grads[input].add(grad, zero)
                };
                op.backward(&g, &constants, &needs, &mut emit)
                    .map_err(|e| e.in_function(function))?;
                if let Some((index, bad)) = found {
                    // Found once per tape: the backward runs again, for the shapes of the
                    // gradients it sends (those of the inputs), rather than every node
                    // keeping its inputs' shapes.
                    let mut shapes = Vec::new();
                    op.backward(&g, &constants, &needs, &mut |_, grad: Grad<T, D>| {
                        shapes.push(match grad {
                            Grad::Full(tensor) => tensor.shape().clone(),
                            Grad::Part { shape, .. } => shape,
                        });
                        Ok(())
                    })
                    .map_err(|e| e.in_function(function))?;
                    let mut inputs = SmallVec::<[usize; 4]>::new();
                    op.for_each_input(|input| inputs.push(input));
                    let params = fed_by(nodes, origins, inputs);
                    *non_finite = Some(named(&origins[i], true, shapes, params, index, bad));
                }
                if marks[i] == Mark::Source {
                    grads[i].add(Grad::Full(g), zero)?;
                }
            }
            requested
                .iter()
                .map(|&(node, _)| {
                    node.filter(|&n| n < count)
                        .and_then(|n| grads[n].sum.clone())
                        .map(|g| g.contiguous_whole())
                        .transpose()
                })
                .collect()
        })();
        grads.clear();
        result
    }
}

/// A part of a node's gradient not yet placed (see [`Grad::Part`]).
struct Part<T: Float, D: TensorDevice<T>> {
    axis: usize,
    start: usize,
    shape: Shape,
    grad: Tensor<T, D>,
}

impl<T: Float, D: TensorDevice<T>> Part<T, D> {
    fn end(&self) -> usize {
        self.start + self.grad.dims()[self.axis]
    }
}

/// The gradient of one node as its emissions arrive, in the reverse of the recording
/// order: the sum of what arrived so far, and a run of parts (narrowed pieces of one axis
/// that do not overlap) waiting to be placed. A run is placed as one tensor, the parts
/// at their offsets and zeros between them, and added to the sum when something else
/// arrives or the gradient is taken. Since no element of a run gets two parts, this is
/// the sum of the emissions in their order, as if each part had come zero-padded to the
/// whole shape (up to the sign of a zero sum), at a cost of one placement per run instead
/// of one whole-shape tensor per part.
struct Accumulated<T: Float, D: TensorDevice<T>> {
    sum: Option<Tensor<T, D>>,
    parts: SmallVec<[Part<T, D>; 4]>,
}

impl<T: Float, D: TensorDevice<T>> Default for Accumulated<T, D> {
    fn default() -> Self {
        Self {
            sum: None,
            parts: SmallVec::new(),
        }
    }
}

impl<T: Float, D: TensorDevice<T>> Accumulated<T, D> {
    /// Adds an emission (`zero` is a scalar zero, broadcast between placed parts).
    fn add(&mut self, grad: Grad<T, D>, zero: &Tensor<T, D>) -> Result<()> {
        match grad {
            Grad::Full(grad) => {
                self.place(zero)?;
                self.add_to_sum(grad)
            }
            Grad::Part {
                axis,
                start,
                shape,
                grad,
            } => {
                let part = Part {
                    axis,
                    start,
                    shape,
                    grad,
                };
                let clashes = self.parts.iter().any(|p| {
                    p.axis != part.axis
                        || p.shape != part.shape
                        || (part.start < p.end() && p.start < part.end())
                });
                if clashes {
                    self.place(zero)?;
                }
                self.parts.push(part);
                Ok(())
            }
        }
    }

    /// The whole gradient, taken out.
    fn take(&mut self, zero: &Tensor<T, D>) -> Result<Option<Tensor<T, D>>> {
        self.place(zero)?;
        Ok(self.sum.take())
    }

    fn add_to_sum(&mut self, grad: Tensor<T, D>) -> Result<()> {
        self.sum = Some(match self.sum.take() {
            None => grad,
            Some(previous) => previous.add(&grad)?,
        });
        Ok(())
    }

    /// Places the waiting parts, zeros between them, and adds them to the sum.
    fn place(&mut self, zero: &Tensor<T, D>) -> Result<()> {
        let Some(first) = self.parts.first() else {
            return Ok(());
        };
        let (axis, shape) = (first.axis, first.shape.clone());
        let zeros = |len: usize| {
            let mut dims = Dims::from(shape.dims());
            dims[axis] = len;
            zero.broadcast_to(Shape::from(dims))
        };
        self.parts.sort_unstable_by_key(|p| p.start);
        let mut pieces: SmallVec<[Tensor<T, D>; 9]> = SmallVec::new();
        let mut at = 0;
        for part in &self.parts {
            if part.start > at {
                pieces.push(zeros(part.start - at)?);
            }
            pieces.push(part.grad.clone());
            at = part.end();
        }
        if at < shape.dims()[axis] {
            pieces.push(zeros(shape.dims()[axis] - at)?);
        }
        self.parts.clear();
        let refs: SmallVec<[&Tensor<T, D>; 9]> = pieces.iter().collect();
        self.add_to_sum(Tensor::concat(&refs, axis)?)
    }
}

/// The names of the parameters the nodes `from` depend on, in the order they went on the
/// tape (`origins` is kept by node when the finite check is on).
fn fed_by<T: Float, D: TensorDevice<T>>(
    nodes: &[Op<T, D>],
    origins: &[NodeOrigin],
    from: impl IntoIterator<Item = usize>,
) -> Vec<String> {
    let mut seen = vec![false; nodes.len()];
    let mut stack: Vec<usize> = from.into_iter().collect();
    while let Some(node) = stack.pop() {
        if !std::mem::replace(&mut seen[node], true) {
            nodes[node].for_each_input(|input| stack.push(input));
        }
    }
    origins
        .iter()
        .zip(&seen)
        .filter(|&(_, &seen)| seen)
        .filter_map(|(origin, _)| origin.param.as_deref().map(str::to_owned))
        .collect()
}

/// The [`NonFinite`] of the node `origin` describes.
fn named(
    origin: &NodeOrigin,
    in_backward: bool,
    input_shapes: Vec<Shape>,
    params: Vec<String>,
    index: usize,
    value: f64,
) -> NonFinite {
    NonFinite {
        op: origin.op,
        location: origin.location,
        in_backward,
        input_shapes,
        params,
        index,
        value,
    }
}

fn consumed_error(function: &'static str) -> Error {
    Error::value(
        function,
        "tape",
        "a tape that has not been consumed (create it with Tape::persistent() to ask for \
         several gradients, or reset it)",
        "a tape consumed by an earlier Tape::gradient call",
    )
}

impl<T: Float, D: TensorDevice<T>> fmt::Debug for Tape<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.borrow();
        f.debug_struct("Tape")
            .field("device", &self.device)
            .field("recording", &self.recording)
            .field("persistent", &self.persistent)
            .field("ops", &state.nodes.len())
            .field("consumed", &state.consumed)
            .finish()
    }
}

/// A tensor on a [`Tape`]: the value, and where it came from so that gradients can flow
/// back. Ops on variables return `Result` (as tensor ops do); cloning is cheap.
pub struct Var<'t, T: Float = f32, D: TensorDevice<T> = Cpu> {
    tape: &'t Tape<T, D>,
    node: Option<usize>,
    value: Tensor<T, D>,
}

impl<'t, T: Float, D: TensorDevice<T>> Var<'t, T, D> {
    pub(crate) fn new(tape: &'t Tape<T, D>, node: Option<usize>, value: Tensor<T, D>) -> Self {
        Self { tape, node, value }
    }

    /// The tape.
    pub fn tape(&self) -> &'t Tape<T, D> {
        self.tape
    }

    /// The recorded node, `None` for a constant.
    pub(crate) fn node(&self) -> Option<usize> {
        self.node
    }

    /// The value.
    pub fn value(&self) -> &Tensor<T, D> {
        &self.value
    }

    /// The value, taken out of the variable.
    pub fn into_value(self) -> Tensor<T, D> {
        self.value
    }

    /// Whether gradients can flow through this variable (it was recorded).
    pub fn is_tracked(&self) -> bool {
        self.node.is_some()
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        self.value.shape()
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.value.dims()
    }

    /// The single element of a one-element variable.
    pub fn to_scalar(&self) -> Result<T> {
        self.value.to_scalar()
    }

    /// The elements in row-major order.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.value.to_vec()
    }

    /// The same value as a constant: no gradient flows back through it
    /// (`tf.stop_gradient`, PyTorch's `detach`).
    pub fn detach(&self) -> Self {
        Self::new(self.tape, None, self.value.clone())
    }

    /// [`Var::detach`] under TensorFlow's name.
    pub fn stop_gradient(&self) -> Self {
        self.detach()
    }
}

impl<T: Float, D: TensorDevice<T>> Clone for Var<'_, T, D> {
    fn clone(&self) -> Self {
        Self::new(self.tape, self.node, self.value.clone())
    }
}

impl<T: Float, D: TensorDevice<T>> fmt::Debug for Var<'_, T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Var")
            .field("node", &self.node)
            .field("value", &self.value)
            .finish()
    }
}

/// Dense whole-buffer tensors, what optimizers and device-level functions take.
trait ContiguousWhole: Sized {
    fn contiguous_whole(self) -> Result<Self>;
}

impl<T: Float, D: TensorDevice<T>> ContiguousWhole for Tensor<T, D> {
    fn contiguous_whole(mut self) -> Result<Self> {
        if self.dense_buffer().is_none() {
            self.make_mut()?;
        }
        Ok(self)
    }
}
