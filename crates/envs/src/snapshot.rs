//! Whole environment states as integers, for checkpoints that resume mid-episode.

use rlgrad_core::{Error, Result};

use crate::seeding::{NumpyRng, NumpyRngState};

/// An environment whose whole state can be saved and restored: the physics, the step
/// counters and the position of its random generator, so that a training run resumed from
/// a checkpoint steps on with the bits of one that never stopped, mid-episode included.
///
/// A snapshot is a vector of `u64` words: integers as they are, floats as their bits
/// (`f64::to_bits`, `f32::to_bits`), flags as 0 or 1. It is exact, and an integer tensor
/// in a checkpoint holds it as it is. Its length depends only on the environment's type
/// (and, for [`crate::VecEnv`], on the number and kind of its environments), so a fresh
/// environment's snapshot tells the length to read back. The configuration (the step
/// limit) is not part of it: restore into an environment built the same way.
///
/// ```
/// use rlgrad_envs::{CartPole, Env, Snapshot};
///
/// let mut env = CartPole::new();
/// env.reset(Some(7))?;
/// env.step(&[1])?;
/// let saved = env.snapshot();
///
/// let mut resumed = CartPole::new();
/// resumed.restore(&saved)?;
/// for action in [0, 1, 1, 0] {
///     assert_eq!(resumed.step(&[action])?, env.step(&[action])?);
/// }
/// assert_eq!(resumed.reset(None)?, env.reset(None)?); // the generator goes on too
/// assert!(resumed.restore(&saved[1..]).is_err()); // a snapshot of another length
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub trait Snapshot {
    /// The whole state as words.
    fn snapshot(&self) -> Vec<u64>;

    /// Puts back a state taken by [`Snapshot::snapshot`] from an environment built the
    /// same way. An error, with nothing changed, for a snapshot of another length or
    /// with an invalid word (a flag other than 0 or 1, a count beyond `usize`).
    fn restore(&mut self, snapshot: &[u64]) -> Result<()>;
}

/// Appends words to a snapshot.
#[derive(Debug, Default)]
pub(crate) struct WordWriter {
    words: Vec<u64>,
}

impl WordWriter {
    pub(crate) fn word(&mut self, value: u64) {
        self.words.push(value);
    }

    pub(crate) fn usize(&mut self, value: usize) {
        self.word(value as u64);
    }

    pub(crate) fn flag(&mut self, value: bool) {
        self.word(u64::from(value));
    }

    pub(crate) fn f64s(&mut self, values: &[f64]) {
        self.words.extend(values.iter().map(|v| v.to_bits()));
    }

    pub(crate) fn f32s(&mut self, values: &[f32]) {
        self.words
            .extend(values.iter().map(|v| u64::from(v.to_bits())));
    }

    pub(crate) fn words(&mut self, words: &[u64]) {
        self.words.extend_from_slice(words);
    }

    /// An optional state: a 0/1 flag, then the state's words or as many zeros.
    pub(crate) fn option<const N: usize>(&mut self, value: Option<[f64; N]>) {
        self.flag(value.is_some());
        self.f64s(&value.unwrap_or([0.0; N]));
    }

    /// An optional generator: a 0/1 flag, its seed and its draws.
    pub(crate) fn rng(&mut self, rng: Option<&NumpyRng>) {
        let state = rng.map(NumpyRng::state);
        self.flag(state.is_some());
        self.word(state.map_or(0, |s| s.seed));
        self.word(state.map_or(0, |s| s.draws));
    }

    pub(crate) fn finish(self) -> Vec<u64> {
        self.words
    }
}

/// Reads the words of a snapshot back, checking each one.
#[derive(Debug)]
pub(crate) struct WordReader<'a> {
    function: &'static str,
    words: &'a [u64],
    at: usize,
}

impl<'a> WordReader<'a> {
    /// A reader of `words`, which must hold exactly `expected` words (what `kind`'s
    /// snapshot holds).
    pub(crate) fn new(
        function: &'static str,
        words: &'a [u64],
        expected: usize,
        kind: &str,
    ) -> Result<Self> {
        if words.len() != expected {
            return Err(Error::shape(
                function,
                "snapshot",
                format_args!("{expected} words (a snapshot of {kind})"),
                format_args!("{} words", words.len()),
            ));
        }
        Ok(Self {
            function,
            words,
            at: 0,
        })
    }

    /// The next word. The length was checked in [`WordReader::new`], so a reader never
    /// runs past its words.
    pub(crate) fn word(&mut self) -> u64 {
        let word = self.words[self.at];
        self.at += 1;
        word
    }

    /// The next `count` words.
    pub(crate) fn words(&mut self, count: usize) -> &'a [u64] {
        let words = &self.words[self.at..self.at + count];
        self.at += count;
        words
    }

    pub(crate) fn usize(&mut self) -> Result<usize> {
        let at = self.at;
        usize::try_from(self.word()).map_err(|_| {
            Error::out_of_range(
                self.function,
                "snapshot",
                format_args!("a count that fits in usize at word {at}"),
                self.words[at],
            )
        })
    }

    pub(crate) fn flag(&mut self) -> Result<bool> {
        let at = self.at;
        match self.word() {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(Error::value(
                self.function,
                "snapshot",
                format_args!("a 0/1 flag at word {at}"),
                other,
            )),
        }
    }

    /// `N` f64 values, as they were (a snapshot is exact, whatever the state holds).
    pub(crate) fn f64s<const N: usize>(&mut self) -> [f64; N] {
        std::array::from_fn(|_| f64::from_bits(self.word()))
    }

    /// `count` f32 values from words holding their bits.
    pub(crate) fn f32s(&mut self, count: usize) -> Result<Vec<f32>> {
        let at = self.at;
        self.words(count)
            .iter()
            .enumerate()
            .map(|(i, &word)| {
                u32::try_from(word).map(f32::from_bits).map_err(|_| {
                    Error::out_of_range(
                        self.function,
                        "snapshot",
                        format_args!("the bits of an f32 at word {}", at + i),
                        word,
                    )
                })
            })
            .collect()
    }

    /// An optional state written by [`WordWriter::option`].
    pub(crate) fn option<const N: usize>(&mut self) -> Result<Option<[f64; N]>> {
        let present = self.flag()?;
        let values = self.f64s();
        Ok(present.then_some(values))
    }

    /// An optional generator written by [`WordWriter::rng`].
    pub(crate) fn rng(&mut self) -> Result<Option<NumpyRng>> {
        let present = self.flag()?;
        let state = NumpyRngState {
            seed: self.word(),
            draws: self.word(),
        };
        Ok(present.then(|| NumpyRng::from_state(state)))
    }
}
