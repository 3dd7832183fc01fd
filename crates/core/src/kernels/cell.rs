//! Fused recurrent cells: the elementwise part of one LSTM step (the gate activations,
//! the cell update and the output) in one pass over the gates, forward and backward.
//!
//! An LSTM step unfused is a dozen elementwise ops over narrowed gate columns, each with
//! its own output buffer and its own backward; with the small batches of recurrent RL
//! (a few sequences, 64-256 units) their dispatch costs more than their arithmetic. The
//! fused kernels compute the same formulas, per element, in the same order of operations
//! as the unfused ops, so the forward gives the same bits; the backward follows the
//! unfused ops' rules and fixes one order for the two gradients that meet at the new cell
//! state (written in [`lstm_backward`]).
//!
//! # Layout
//!
//! `B` rows, `H` units, every buffer dense row-major:
//!
//! | buffer | shape | contents |
//! |---|---|---|
//! | `gates` | `[B, 4H]` | pre-activations `x W_ih^T + b_ih + h W_hh^T + b_hh`, gate order `i, f, g, o` (PyTorch's) |
//! | `c` | `[B, H]` | the cell state the step starts from |
//! | `state` | `[2, B, H]` | the new hidden state `h'`, then the new cell state `c'` |
//! | `cache` | `[B, 5H]` | what the backward reads: `i, f, g, o` activated and `tanh(c')`, row by row |
//! | `grad_state` | `[2, B, H]` | the loss's gradients with respect to `h'` and `c'` |
//! | `grad_gates` | `[B, 4H]` | the gradient with respect to `gates` |
//! | `grad_c` | `[B, H]` | the gradient with respect to `c` |

use crate::kernels::{BinaryOp, UnaryOp};
use crate::{Device, Error, Float, Result};

/// One element's forward, as every device computes it:
///
/// ```text
/// i, f, o = sigmoid(gate_i), sigmoid(gate_f), sigmoid(gate_o);  g = tanh(gate_g)
/// c' = (f * c) + (i * g);   h' = o * tanh(c')
/// ```
///
/// with [`UnaryOp::Sigmoid`] and [`UnaryOp::Tanh`], so that the result is bitwise that of
/// the unfused ops. Returns `[i, f, g, o, tanh(c')]` (the cache) and `(h', c')`.
#[inline(always)]
pub fn lstm_forward<T: Float>(gates: [T; 4], c: T) -> ([T; 5], (T, T)) {
    let sigmoid = |x| UnaryOp::Sigmoid.apply(x);
    let (i, f) = (sigmoid(gates[0]), sigmoid(gates[1]));
    let (g, o) = (UnaryOp::Tanh.apply(gates[2]), sigmoid(gates[3]));
    let c_next = f * c + i * g;
    let tanh_c = UnaryOp::Tanh.apply(c_next);
    ([i, f, g, o, tanh_c], (o * tanh_c, c_next))
}

/// One element's backward from the cache `[i, f, g, o, tanh(c')]`, the old cell state `c`
/// and the gradients `dh`, `dc_next` of `h'` and `c'`:
///
/// ```text
/// dc' = dc_next + (dh * o) * (1 - tanh(c') * tanh(c'))    the two paths to c', in this order
/// d gate_i = (dc' * g) * (1 - i) * i      d gate_f = (dc' * c) * (1 - f) * f
/// d gate_g = (dc' * i) * (1 - g * g)      d gate_o = (dh * tanh(c')) * (1 - o) * o
/// dc = dc' * f
/// ```
///
/// each factor as the unfused op's backward computes it ([`BinaryOp::SigmoidBackward`],
/// [`BinaryOp::TanhBackward`], a product's gradient is the other factor times the
/// output's). Returns the four gate gradients and `dc`.
#[inline(always)]
pub fn lstm_backward<T: Float>(cache: [T; 5], c: T, dh: T, dc_next: T) -> ([T; 4], T) {
    let [i, f, g, o, tanh_c] = cache;
    let dc = dc_next + BinaryOp::TanhBackward.apply(dh * o, tanh_c);
    let sigmoid_backward = |grad, y| BinaryOp::SigmoidBackward.apply(grad, y);
    (
        [
            sigmoid_backward(dc * g, i),
            sigmoid_backward(dc * c, f),
            BinaryOp::TanhBackward.apply(dc * i, g),
            sigmoid_backward(dh * tanh_c, o),
        ],
        dc * f,
    )
}

/// The buffers of [`CellKernel::lstm_cell`], by name.
#[derive(Debug)]
pub struct LstmForward<'a, B: ?Sized> {
    /// `[B, 4H]` pre-activations.
    pub gates: &'a B,
    /// `[B, H]` cell state.
    pub c: &'a B,
    /// `[B, 5H]`, written: the activations and `tanh(c')`.
    pub cache: &'a mut B,
    /// `[2, B, H]`, written: `h'` then `c'`.
    pub state: &'a mut B,
}

/// The buffers of [`CellKernel::lstm_cell_backward`], by name.
#[derive(Debug)]
pub struct LstmBackward<'a, B: ?Sized> {
    /// `[B, 5H]` from the forward.
    pub cache: &'a B,
    /// `[B, H]` cell state the forward started from.
    pub c: &'a B,
    /// `[2, B, H]` gradients of `h'` and `c'`.
    pub grad_state: &'a B,
    /// `[B, 4H]`, written.
    pub grad_gates: &'a mut B,
    /// `[B, H]`, written.
    pub grad_c: &'a mut B,
}

/// Fused LSTM cells, implemented by every device with [`lstm_forward`] and
/// [`lstm_backward`] applied element by element (bitwise, like every rlgrad kernel). Each
/// buffer must have the length its shape in the [module docs](self) gives; an error names
/// the first that does not.
pub trait CellKernel<T: Float>: Device {
    /// One LSTM step's forward over `batch` rows of `hidden` units.
    fn lstm_cell(
        &self,
        batch: usize,
        hidden: usize,
        buffers: LstmForward<'_, Self::Buffer<T>>,
    ) -> Result<()>;

    /// Its backward.
    fn lstm_cell_backward(
        &self,
        batch: usize,
        hidden: usize,
        buffers: LstmBackward<'_, Self::Buffer<T>>,
    ) -> Result<()>;
}

impl<B: ?Sized> LstmForward<'_, B> {
    /// `Ok` when every buffer has the length of its shape for `batch` rows of `hidden`
    /// units (`len` measures a buffer), else an error naming the first that does not.
    pub fn check(
        &self,
        function: &'static str,
        batch: usize,
        hidden: usize,
        len: impl Fn(&B) -> usize,
    ) -> Result<()> {
        check_lengths(
            function,
            (batch, hidden),
            &[
                ("gates", 4, len(self.gates)),
                ("c", 1, len(self.c)),
                ("cache", 5, len(self.cache)),
                ("state", 2, len(self.state)),
            ],
        )
    }
}

impl<B: ?Sized> LstmBackward<'_, B> {
    /// As [`LstmForward::check`].
    pub fn check(
        &self,
        function: &'static str,
        batch: usize,
        hidden: usize,
        len: impl Fn(&B) -> usize,
    ) -> Result<()> {
        check_lengths(
            function,
            (batch, hidden),
            &[
                ("cache", 5, len(self.cache)),
                ("c", 1, len(self.c)),
                ("grad_state", 2, len(self.grad_state)),
                ("grad_gates", 4, len(self.grad_gates)),
                ("grad_c", 1, len(self.grad_c)),
            ],
        )
    }
}

impl<'a, T> From<LstmForward<'a, Vec<T>>> for LstmForward<'a, [T]> {
    fn from(b: LstmForward<'a, Vec<T>>) -> Self {
        Self {
            gates: b.gates,
            c: b.c,
            cache: b.cache,
            state: b.state,
        }
    }
}

impl<'a, T> From<LstmBackward<'a, Vec<T>>> for LstmBackward<'a, [T]> {
    fn from(b: LstmBackward<'a, Vec<T>>) -> Self {
        Self {
            cache: b.cache,
            c: b.c,
            grad_state: b.grad_state,
            grad_gates: b.grad_gates,
            grad_c: b.grad_c,
        }
    }
}

/// `Ok` when each `(name, parts, length)` has `parts * batch * hidden` elements.
fn check_lengths(
    function: &'static str,
    (batch, hidden): (usize, usize),
    buffers: &[(&'static str, usize, usize)],
) -> Result<()> {
    for &(name, parts, len) in buffers {
        let want = batch
            .checked_mul(hidden)
            .and_then(|units| units.checked_mul(parts));
        if want != Some(len) {
            return Err(Error::shape(
                function,
                name,
                format_args!("{parts} x {batch} x {hidden} elements"),
                format_args!("{len} elements"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forward_is_the_unfused_formula() {
        let (cache, (h, c_next)) = lstm_forward([0.5f64, -1.0, 2.0, 0.25], 3.0);
        let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
        let (i, f, g, o) = (sigmoid(0.5), sigmoid(-1.0), 2.0f64.tanh(), sigmoid(0.25));
        assert!((c_next - (f * 3.0 + i * g)).abs() < 1e-15);
        assert!((h - o * c_next.tanh()).abs() < 1e-15);
        assert_eq!(cache[4], UnaryOp::Tanh.apply(c_next));
    }

    #[test]
    fn the_backward_matches_central_differences() {
        let gates = [0.3f64, -0.7, 1.1, -0.2];
        let c = 0.9;
        let (dh, dc_next) = (0.6, -1.3);
        let loss = |gates: [f64; 4], c: f64| {
            let (_, (h, c_next)) = lstm_forward(gates, c);
            dh * h + dc_next * c_next
        };
        let (cache, _) = lstm_forward(gates, c);
        let (grad_gates, grad_c) = lstm_backward(cache, c, dh, dc_next);
        let eps = 1e-6;
        for k in 0..4 {
            let (mut up, mut down) = (gates, gates);
            up[k] += eps;
            down[k] -= eps;
            let numeric = (loss(up, c) - loss(down, c)) / (2.0 * eps);
            assert!((grad_gates[k] - numeric).abs() < 1e-8, "gate {k}");
        }
        let numeric = (loss(gates, c + eps) - loss(gates, c - eps)) / (2.0 * eps);
        assert!((grad_c - numeric).abs() < 1e-8);
    }

    #[test]
    fn buffer_checks_name_the_buffer() {
        let (gates, c, mut cache, mut state) = ([0.0f32; 24], [0.0f32; 6], [0.0; 30], [0.0; 11]);
        let forward = LstmForward {
            gates: &gates[..],
            c: &c[..],
            cache: &mut cache[..],
            state: &mut state[..],
        };
        let err = forward.check("f", 2, 3, <[f32]>::len).unwrap_err();
        assert_eq!(err.argument(), Some("state"));
        assert!(err.to_string().contains("2 x 2 x 3 elements"), "{err}");
        assert!(forward.check("f", usize::MAX, 2, <[f32]>::len).is_err());
        assert!(forward.check("f", 2, 4, <[f32]>::len).is_err());
    }
}
