//! [`Restore`]: a plan of where each stored tensor goes, checked as a whole before
//! anything is written.

use std::collections::BTreeSet;
use std::fmt::{self, Display};

use rlgrad_core::{Error, Result, Rng};

use crate::checkpoint::{self, Checkpoint, Stored, checked_numel};
use crate::dtype::{Dtype, Scalar};

/// Where the entries of a [`Checkpoint`] go: named targets (slices, scalars, RNG streams,
/// and behind features optimizers and tensors), plus whether missing or extra entries are
/// allowed. [`Checkpoint::restore`] checks the whole plan, reports every mismatch in one
/// error (names, dtypes and shapes, and what a target's owner refuses: an optimizer
/// built with another learning rate, a setter's check), and writes only when there is
/// none.
///
/// By default both are errors: a target whose name is not stored ("missing"), and a
/// stored tensor that no target reads ("extra"). [`Restore::allow_missing`] leaves targets
/// without a stored entry untouched (a model that grew a layer);
/// [`Restore::allow_extra`] ignores stored tensors nobody asked for (restoring the actor
/// alone from a full checkpoint).
///
/// ```
/// use rlgrad_checkpoint::{Checkpoint, Restore};
///
/// let mut saved = Checkpoint::new();
/// saved.put("critic/w", &[2], &[1.0f32, 2.0])?;
/// saved.put("critic/b", &[1], &[0.5f64])?;
/// saved.put("actor/w", &[3], &[0.0f32; 3])?;
///
/// let (mut w, mut b) = (vec![0.0f32; 3], vec![0.0f32; 1]);
/// let mut plan = Restore::new();
/// plan.slice("critic/w", &[3], &mut w).slice("critic/b", &[1], &mut b);
/// let message = saved.restore(plan).unwrap_err().to_string();
/// // Every problem at once; nothing was written.
/// assert!(message.contains("3 mismatches"));
/// assert!(message.contains("`critic/w`: expected F32 [3], found F32 [2]"));
/// assert!(message.contains("`critic/b`: expected F32 [1], found F64 [1]"));
/// assert!(message.contains("`actor/w`: stored but not restored"));
/// assert_eq!(w, [0.0; 3]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Restore<'a> {
    targets: Vec<Box<dyn Target + 'a>>,
    allow_missing: bool,
    allow_extra: bool,
}

impl fmt::Debug for Restore<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Restore")
            .field(
                "targets",
                &self.targets.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("allow_missing", &self.allow_missing)
            .field("allow_extra", &self.allow_extra)
            .finish()
    }
}

impl Default for Restore<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl Checkpoint {
    /// Writes the stored values into the plan's targets after checking every one of them:
    /// each target's name must be stored with its dtype and shape, and every stored tensor
    /// must be some target's (unless the plan allows missing or extra entries). All
    /// mismatches are reported in one [`Error::State`]; then nothing was written.
    ///
    /// Targets are matched by name only; their order in the plan does not matter. What
    /// can still refuse once a target's name, dtype and shape passed (an optimizer's own
    /// checks of its rule and hyper-parameters, a [`Restore::with`] setter, an upload to a
    /// device) runs for every such target before any target is written, and its refusal
    /// is one more mismatch of the same error (an optimizer built with another learning
    /// rate is listed with the shapes that do not fit), so a refusal at any point leaves
    /// every target as it was.
    pub fn restore(&self, plan: Restore<'_>) -> Result<()> {
        plan.apply_from(self)
    }
}

impl<'a> Restore<'a> {
    /// An empty plan that refuses missing and extra entries.
    pub fn new() -> Self {
        Self {
            targets: Vec::new(),
            allow_missing: false,
            allow_extra: false,
        }
    }

    /// Whether a target without a stored entry is left untouched instead of refused.
    pub fn allow_missing(&mut self, allow: bool) -> &mut Self {
        self.allow_missing = allow;
        self
    }

    /// Whether stored tensors that no target reads are ignored instead of refused.
    pub fn allow_extra(&mut self, allow: bool) -> &mut Self {
        self.allow_extra = allow;
        self
    }

    /// Reads tensor `name`, stored as `T` with `shape`, into `out` (row-major; `out` must
    /// hold exactly the elements of `shape`, which the restore checks).
    pub fn slice<T: Scalar>(&mut self, name: &str, shape: &[usize], out: &'a mut [T]) -> &mut Self {
        self.push(SliceTarget {
            name: name.to_owned(),
            shape: shape.to_vec(),
            out,
        })
    }

    /// Reads scalar `name` (shape `[]`, stored as `T`) into `out`.
    pub fn scalar<T: Scalar>(&mut self, name: &str, out: &'a mut T) -> &mut Self {
        self.slice(name, &[], std::slice::from_mut(out))
    }

    /// Replaces the contents of `out` by tensor `name`, stored as `T` with `shape`: for a
    /// value whose size the checkpoint decides (a log of finished episodes, a replay
    /// buffer's fill), read from [`Checkpoint::tensor_info`] before the plan is built.
    /// `out` is resized only when the plan is applied, so a refused plan leaves it as it
    /// was.
    pub fn vec<T: Scalar>(
        &mut self,
        name: &str,
        shape: &[usize],
        out: &'a mut Vec<T>,
    ) -> &mut Self {
        self.push(VecTarget {
            name: name.to_owned(),
            shape: shape.to_vec(),
            out,
        })
    }

    /// Restores a value through its own checked setter (an environment from its
    /// snapshot): once every target passed its check, `stage` gets the values of tensor
    /// `name` (stored as `T` with `shape`) and either refuses them, and then nothing at
    /// all is written, or returns the write to make, which runs with every other
    /// target's. Stage into a copy and return the swap:
    ///
    /// ```
    /// use rlgrad_checkpoint::{Checkpoint, Restore};
    /// use rlgrad_core::Error;
    ///
    /// // A setter that refuses even numbers.
    /// fn odd_only<'a>(out: &'a mut Vec<u64>) -> impl FnOnce(&[u64]) -> rlgrad_core::Result<Box<dyn FnOnce() + 'a>> + 'a {
    ///     move |words| match words.iter().find(|w| *w % 2 == 0) {
    ///         Some(even) => Err(Error::value("odd_only", "words", "odd numbers", even)),
    ///         None => {
    ///             let staged = words.to_vec();
    ///             Ok(Box::new(move || *out = staged))
    ///         }
    ///     }
    /// }
    /// let mut saved = Checkpoint::new();
    /// saved.put("odd", &[2], &[3u64, 4])?;
    /// saved.put("step", &[], &[9u64])?;
    /// let (mut odd, mut step) = (vec![1u64, 1], 0u64);
    /// let mut plan = Restore::new();
    /// plan.scalar("step", &mut step).with("odd", &[2], odd_only(&mut odd));
    /// assert!(saved.restore(plan).is_err());
    /// assert_eq!((step, &odd), (0, &vec![1, 1])); // refused by the setter: nothing written
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn with<T: Scalar>(
        &mut self,
        name: &str,
        shape: &[usize],
        stage: impl FnOnce(&[T]) -> Result<Box<dyn FnOnce() + 'a>> + 'a,
    ) -> &mut Self {
        self.push(WithTarget {
            name: name.to_owned(),
            shape: shape.to_vec(),
            stage: Some(Box::new(stage)),
            commit: None,
        })
    }

    /// Replaces `rng` by the stream position stored under `name` by
    /// [`Checkpoint::put_rng`]; the restored stream continues bit for bit.
    pub fn rng(&mut self, name: &str, rng: &'a mut Rng) -> &mut Self {
        self.push(RngTarget {
            name: name.to_owned(),
            rng,
        })
    }

    pub(crate) fn push(&mut self, target: impl Target + 'a) -> &mut Self {
        self.targets.push(Box::new(target));
        self
    }

    fn apply_from(self, checkpoint: &Checkpoint) -> Result<()> {
        let Self {
            mut targets,
            allow_missing,
            allow_extra,
        } = self;
        let mut report = Report::new(allow_missing);
        let mut checked = Vec::with_capacity(targets.len());
        for target in &mut targets {
            let before = report.problem_count();
            target.check(checkpoint, &mut report);
            checked.push(report.problem_count() == before);
        }
        if !allow_extra {
            for name in checkpoint.names() {
                if !report.read.contains(name) {
                    report.problem(name, "stored but not restored");
                }
            }
        }
        // Everything that can still refuse (an optimizer's own checks, a setter's, a
        // device upload) runs before any target is written, for every target that passed
        // its check even when another did not, so that a refusal is listed with the
        // other mismatches.
        for (target, checked) in targets.iter_mut().zip(checked) {
            if checked && let Err(refusal) = target.prepare(checkpoint) {
                report.problem(target.name(), refusal);
            }
        }
        report.into_result(
            "Checkpoint::restore",
            "every target stored with its dtype and shape and accepted by its owner, and \
             every stored tensor restored",
        )?;
        for target in targets {
            target.apply(checkpoint);
        }
        Ok(())
    }
}

/// One destination of a [`Restore`] plan.
pub(crate) trait Target {
    /// The name (or prefix) it reads, for messages.
    fn name(&self) -> &str;
    /// Checks the target against `checkpoint`, reporting every problem.
    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report);
    /// Does whatever can still fail once this target passed its check (decoding into a
    /// staged value, its owner's own checks, an upload), writing nothing; an error is
    /// listed with the plan's other mismatches.
    fn prepare(&mut self, _checkpoint: &Checkpoint) -> Result<()> {
        Ok(())
    }
    /// Writes the checked and prepared values; called only when every target prepared.
    fn apply(self: Box<Self>, checkpoint: &Checkpoint);
}

/// The problems found while checking a plan, and the names its targets read.
#[derive(Debug)]
pub(crate) struct Report {
    problems: Vec<String>,
    read: BTreeSet<String>,
    allow_missing: bool,
}

impl Report {
    pub(crate) fn new(allow_missing: bool) -> Self {
        Self {
            problems: Vec::new(),
            read: BTreeSet::new(),
            allow_missing,
        }
    }

    /// `Ok` without problems, else one [`Error::State`] listing them all.
    pub(crate) fn into_result(self, function: &'static str, expected: &str) -> Result<()> {
        let count = self.problems.len();
        if count == 0 {
            return Ok(());
        }
        Err(Error::state(
            function,
            "plan",
            expected,
            format_args!(
                "{count} {}: {}",
                if count == 1 { "mismatch" } else { "mismatches" },
                self.problems.join("; ")
            ),
        ))
    }

    /// Problems recorded so far.
    pub(crate) fn problem_count(&self) -> usize {
        self.problems.len()
    }

    /// Records a problem with entry `name`.
    pub(crate) fn problem(&mut self, name: &str, what: impl Display) {
        self.problems.push(format!("`{name}`: {what}"));
    }

    /// Whether a target's missing entry is allowed.
    #[cfg_attr(not(feature = "optim"), allow(dead_code))]
    pub(crate) fn allows_missing(&self) -> bool {
        self.allow_missing
    }

    /// The stored entry `name`, recorded as read. A problem, and `None`, when another
    /// target already read it, or when it is missing and `need` says it must not be;
    /// `None` alone when it is missing and that is allowed.
    pub(crate) fn find<'c>(
        &mut self,
        checkpoint: &'c Checkpoint,
        name: &str,
        need: Need,
    ) -> Option<&'c Stored> {
        if !self.read.insert(name.to_owned()) {
            self.problem(name, "named by two targets");
            return None;
        }
        let stored = checkpoint.stored(name);
        let required = match need {
            Need::Target => !self.allow_missing,
            Need::Part => true,
        };
        if stored.is_none() && required {
            self.problem(name, "missing from the checkpoint");
        }
        stored
    }

    /// As [`Report::find`], and a problem unless the entry has `dtype` and `shape`.
    pub(crate) fn expect<'c>(
        &mut self,
        checkpoint: &'c Checkpoint,
        name: &str,
        need: Need,
        dtype: Dtype,
        shape: &[usize],
    ) -> Option<&'c Stored> {
        let stored = self.find(checkpoint, name, need)?;
        if stored.info.dtype != dtype || stored.info.shape != shape {
            self.problem(
                name,
                format_args!("expected {dtype} {shape:?}, found {}", stored.info),
            );
            return None;
        }
        Some(stored)
    }
}

/// Whether an entry may be missing.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Need {
    /// A target's own entry: missing is allowed when the plan allows it.
    Target,
    /// Part of a larger stored value (a slot of a stored optimizer state): never missing.
    #[cfg_attr(not(feature = "optim"), allow(dead_code))]
    Part,
}

struct SliceTarget<'a, T> {
    name: String,
    shape: Vec<usize>,
    out: &'a mut [T],
}

impl<T: Scalar> Target for SliceTarget<'_, T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        if checked_numel(&self.shape) != Some(self.out.len()) {
            report.problem(
                &self.name,
                format_args!(
                    "the target slice holds {} elements, not the elements of shape {:?}",
                    self.out.len(),
                    self.shape
                ),
            );
        }
        report.expect(checkpoint, &self.name, Need::Target, T::DTYPE, &self.shape);
    }

    fn apply(self: Box<Self>, checkpoint: &Checkpoint) {
        if let Some(stored) = checkpoint.stored(&self.name) {
            T::decode_le_bytes(&stored.bytes, self.out);
        }
    }
}

struct VecTarget<'a, T> {
    name: String,
    shape: Vec<usize>,
    out: &'a mut Vec<T>,
}

impl<T: Scalar> Target for VecTarget<'_, T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        report.expect(checkpoint, &self.name, Need::Target, T::DTYPE, &self.shape);
    }

    fn apply(self: Box<Self>, checkpoint: &Checkpoint) {
        if let Some(stored) = checkpoint.stored(&self.name) {
            let len = stored.bytes.len() / T::DTYPE.size_in_bytes();
            self.out.clear();
            self.out.resize(len, T::default());
            T::decode_le_bytes(&stored.bytes, self.out);
        }
    }
}

/// What a [`Restore::with`] target's setter returns: the write, staged.
type Commit<'a> = Box<dyn FnOnce() + 'a>;

/// The setter of a [`Restore::with`] target.
type Stage<'a, T> = Box<dyn FnOnce(&[T]) -> Result<Commit<'a>> + 'a>;

struct WithTarget<'a, T> {
    name: String,
    shape: Vec<usize>,
    stage: Option<Stage<'a, T>>,
    commit: Option<Commit<'a>>,
}

impl<T: Scalar> Target for WithTarget<'_, T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        report.expect(checkpoint, &self.name, Need::Target, T::DTYPE, &self.shape);
    }

    fn prepare(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let (Some(stored), Some(stage)) = (checkpoint.stored(&self.name), self.stage.take()) else {
            return Ok(());
        };
        let mut values = vec![T::default(); stored.bytes.len() / T::DTYPE.size_in_bytes()];
        T::decode_le_bytes(&stored.bytes, &mut values);
        self.commit = Some(stage(&values)?);
        Ok(())
    }

    fn apply(self: Box<Self>, _checkpoint: &Checkpoint) {
        if let Some(commit) = self.commit {
            commit();
        }
    }
}

struct RngTarget<'a> {
    name: String,
    rng: &'a mut Rng,
}

fn rng_words(stored: &Stored) -> [u64; checkpoint::RNG_WORDS] {
    let mut words = [0u64; checkpoint::RNG_WORDS];
    u64::decode_le_bytes(&stored.bytes, &mut words);
    words
}

impl Target for RngTarget<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        let stored = report.expect(
            checkpoint,
            &self.name,
            Need::Target,
            Dtype::U64,
            &checkpoint::RNG_SHAPE,
        );
        if let Some(stored) = stored
            && checkpoint::rng_state(&rng_words(stored)).is_none()
        {
            report.problem(
                &self.name,
                "not an RNG position (its pending-sample flag is neither 0 nor 1)",
            );
        }
    }

    fn apply(self: Box<Self>, checkpoint: &Checkpoint) {
        if let Some(stored) = checkpoint.stored(&self.name) {
            let state = checkpoint::rng_state(&rng_words(stored)).expect("check() validated it");
            *self.rng = Rng::from_state(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved() -> Checkpoint {
        let mut c = Checkpoint::new();
        c.put("a", &[2], &[1.0f32, 2.0]).unwrap();
        c.put("b", &[], &[7u64]).unwrap();
        c.put_rng("rng", &Rng::new(3, "x")).unwrap();
        c
    }

    #[test]
    fn matching_plan_writes_everything() {
        let c = saved();
        let (mut a, mut b, mut rng) = ([0.0f32; 2], 0u64, Rng::new(0, "other"));
        let mut plan = Restore::new();
        plan.slice("a", &[2], &mut a)
            .scalar("b", &mut b)
            .rng("rng", &mut rng);
        c.restore(plan).unwrap();
        assert_eq!((a, b), ([1.0, 2.0], 7));
        assert_eq!(rng.next_u64(), Rng::new(3, "x").next_u64());
    }

    #[test]
    fn missing_and_extra_are_errors_unless_allowed() {
        let c = saved();
        let (mut a, mut z) = ([0.0f32; 2], [9.0f32]);
        let mut plan = Restore::new();
        plan.slice("a", &[2], &mut a).slice("z", &[1], &mut z);
        let message = c.restore(plan).unwrap_err().to_string();
        assert!(message.contains("3 mismatches"), "{message}");
        assert!(
            message.contains("`z`: missing from the checkpoint"),
            "{message}"
        );
        assert!(
            message.contains("`b`: stored but not restored"),
            "{message}"
        );
        assert!(
            message.contains("`rng`: stored but not restored"),
            "{message}"
        );
        assert_eq!(a, [0.0; 2]);

        let mut plan = Restore::new();
        plan.allow_missing(true)
            .allow_extra(true)
            .slice("a", &[2], &mut a)
            .slice("z", &[1], &mut z);
        c.restore(plan).unwrap();
        assert_eq!((a, z), ([1.0, 2.0], [9.0]));
    }

    #[test]
    fn a_name_read_twice_and_a_short_slice_are_reported() {
        let c = saved();
        let (mut a, mut again, mut short) = ([0.0f32; 2], [0.0f32; 2], [0u64; 2]);
        let mut plan = Restore::new();
        plan.allow_extra(true)
            .slice("a", &[2], &mut a)
            .slice("a", &[2], &mut again)
            .slice("b", &[], &mut short);
        let message = c.restore(plan).unwrap_err().to_string();
        assert!(message.contains("`a`: named by two targets"), "{message}");
        assert!(
            message
                .contains("`b`: the target slice holds 2 elements, not the elements of shape []"),
            "{message}"
        );
    }

    #[test]
    fn a_corrupt_rng_position_is_reported() {
        let mut c = Checkpoint::new();
        c.put("rng", &[5], &[1u64, 2, 3, 4, 5]).unwrap();
        let mut rng = Rng::new(0, "x");
        let mut plan = Restore::new();
        plan.rng("rng", &mut rng);
        let message = c.restore(plan).unwrap_err().to_string();
        assert!(message.contains("not an RNG position"), "{message}");
    }
}
