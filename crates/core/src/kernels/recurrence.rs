//! Reverse linear recurrences over time-major `[T, B]` data: the one primitive under
//! every return and advantage estimator of `rlgrad-returns`.
//!
//! # The primitive
//!
//! `y[t] = x[t] + cut(c[t], c[t] * y[t+1])` for `t = T-1, ..., 0`, with `y[T] = init`,
//! independently for each of the `B` columns. Canonical order: sequential in `t` for each
//! column, one multiply, the [`cut`] selection, then one add per step (no FMA), columns
//! independent (devices run them in parallel and vectorize across adjacent columns).
//! Because columns never interact, any split of the columns between threads gives the
//! same bits.
//!
//! # The cut
//!
//! `cut(d, term) = +0 if d == 0, else term` ([`cut`]): a selection, not a product. Every
//! term that carries a value from after step `t` into step `t` (a later value, return,
//! advantage, trace or bootstrap) is multiplied by `d_t` and wrapped in `cut(d_t, ..)`, so
//! a zero discount (termination, truncation, a zero of `Discounts`) cuts the recurrence:
//! nothing after it, finite or not, reaches the steps before it. `0 * NaN` and
//! `0 * inf` would have leaked NaN; a finite term gives the same bits as the plain
//! product, except that `-0` products become `+0` (signed zeros aside, the cut changes no
//! result of finite inputs).
//!
//! # Episode boundaries
//!
//! Estimators read per-step rewards `r_t` and an [`Episodes`] description, from which
//! every step gets an effective reward `r'_t` and discount `d_t` ([`episode_step`]):
//!
//! | [`Episodes`] | `d_t` | `r'_t` |
//! |---|---|---|
//! | `Constant { gamma }` | `gamma` | `r_t` |
//! | `Discounts(d)` (rlax) | `d[t]` | `r_t` |
//! | `Flags { gamma, terminated, truncation: None }` | `0` if terminated, else `gamma` | `r_t` |
//! | `Flags { .., truncation: Some(tr) }` (Gymnasium) | `0` if terminated or truncated, else `gamma` | `r_t + gamma * final_values[t]` if truncated and not terminated, else `r_t` |
//!
//! Termination cuts the return at zero; time-limit truncation bootstraps from the value of
//! the final observation, which the caller provides (see `rlgrad-returns` for both of
//! Gymnasium's autoreset modes). Flags are 0 or 1 (`false` or `true`, [`FlagSlice`]):
//! the Cpu's kernels refuse any other value, naming the argument and the step and column
//! of the first one. They find it while they scan (a compare per flag read, instead of a
//! pass of its own that cost a third of a `[2048, 64]` GAE), so the outputs then hold
//! what the scan wrote; every other error is found before an output is written. The CUDA
//! kernels count a flag as set when it is nonzero.
//!
//! # Estimators (the canonical formulas; `v_T` = `bootstrap`)
//!
//! - returns: `G_t = r'_t + cut(d_t, d_t * G_{t+1})`, `G_T = bootstrap`.
//! - GAE: `delta_t = (r'_t + cut(d_t, d_t * v_{t+1})) - v_t`;
//!   `A_t = delta_t + cut(d_t, (lambda * d_t) * A_{t+1})`, `A_T = 0`;
//!   `returns_t = A_t + v_t`.
//! - lambda returns: `G_t = (r'_t + cut(d_t, d_t * ((1 - lambda) * nv_t)))
//!   + cut(d_t, (d_t * lambda) * G_{t+1})`, `G_T = nv_{T-1}` (`1 - lambda` rounded once).
//! - n-step returns, `k = min(t + n - 1, T - 1)`: `acc = nv_k`, then
//!   `acc = r'_j + cut(d_j, d_j * acc)` for `j = k, k-1, ..., t`; `G_t = acc`.
//! - V-trace: `td_t = min(clip_rho, rho_t) * ((r'_t + cut(d_t, d_t * v_{t+1})) - v_t)`;
//!   `e_t = td_t + cut(d_t, (d_t * (min(1, rho_t) * lambda)) * e_{t+1})`, `e_T = 0`;
//!   `vs_t = v_t + e_t`;
//!   `q_t = r'_t + cut(d_t, d_t * (lambda * vs_{t+1} + (1 - lambda) * v_{t+1}))` for
//!   `t < T-1` and `q_{T-1} = r'_{T-1} + cut(d_{T-1}, d_{T-1} * v_T)`;
//!   `pg_t = min(clip_pg_rho, rho_t) * (q_t - v_t)`.

use crate::{Device, Float, Result};

/// The shape of time-major data: `t` steps of `b` columns, element `(s, j)` at `s * b + j`;
/// and whether the estimators that read it must refuse non-finite inputs
/// ([`TimeMajor::require_finite`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeMajor {
    /// Time steps (`T`).
    pub t: usize,
    /// Columns: environments or sequences (`B`).
    pub b: usize,
    require_finite: bool,
}

impl TimeMajor {
    /// A `[t, b]` layout.
    pub fn new(t: usize, b: usize) -> Self {
        Self {
            t,
            b,
            require_finite: false,
        }
    }

    /// This layout, asking `rlgrad-returns`' estimators to check that every input value
    /// they read is finite before they compute, and to return an error naming the
    /// argument and the first bad index otherwise. Off by default: the check reads every
    /// input once more (and copies device buffers to the host), and by default non-finite
    /// data propagates the IEEE way. The kernels of this module ignore it.
    ///
    /// ```
    /// use rlgrad_core::kernels::recurrence::TimeMajor;
    /// let layout = TimeMajor::new(128, 8).require_finite();
    /// assert!(layout.requires_finite() && !TimeMajor::new(128, 8).requires_finite());
    /// ```
    pub fn require_finite(self) -> Self {
        Self {
            require_finite: true,
            ..self
        }
    }

    /// Whether [`TimeMajor::require_finite`] was asked for.
    pub fn requires_finite(&self) -> bool {
        self.require_finite
    }

    /// `t * b`, or `None` on overflow.
    pub fn len(&self) -> Option<usize> {
        self.t.checked_mul(self.b)
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.t == 0 || self.b == 0
    }
}

/// How `[T, B]` data (`T` steps of `B` columns) are stored on the host: time-major (a
/// [`TimeMajor`]; element `(s, j)` at `s * b + j`, the order of every device kernel), or
/// batch-major ([`SliceLayout::batch_major`]; at `j * t + s`: a `[B, T]` buffer, the layout
/// of TorchRL and RLlib, and in NumPy `x.T` of a C-ordered `[B, T]` array), which the
/// slice-level estimators read and write in place. Every input and output `[T, B]` buffer
/// of one call is stored in the layout's order; the order changes where values are, never
/// the arithmetic, so both give the same bits.
///
/// ```
/// use rlgrad_core::kernels::recurrence::{SliceLayout, TimeMajor};
/// // 8 environments of 128 steps each, one environment after the other.
/// let batch_major = SliceLayout::batch_major(128, 8);
/// assert!(batch_major.is_batch_major() && batch_major.shape() == TimeMajor::new(128, 8));
/// assert_eq!(batch_major.index(5, 2), 2 * 128 + 5);
/// assert!(!SliceLayout::from(TimeMajor::new(128, 8)).is_batch_major());
/// assert!(batch_major.require_finite().shape().requires_finite());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SliceLayout {
    shape: TimeMajor,
    batch_major: bool,
}

impl SliceLayout {
    /// `t` steps of `b` columns stored batch-major, as a `[b, t]` buffer: element
    /// `(s, j)` at `j * t + s`.
    pub fn batch_major(t: usize, b: usize) -> Self {
        Self {
            shape: TimeMajor::new(t, b),
            batch_major: true,
        }
    }

    /// This layout, asking the estimators to refuse non-finite inputs
    /// ([`TimeMajor::require_finite`]).
    pub fn require_finite(self) -> Self {
        Self {
            shape: self.shape.require_finite(),
            ..self
        }
    }

    /// The shape `[T, B]` (and whether the inputs must be finite).
    pub fn shape(&self) -> TimeMajor {
        self.shape
    }

    /// Whether the data are stored batch-major.
    pub fn is_batch_major(&self) -> bool {
        self.batch_major
    }

    /// The step and column `(s, j)` of flat index `i`, the inverse of
    /// [`SliceLayout::index`] (`i` below `t * b`).
    pub fn position(&self, i: usize) -> (usize, usize) {
        if self.batch_major {
            (i % self.shape.t.max(1), i / self.shape.t.max(1))
        } else {
            (i / self.shape.b.max(1), i % self.shape.b.max(1))
        }
    }

    /// The error for flag argument `argument` of `function` holding `value`, neither 0
    /// nor 1, at flat index `i`: an [`Error::Value`](crate::Error::Value) naming the step
    /// and column, the one wording of every check of flags (the Cpu's kernels, the Python
    /// bindings' conversions).
    pub fn invalid_flag(
        &self,
        function: &'static str,
        argument: &'static str,
        i: usize,
        value: impl std::fmt::Display,
    ) -> crate::Error {
        let (step, column) = self.position(i);
        crate::Error::value(
            function,
            argument,
            "0 or 1 at every step (false or true)",
            format_args!("{value} at step {step} of column {column}"),
        )
    }

    /// The flat index of element `(s, j)`.
    pub fn index(&self, s: usize, j: usize) -> usize {
        if self.batch_major {
            j * self.shape.t + s
        } else {
            s * self.shape.b + j
        }
    }
}

impl From<TimeMajor> for SliceLayout {
    fn from(shape: TimeMajor) -> Self {
        Self {
            shape,
            batch_major: false,
        }
    }
}

/// Time-limit truncation: per-step flags and the value of the observation each truncated
/// episode ended on (read only where `truncated` is set). `F` is how the flags are given:
/// a device buffer (`&B`, the default), or a [`FlagSlice`] at the slice level.
#[derive(Debug)]
pub struct Truncation<'a, B: ?Sized, F = &'a B> {
    /// Set where the episode was cut by a time limit at this step.
    pub truncated: F,
    /// `V(final observation)` at truncated steps; any value elsewhere.
    pub final_values: &'a B,
}

impl<B: ?Sized, F: Copy> Clone for Truncation<'_, B, F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B: ?Sized, F: Copy> Copy for Truncation<'_, B, F> {}

/// Where episodes end and how steps are discounted; see the [module docs](self).
///
/// `B` is the buffer of per-step values (`[T]` on the host, a device buffer), `F` the type
/// of the episode-end flags: `&B` by default (what the [`RecurrenceKernel`] takes), and a
/// [`FlagSlice`] at the slice level ([`SliceEpisodes`]), which takes Gymnasium's `bool`
/// arrays and `u8` masks as they are.
#[derive(Debug)]
pub enum Episodes<'a, B: ?Sized, T, F = &'a B> {
    /// One trajectory per column, no episode ends: `d_t = gamma`.
    Constant {
        /// The discount factor.
        gamma: T,
    },
    /// Per-step discounts `d_t` (rlax): `gamma * (1 - terminated)`, or anything else.
    Discounts(&'a B),
    /// Gymnasium's flags: termination cuts, truncation bootstraps.
    Flags {
        /// The discount factor.
        gamma: T,
        /// Set where the episode terminated at this step.
        terminated: F,
        /// Time-limit truncation, if the data has any.
        truncation: Option<Truncation<'a, B, F>>,
    },
}

impl<B: ?Sized, T: Copy, F: Copy> Clone for Episodes<'_, B, T, F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B: ?Sized, T: Copy, F: Copy> Copy for Episodes<'_, B, T, F> {}

impl<'a, B: ?Sized, T: Copy, F: Copy> Episodes<'a, B, T, F> {
    /// The same description over other buffers and flags (for example `Vec<T>` to `[T]`).
    pub fn map<C: ?Sized, G>(
        self,
        values: impl Fn(&'a B) -> &'a C,
        flags: impl Fn(F) -> G,
    ) -> Episodes<'a, C, T, G> {
        match self {
            Self::Constant { gamma } => Episodes::Constant { gamma },
            Self::Discounts(d) => Episodes::Discounts(values(d)),
            Self::Flags {
                gamma,
                terminated,
                truncation,
            } => Episodes::Flags {
                gamma,
                terminated: flags(terminated),
                truncation: truncation.map(|tr| Truncation {
                    truncated: flags(tr.truncated),
                    final_values: values(tr.final_values),
                }),
            },
        }
    }

    /// The name and length of every per-step input this description reads (for length
    /// checks), given how to measure a buffer and a set of flags.
    pub fn lengths(
        &self,
        values: impl Fn(&'a B) -> usize,
        flags: impl Fn(F) -> usize,
    ) -> Vec<(&'static str, usize)> {
        match *self {
            Self::Constant { .. } => Vec::new(),
            Self::Discounts(d) => vec![("discounts", values(d))],
            Self::Flags {
                terminated,
                truncation,
                ..
            } => {
                let mut out = vec![("terminated", flags(terminated))];
                if let Some(tr) = truncation {
                    out.push(("truncated", flags(tr.truncated)));
                    out.push(("final_values", values(tr.final_values)));
                }
                out
            }
        }
    }

    /// The discount factor, for the descriptions that have one.
    pub fn gamma(&self) -> Option<T> {
        match *self {
            Self::Constant { gamma } | Self::Flags { gamma, .. } => Some(gamma),
            Self::Discounts(_) => None,
        }
    }
}

/// Episode-end flags on the host, as the data comes: values of the element type (SB3's and
/// rlax's float `dones`), or bytes (`u8` masks, and Gymnasium's and NumPy's `bool` arrays,
/// which convert without a copy). Each flag is 0 or 1; [`FlagSlice::first_invalid`] finds
/// any other value (a `0.5`, a NaN, a byte 2), which the slice-level estimators refuse.
///
/// ```
/// use rlgrad_core::kernels::recurrence::FlagSlice;
/// let from_gymnasium = vec![false, true, false];
/// let flags = FlagSlice::<f32>::from(&from_gymnasium);
/// assert_eq!(flags, FlagSlice::Bytes(&[0, 1, 0]));
/// assert_eq!((flags.len(), flags.is_set(1)), (3, Some(true)));
/// assert_eq!(flags.first_invalid(), None);
/// assert_eq!(FlagSlice::from(&[0.0f32, 1.0, 0.5][..]).first_invalid(), Some((2, 0.5)));
/// assert_eq!(FlagSlice::<f32>::from(&[1u8, 2][..]).first_invalid(), Some((1, 2.0)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlagSlice<'a, T> {
    /// Floats of the element type; nonzero (NaN included) is set.
    Values(&'a [T]),
    /// Bytes; nonzero is set.
    Bytes(&'a [u8]),
}

impl<T: Float> FlagSlice<'_, T> {
    /// The number of flags.
    pub fn len(&self) -> usize {
        match self {
            Self::Values(v) => v.len(),
            Self::Bytes(b) => b.len(),
        }
    }

    /// Whether there is no flag.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether flag `i` is set (nonzero; `None` past the end).
    pub fn is_set(&self, i: usize) -> Option<bool> {
        match self {
            Self::Values(v) => v.get(i).map(|&f| f != T::zero()),
            Self::Bytes(b) => b.get(i).map(|&f| f != 0),
        }
    }

    /// The index and value of the first flag that is neither 0 nor 1, or `None` when
    /// every flag is: a scan at memory speed ([`check::first_non_finite`]'s).
    ///
    /// [`check::first_non_finite`]: crate::check::first_non_finite
    pub fn first_invalid(&self) -> Option<(usize, f64)> {
        let (zero, one) = (T::zero(), T::one());
        match self {
            // Two compares and an `and`, without a branch, so that the scan vectorizes.
            Self::Values(v) => crate::check::first_where(v, |f| (f != zero) & (f != one))
                .map(|i| (i, v[i].as_f64())),
            Self::Bytes(b) => crate::check::first_where(b, |f| f > 1).map(|i| (i, f64::from(b[i]))),
        }
    }
}

impl<'a, T: Float> From<&'a [T]> for FlagSlice<'a, T> {
    fn from(flags: &'a [T]) -> Self {
        Self::Values(flags)
    }
}

impl<'a, T: Float> From<&'a Vec<T>> for FlagSlice<'a, T> {
    fn from(flags: &'a Vec<T>) -> Self {
        Self::Values(flags)
    }
}

impl<'a, T: Float, const N: usize> From<&'a [T; N]> for FlagSlice<'a, T> {
    fn from(flags: &'a [T; N]) -> Self {
        Self::Values(flags)
    }
}

impl<'a, T: Float> From<&'a [u8]> for FlagSlice<'a, T> {
    fn from(flags: &'a [u8]) -> Self {
        Self::Bytes(flags)
    }
}

impl<'a, T: Float> From<&'a Vec<u8>> for FlagSlice<'a, T> {
    fn from(flags: &'a Vec<u8>) -> Self {
        Self::Bytes(flags)
    }
}

impl<'a, T: Float, const N: usize> From<&'a [u8; N]> for FlagSlice<'a, T> {
    fn from(flags: &'a [u8; N]) -> Self {
        Self::Bytes(flags)
    }
}

impl<'a, T: Float> From<&'a [bool]> for FlagSlice<'a, T> {
    fn from(flags: &'a [bool]) -> Self {
        // SAFETY: a `bool` is one byte holding 0 or 1, a valid `u8`, with the alignment
        // of `u8`; the new slice covers the same bytes for the same lifetime, read only.
        Self::Bytes(unsafe { std::slice::from_raw_parts(flags.as_ptr().cast(), flags.len()) })
    }
}

impl<'a, T: Float> From<&'a Vec<bool>> for FlagSlice<'a, T> {
    fn from(flags: &'a Vec<bool>) -> Self {
        Self::from(flags.as_slice())
    }
}

impl<'a, T: Float, const N: usize> From<&'a [bool; N]> for FlagSlice<'a, T> {
    fn from(flags: &'a [bool; N]) -> Self {
        Self::from(flags.as_slice())
    }
}

/// [`Episodes`] at the slice level: values in `[T]` slices, flags as [`FlagSlice`]s.
pub type SliceEpisodes<'a, T> = Episodes<'a, [T], T, FlagSlice<'a, T>>;

impl<'a, T: Float> Episodes<'a, [T], T, FlagSlice<'a, T>> {
    /// Gymnasium's `terminated` flags without truncation, given as `bool`s, bytes or
    /// floats: `Flags { gamma, terminated, truncation: None }`.
    pub fn terminations(gamma: T, terminated: impl Into<FlagSlice<'a, T>>) -> Self {
        Self::Flags {
            gamma,
            terminated: terminated.into(),
            truncation: None,
        }
    }

    /// Gymnasium's `terminated` and `truncated` flags, given as `bool`s, bytes or floats,
    /// with `final_values[t] = V(final observation)` where `truncated[t]` is set.
    ///
    /// ```
    /// use rlgrad_core::kernels::recurrence::{Episodes, FlagSlice};
    /// let (terminated, truncated) = (vec![false, true], vec![true, false]);
    /// let episodes = Episodes::gymnasium(0.99f32, &terminated, &truncated, &[5.0, 0.0]);
    /// assert!(matches!(episodes, Episodes::Flags { terminated: FlagSlice::Bytes(_), .. }));
    /// ```
    pub fn gymnasium(
        gamma: T,
        terminated: impl Into<FlagSlice<'a, T>>,
        truncated: impl Into<FlagSlice<'a, T>>,
        final_values: &'a [T],
    ) -> Self {
        Self::Flags {
            gamma,
            terminated: terminated.into(),
            truncation: Some(Truncation {
                truncated: truncated.into(),
                final_values,
            }),
        }
    }
}

/// The canonical effective reward and discount `(r'_t, d_t)` of one step from its reward
/// and whether its flags are set (see the [module docs](self)): `truncation` is
/// `Some((truncated, final_value))` when the data has truncation flags, and `final_value`
/// is read only when `truncated` is set.
#[inline(always)]
pub fn episode_step<T: Float>(
    reward: T,
    gamma: T,
    terminated: bool,
    truncation: Option<(bool, T)>,
) -> (T, T) {
    let zero = T::zero();
    match truncation {
        Some((true, final_value)) => {
            if terminated {
                (reward, zero)
            } else {
                (reward + gamma * final_value, zero)
            }
        }
        _ => (reward, if terminated { zero } else { gamma }),
    }
}

/// The canonical cut of the [module docs](self): `+0` when the discount `d` is zero,
/// else `term` (the product that carries later values into this step). A selection, so
/// that a NaN or an infinity after an episode end cannot leak into the steps before it
/// through `0 * NaN`; every device implements it as a select, not a multiply.
///
/// ```
/// use rlgrad_core::kernels::recurrence::cut;
/// assert_eq!(cut(0.0f32, 0.0 * f32::NAN), 0.0);
/// assert_eq!(cut(0.5f32, 0.5 * 4.0), 2.0);
/// assert!(cut(0.5f32, 0.5 * f32::NAN).is_nan()); // no episode end: IEEE propagation
/// ```
#[inline(always)]
pub fn cut<T: Float>(discount: T, term: T) -> T {
    if discount == T::zero() {
        T::zero()
    } else {
        term
    }
}

/// Parameters of V-trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VtraceParams<T> {
    /// Trace-cutting lambda in `[0, 1]`.
    pub lambda: T,
    /// Clip threshold for the importance weights of the value targets (`rho_bar`).
    pub clip_rho: T,
    /// Clip threshold for the importance weights of the policy-gradient advantages.
    pub clip_pg_rho: T,
}

/// The reverse-recurrence kernels. Every method checks that each buffer holds
/// `layout.t * layout.b` elements (`[B]` ones hold `layout.b`) and follows the canonical
/// formulas of the [module docs](self).
pub trait RecurrenceKernel<T: Float>: Device {
    /// The primitive: `out[t] = x[t] + cut(c[t], c[t] * out[t+1])`, `out[T] = init`.
    fn linear_recurrence(
        &self,
        layout: TimeMajor,
        x: &Self::Buffer<T>,
        c: &Self::Buffer<T>,
        init: &Self::Buffer<T>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// Discounted returns `G_t = r'_t + cut(d_t, d_t * G_{t+1})`, `G_T = bootstrap`.
    fn discounted_returns(
        &self,
        layout: TimeMajor,
        rewards: &Self::Buffer<T>,
        episodes: Episodes<'_, Self::Buffer<T>, T>,
        bootstrap: &Self::Buffer<T>,
        returns: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// GAE advantages and, if `returns` is given, the lambda-returns `advantages + values`.
    #[allow(clippy::too_many_arguments)]
    fn gae(
        &self,
        layout: TimeMajor,
        rewards: &Self::Buffer<T>,
        values: &Self::Buffer<T>,
        bootstrap: &Self::Buffer<T>,
        episodes: Episodes<'_, Self::Buffer<T>, T>,
        lambda: T,
        advantages: &mut Self::Buffer<T>,
        returns: Option<&mut Self::Buffer<T>>,
    ) -> Result<()>;

    /// TD(lambda) returns from next-state values.
    fn lambda_returns(
        &self,
        layout: TimeMajor,
        rewards: &Self::Buffer<T>,
        next_values: &Self::Buffer<T>,
        episodes: Episodes<'_, Self::Buffer<T>, T>,
        lambda: T,
        returns: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// n-step bootstrapped returns from next-state values (`n >= 1`).
    fn n_step_returns(
        &self,
        layout: TimeMajor,
        rewards: &Self::Buffer<T>,
        next_values: &Self::Buffer<T>,
        episodes: Episodes<'_, Self::Buffer<T>, T>,
        n: usize,
        returns: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// V-trace value targets `vs` and policy-gradient advantages.
    #[allow(clippy::too_many_arguments)]
    fn vtrace(
        &self,
        layout: TimeMajor,
        rewards: &Self::Buffer<T>,
        values: &Self::Buffer<T>,
        bootstrap: &Self::Buffer<T>,
        rhos: &Self::Buffer<T>,
        episodes: Episodes<'_, Self::Buffer<T>, T>,
        params: VtraceParams<T>,
        vs: &mut Self::Buffer<T>,
        pg_advantages: &mut Self::Buffer<T>,
    ) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episode_steps_follow_gymnasium() {
        let g = 0.9f32;
        assert_eq!(episode_step(1.0, g, false, None), (1.0, 0.9));
        assert_eq!(episode_step(1.0, g, true, None), (1.0, 0.0));
        assert_eq!(
            episode_step(1.0, g, false, Some((true, 10.0))),
            (1.0 + 0.9 * 10.0, 0.0)
        );
        assert_eq!(episode_step(1.0, g, true, Some((true, 10.0))), (1.0, 0.0));
        assert_eq!(
            episode_step(1.0, g, false, Some((false, f32::NAN))),
            (1.0, 0.9)
        );
    }
}
