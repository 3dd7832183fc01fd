//! The Cpu fused LSTM cell ([`crate::kernels::CellKernel`]): rows split in halves over
//! rayon tasks while each half still has a grain ([`crate::cpu::grain::Family::Cell`]) of
//! elements; each element is the
//! canonical [`lstm_forward`] / [`lstm_backward`], so any split gives the same bits. The
//! `f32` forward runs 16 units at a time through the lane versions of `libm`'s sigmoid and
//! tanh (`crate::cpu::lanes`), bitwise the scalar ones.

use crate::cpu::grain::{Family, grain};
use crate::cpu::lanes;
use crate::kernels::CellKernel;
use crate::kernels::cell::{LstmBackward, LstmForward, lstm_backward, lstm_forward};
use crate::{Float, Par, Result};

use super::Cpu;

/// Whether `rows` rows of `hidden` units are worth splitting in two tasks.
fn worth_splitting(par: Par, rows: usize, hidden: usize) -> bool {
    par.threads() > 1 && rows >= 2 && rows * hidden >= 2 * grain(Family::Cell)
}

/// The forward over whole rows, halved over rayon tasks while worth it.
fn forward_rows<T: Float>(
    par: Par,
    hidden: usize,
    (gates, c): (&[T], &[T]),
    (cache, h_next, c_next): (&mut [T], &mut [T], &mut [T]),
) {
    let rows = c.len() / hidden;
    if worth_splitting(par, rows, hidden) {
        let mid = rows / 2 * hidden;
        let (gates, c) = (gates.split_at(4 * mid), c.split_at(mid));
        let cache = cache.split_at_mut(5 * mid);
        let (h_next, c_next) = (h_next.split_at_mut(mid), c_next.split_at_mut(mid));
        par.join(
            || forward_rows(par, hidden, (gates.0, c.0), (cache.0, h_next.0, c_next.0)),
            || forward_rows(par, hidden, (gates.1, c.1), (cache.1, h_next.1, c_next.1)),
        );
        return;
    }
    if let Some(job) = ForwardF32::of(
        hidden,
        (gates, c),
        (&mut *cache, &mut *h_next, &mut *c_next),
    ) {
        return crate::cpu::simd::widest(job);
    }
    let rows = gates
        .chunks_exact(4 * hidden)
        .zip(c.chunks_exact(hidden))
        .zip(cache.chunks_exact_mut(5 * hidden))
        .zip(
            h_next
                .chunks_exact_mut(hidden)
                .zip(c_next.chunks_exact_mut(hidden)),
        );
    for (((gates, c), cache), (h_next, c_next)) in rows {
        for j in 0..hidden {
            let pre = std::array::from_fn(|k| gates[k * hidden + j]);
            let (saved, (h, c_new)) = lstm_forward(pre, c[j]);
            for (k, value) in saved.into_iter().enumerate() {
                cache[k * hidden + j] = value;
            }
            (h_next[j], c_next[j]) = (h, c_new);
        }
    }
}

/// The `f32` forward, [`lanes::LANES`] units at a time with the lane versions of the
/// sigmoid and tanh (the bits of [`lstm_forward`], which the tests compare).
struct ForwardF32<'a> {
    hidden: usize,
    gates: &'a [f32],
    c: &'a [f32],
    cache: &'a mut [f32],
    h_next: &'a mut [f32],
    c_next: &'a mut [f32],
}

impl<'a> ForwardF32<'a> {
    /// The job when `T` is `f32`.
    fn of<T: Float>(
        hidden: usize,
        (gates, c): (&'a [T], &'a [T]),
        (cache, h_next, c_next): (&'a mut [T], &'a mut [T], &'a mut [T]),
    ) -> Option<Self> {
        Some(Self {
            hidden,
            gates: lanes::as_f32(gates)?,
            c: lanes::as_f32(c)?,
            cache: lanes::as_f32_mut(cache)?,
            h_next: lanes::as_f32_mut(h_next)?,
            c_next: lanes::as_f32_mut(c_next)?,
        })
    }
}

impl crate::cpu::simd::Vectorized for ForwardF32<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Self {
            hidden,
            gates,
            c,
            cache,
            h_next,
            c_next,
        } = self;
        let rows = gates
            .chunks_exact(4 * hidden)
            .zip(c.chunks_exact(hidden))
            .zip(cache.chunks_exact_mut(5 * hidden))
            .zip(
                h_next
                    .chunks_exact_mut(hidden)
                    .zip(c_next.chunks_exact_mut(hidden)),
            );
        for (((gates, c), cache), (h_next, c_next)) in rows {
            for start in (0..hidden).step_by(lanes::LANES) {
                let units = (hidden - start).min(lanes::LANES);
                // The lanes past `units` compute on zeros and are dropped.
                let load = |x: &[f32], at: usize| {
                    let mut values = [0.0f32; lanes::LANES];
                    values[..units].copy_from_slice(&x[at..at + units]);
                    values
                };
                let gate = |k: usize| load(gates, k * hidden + start);
                let (i, f) = (lanes::sigmoid(&gate(0)), lanes::sigmoid(&gate(1)));
                let (g, o) = (lanes::tanhf(&gate(2)), lanes::sigmoid(&gate(3)));
                let c_old = load(c, start);
                let c_new: [f32; lanes::LANES] =
                    std::array::from_fn(|l| f[l] * c_old[l] + i[l] * g[l]);
                let tanh_c = lanes::tanhf(&c_new);
                for (k, saved) in [i, f, g, o, tanh_c].iter().enumerate() {
                    let at = k * hidden + start;
                    cache[at..at + units].copy_from_slice(&saved[..units]);
                }
                for l in 0..units {
                    h_next[start + l] = o[l] * tanh_c[l];
                }
                c_next[start..start + units].copy_from_slice(&c_new[..units]);
            }
        }
    }
}

/// The backward over whole rows, halved over rayon tasks while worth it.
fn backward_rows<T: Float>(
    par: Par,
    hidden: usize,
    (cache, c, grad_h, grad_c_next): (&[T], &[T], &[T], &[T]),
    (grad_gates, grad_c): (&mut [T], &mut [T]),
) {
    let rows = c.len() / hidden;
    if worth_splitting(par, rows, hidden) {
        let mid = rows / 2 * hidden;
        let (cache, c) = (cache.split_at(5 * mid), c.split_at(mid));
        let (grad_h, grad_c_next) = (grad_h.split_at(mid), grad_c_next.split_at(mid));
        let (grad_gates, grad_c) = (grad_gates.split_at_mut(4 * mid), grad_c.split_at_mut(mid));
        par.join(
            || {
                let inputs = (cache.0, c.0, grad_h.0, grad_c_next.0);
                backward_rows(par, hidden, inputs, (grad_gates.0, grad_c.0));
            },
            || {
                let inputs = (cache.1, c.1, grad_h.1, grad_c_next.1);
                backward_rows(par, hidden, inputs, (grad_gates.1, grad_c.1));
            },
        );
        return;
    }
    let rows = cache
        .chunks_exact(5 * hidden)
        .zip(c.chunks_exact(hidden))
        .zip(
            grad_h
                .chunks_exact(hidden)
                .zip(grad_c_next.chunks_exact(hidden)),
        )
        .zip(
            grad_gates
                .chunks_exact_mut(4 * hidden)
                .zip(grad_c.chunks_exact_mut(hidden)),
        );
    for (((cache, c), (dh, dc_next)), (grad_gates, grad_c)) in rows {
        for j in 0..hidden {
            let saved = std::array::from_fn(|k| cache[k * hidden + j]);
            let (gates, dc) = lstm_backward(saved, c[j], dh[j], dc_next[j]);
            for (k, value) in gates.into_iter().enumerate() {
                grad_gates[k * hidden + j] = value;
            }
            grad_c[j] = dc;
        }
    }
}

/// [`CellKernel::lstm_cell`] on slices.
pub fn lstm_cell<T: Float>(
    par: Par,
    batch: usize,
    hidden: usize,
    buffers: LstmForward<'_, [T]>,
) -> Result<()> {
    buffers.check("lstm_cell", batch, hidden, <[T]>::len)?;
    let LstmForward {
        gates,
        c,
        cache,
        state,
    } = buffers;
    if hidden == 0 {
        return Ok(());
    }
    let (h_next, c_next) = state.split_at_mut(batch * hidden);
    forward_rows(par, hidden, (gates, c), (cache, h_next, c_next));
    Ok(())
}

/// [`CellKernel::lstm_cell_backward`] on slices.
pub fn lstm_cell_backward<T: Float>(
    par: Par,
    batch: usize,
    hidden: usize,
    buffers: LstmBackward<'_, [T]>,
) -> Result<()> {
    buffers.check("lstm_cell_backward", batch, hidden, <[T]>::len)?;
    let LstmBackward {
        cache,
        c,
        grad_state,
        grad_gates,
        grad_c,
    } = buffers;
    if hidden == 0 {
        return Ok(());
    }
    let (grad_h, grad_c_next) = grad_state.split_at(batch * hidden);
    backward_rows(
        par,
        hidden,
        (cache, c, grad_h, grad_c_next),
        (grad_gates, grad_c),
    );
    Ok(())
}

impl<T: Float> CellKernel<T> for Cpu {
    fn lstm_cell(
        &self,
        batch: usize,
        hidden: usize,
        buffers: LstmForward<'_, Vec<T>>,
    ) -> Result<()> {
        lstm_cell(self.par(), batch, hidden, buffers.into())
    }

    fn lstm_cell_backward(
        &self,
        batch: usize,
        hidden: usize,
        buffers: LstmBackward<'_, Vec<T>>,
    ) -> Result<()> {
        lstm_cell_backward(self.par(), batch, hidden, buffers.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rng;

    fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
        (0..n).map(|_| rng.normal(0.0, 2.0)).collect()
    }

    #[test]
    fn every_split_gives_the_bits_of_the_element_formulas() {
        let mut rng = Rng::new(4, "lstm cell");
        // Rows and units around the task split, at and far above the default grain.
        for (batch, hidden) in [(1, 1), (3, 5), (64, 256), (129, 128)] {
            let gates = random(&mut rng, batch * 4 * hidden);
            let c = random(&mut rng, batch * hidden);
            let grad_state = random(&mut rng, 2 * batch * hidden);
            let run = |par| {
                let mut cache = vec![f32::NAN; 5 * batch * hidden];
                let mut state = vec![f32::NAN; 2 * batch * hidden];
                let forward = LstmForward {
                    gates: &gates[..],
                    c: &c[..],
                    cache: &mut cache[..],
                    state: &mut state[..],
                };
                lstm_cell(par, batch, hidden, forward).unwrap();
                let mut grad_gates = vec![f32::NAN; 4 * batch * hidden];
                let mut grad_c = vec![f32::NAN; batch * hidden];
                let backward = LstmBackward {
                    cache: &cache[..],
                    c: &c[..],
                    grad_state: &grad_state[..],
                    grad_gates: &mut grad_gates[..],
                    grad_c: &mut grad_c[..],
                };
                lstm_cell_backward(par, batch, hidden, backward).unwrap();
                [cache, state, grad_gates, grad_c]
                    .map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            };
            let one = run(Par::Seq);
            assert_eq!(one, run(Par::rayon(2)), "{batch} x {hidden}");
            assert_eq!(one, run(Par::rayon(3)), "{batch} x {hidden}");
            // The f32 forward runs in lanes: every element against the scalar formula.
            for b in 0..batch {
                for j in 0..hidden {
                    let pre = std::array::from_fn(|k| gates[b * 4 * hidden + k * hidden + j]);
                    let (saved, (h, c_next)) = lstm_forward(pre, c[b * hidden + j]);
                    assert_eq!(one[1][b * hidden + j], h.to_bits());
                    assert_eq!(one[1][(batch + b) * hidden + j], c_next.to_bits());
                    for (k, value) in saved.iter().enumerate() {
                        let at = b * 5 * hidden + k * hidden + j;
                        assert_eq!(
                            one[0][at],
                            value.to_bits(),
                            "{batch} x {hidden}: {b} {j} {k}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let (gates, c) = (vec![0.0f64; 8], vec![0.0f64; 2]);
        let (mut cache, mut state) = (vec![0.0; 10], vec![0.0; 3]);
        let err = lstm_cell(
            Par::Seq,
            2,
            1,
            LstmForward {
                gates: &gates[..],
                c: &c[..],
                cache: &mut cache[..],
                state: &mut state[..],
            },
        )
        .unwrap_err();
        assert_eq!(err.argument(), Some("state"));
        assert!(err.to_string().contains("lstm_cell"), "{err}");
    }
}
