//! Chopping episodes into fixed-length training sequences (RLlib's
//! `chop_into_sequences`), and minibatches of whole sequences.

use rlgrad_core::cpu::{alloc, sequence as kernel};
use rlgrad_core::{Error, Float, Par, Result, Rng};

use crate::{PadOrder, Sequences};

/// One feature column of the packed rows: `data` holds `width` values per row.
#[derive(Debug, Clone, Copy)]
pub struct Column<'a, T> {
    /// `[N, width]`, row-major.
    pub data: &'a [T],
    /// Values per row.
    pub width: usize,
}

/// How [`chop_into_sequences`] cuts and pads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChopConfig {
    /// The longest sequence; longer episodes are cut into several sequences. Must be >= 1.
    pub max_seq_len: usize,
    /// Pad to the longest sequence found (`true`, RLlib's default) instead of `max_seq_len`.
    pub dynamic_max: bool,
    /// Refuse data in which an episode id comes back after another episode's rows
    /// (interleaved or shuffled rows). RLlib accepts it and starts a new sequence. Turn it
    /// on: time-major rows of a vector-env rollout, chopped without transposing them
    /// first, would otherwise become a silent batch of length-1 sequences.
    pub require_contiguous_episodes: bool,
}

impl ChopConfig {
    /// RLlib's defaults for a given `max_seq_len`: dynamic padding, reappearing ids allowed.
    pub fn new(max_seq_len: usize) -> Self {
        Self {
            max_seq_len,
            dynamic_max: true,
            require_contiguous_episodes: false,
        }
    }
}

/// Padded training sequences: lengths, where each started, and the padded columns.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceBatch<T> {
    seqs: Sequences,
    starts: Vec<usize>,
    columns: Vec<Vec<T>>,
    widths: Vec<usize>,
}

/// Cuts the packed rows into sequences and pads every column, with RLlib's semantics:
/// walking the rows in order, a new sequence starts when the episode id differs from the
/// previous row's or the current sequence already has `max_seq_len` rows. Sequence `s`
/// occupies rows `s*T .. s*T + len_s` of each padded column (`[S*T, width]`), zeros after.
///
/// # From a vector-env rollout
///
/// The rows must hold each episode's steps together and in order. A rollout of `B`
/// environments over `T` steps is time-major (row `t * B + env`), where consecutive rows
/// belong to different environments: [`transpose`](crate::transpose) it to batch-major
/// (row `env * T + t`) first, and number the episodes of each environment. Turn on
/// [`ChopConfig::require_contiguous_episodes`]: time-major rows are then an error, not a
/// batch of length-1 sequences.
///
/// ```
/// use rlgrad_mask::{chop_into_sequences, transpose, ChopConfig, Column};
/// // Two environments, three steps, time-major: obs[t * 2 + env]. Env 0's first episode
/// // ends at t = 0.
/// let (t, b) = (3, 2);
/// let obs = [0.0f32, 10.0, 1.0, 11.0, 2.0, 12.0];
/// let done = [true, false, false, false, false, false];
/// let obs_rows = transpose(&obs, t, b, 1)?; // batch-major: [0, 1, 2, 10, 11, 12]
/// let done_rows = transpose(&done, t, b, 1)?;
/// // An id per episode: a new one after each done and at each environment's last step.
/// let mut ids = Vec::new();
/// let mut id = 0i64;
/// for (row, &ended) in done_rows.iter().enumerate() {
///     ids.push(id);
///     if ended || row % t == t - 1 {
///         id += 1;
///     }
/// }
/// let strict = ChopConfig { require_contiguous_episodes: true, ..ChopConfig::new(4) };
/// let batch = chop_into_sequences(&ids, &[Column { data: &obs_rows, width: 1 }], strict)?;
/// assert_eq!(batch.seqs().lengths(), &[1, 2, 3]);
/// // The same rows left time-major are refused.
/// let time_major_ids = transpose(&ids, b, t, 1)?;
/// assert!(chop_into_sequences(&time_major_ids, &[Column { data: &obs, width: 1 }], strict).is_err());
/// # Ok::<(), rlgrad_mask::Error>(())
/// ```
///
/// RLlib's own example:
///
/// ```
/// use rlgrad_mask::{chop_into_sequences, ChopConfig, Column};
/// let ids = [7, 7, 7, 9, 9];
/// let obs = [0.0f32, 1.0, 2.0, 3.0, 4.0];
/// let batch = chop_into_sequences(&ids, &[Column { data: &obs, width: 1 }], ChopConfig::new(2))?;
/// assert_eq!(batch.seqs().lengths(), &[2, 1, 2]);
/// assert_eq!(batch.starts(), &[0, 2, 3]);
/// assert_eq!(batch.column(0), Some(&[0.0, 1.0, 2.0, 0.0, 3.0, 4.0][..]));
/// # Ok::<(), rlgrad_mask::Error>(())
/// ```
pub fn chop_into_sequences<T: Float>(
    episode_ids: &[i64],
    columns: &[Column<'_, T>],
    config: ChopConfig,
) -> Result<SequenceBatch<T>> {
    let function = "chop_into_sequences";
    if config.max_seq_len == 0 {
        return Err(Error::value(
            function,
            "config.max_seq_len",
            "at least 1",
            0,
        ));
    }
    let rows = episode_ids.len();
    for column in columns {
        let want = rlgrad_core::check::product(function, "columns", rows, column.width)?;
        if column.data.len() != want {
            return Err(Error::shape(
                function,
                "columns",
                format_args!("{want} values ({rows} rows of width {})", column.width),
                format_args!("{} values", column.data.len()),
            ));
        }
    }
    let mut lengths = Vec::new();
    let mut starts = Vec::new();
    let mut finished = std::collections::HashSet::new();
    for (row, &id) in episode_ids.iter().enumerate() {
        let new_episode = row == 0 || id != episode_ids[row - 1];
        if new_episode && config.require_contiguous_episodes {
            if row > 0 {
                finished.insert(episode_ids[row - 1]);
            }
            if finished.contains(&id) {
                return Err(Error::value(
                    function,
                    "episode_ids",
                    "the rows of each episode to be contiguous",
                    format_args!("episode {id} again at row {row} after other episodes"),
                ));
            }
        }
        let full = lengths.last().is_some_and(|&len| len >= config.max_seq_len);
        if new_episode || full {
            lengths.push(0);
            starts.push(row);
        }
        *lengths.last_mut().expect("a sequence was started") += 1;
    }
    let max_len = if config.dynamic_max {
        lengths.iter().copied().max().unwrap_or(0)
    } else {
        config.max_seq_len
    };
    let seqs = Sequences::new(&lengths, Some(max_len))?;
    let padded = columns
        .iter()
        .map(|column| {
            kernel::pad_new(
                Par::auto(),
                &seqs,
                column.width,
                PadOrder::BatchMajor,
                column.data,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SequenceBatch {
        seqs,
        starts,
        columns: padded,
        widths: columns.iter().map(|c| c.width).collect(),
    })
}

impl<T: Float> SequenceBatch<T> {
    /// The lengths and padding of the sequences.
    pub fn seqs(&self) -> &Sequences {
        &self.seqs
    }

    /// The packed row at which each sequence started (where its initial recurrent state
    /// comes from).
    pub fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// The number of columns.
    pub fn column_count(&self) -> usize {
        self.columns.len()
    }

    /// Padded column `k`, `[S * T, width_k]`; `None` when `k >= column_count()`.
    pub fn column(&self, k: usize) -> Option<&[T]> {
        self.columns.get(k).map(Vec::as_slice)
    }

    /// The width of column `k`; `None` when `k >= column_count()`.
    pub fn width(&self, k: usize) -> Option<usize> {
        self.widths.get(k).copied()
    }

    /// The sub-batch of the given sequences, in the given order (each sequence's rows kept
    /// together and in order; the padded length stays `T`; an index may repeat). An error
    /// for an index out of range, or when the host cannot allocate the sub-batch.
    pub fn select(&self, sequences: &[usize]) -> Result<Self> {
        const FUNCTION: &str = "SequenceBatch::select";
        if let Some(&bad) = sequences.iter().find(|&&s| s >= self.seqs.batch()) {
            return Err(Error::out_of_range(
                FUNCTION,
                "sequences",
                format_args!("indices below {}", self.seqs.batch()),
                bad,
            ));
        }
        let t = self.seqs.max_len();
        let lengths: Vec<usize> = sequences.iter().map(|&s| self.seqs.lengths()[s]).collect();
        let seqs = Sequences::new(&lengths, Some(t))?;
        let columns = self
            .columns
            .iter()
            .zip(&self.widths)
            .map(|(data, &w)| {
                // Exact whenever a sequence exists (a column holds `B * T * w` elements);
                // with none, `sequences` is empty and the block size does not matter.
                let block = t.saturating_mul(w);
                let len =
                    rlgrad_core::check::product(FUNCTION, "sequences", sequences.len(), block)?;
                let mut out = alloc::try_with_capacity(len, FUNCTION, "sequences")?;
                for &s in sequences {
                    out.extend_from_slice(&data[s * block..(s + 1) * block]);
                }
                Ok(out)
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            seqs,
            starts: sequences.iter().map(|&s| self.starts[s]).collect(),
            columns,
            widths: self.widths.clone(),
        })
    }

    /// Splits the sequences into `count` minibatches of whole sequences: shuffled with
    /// `rng` ([`Rng::shuffle`]), then cut into consecutive groups of about `N / count` valid
    /// steps each (a group closes once it reaches its share; every group gets at least one
    /// sequence). Returns sequence indices for [`SequenceBatch::select`]. An error when
    /// `count` is 0 or exceeds the number of sequences.
    ///
    /// ```
    /// use rlgrad_mask::{chop_into_sequences, ChopConfig, Column, Rng};
    /// let ids: Vec<i64> = (0..40).map(|r| r / 4).collect(); // 10 episodes of 4 steps
    /// let x: Vec<f32> = (0..40).map(|r| r as f32).collect();
    /// let batch = chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], ChopConfig::new(4))?;
    /// let groups = batch.minibatches(2, &mut Rng::new(0, "minibatch"))?;
    /// assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), 10);
    /// let first = batch.select(&groups[0])?; // padded sequences, rows in order
    /// assert_eq!(first.seqs().total(), 20);
    /// # Ok::<(), rlgrad_mask::Error>(())
    /// ```
    pub fn minibatches(&self, count: usize, rng: &mut Rng) -> Result<Vec<Vec<usize>>> {
        let sequences = self.seqs.batch();
        if count == 0 || count > sequences {
            return Err(Error::value(
                "SequenceBatch::minibatches",
                "count",
                format_args!("between 1 and the number of sequences, {sequences}"),
                count,
            ));
        }
        let mut order: Vec<usize> = (0..sequences).collect();
        rng.shuffle(&mut order);
        // Shares are compared in u128: `steps * count` may not fit in usize.
        let (total, count_wide) = (self.seqs.total() as u128, count as u128);
        let mut groups = vec![Vec::new(); count];
        let (mut k, mut steps) = (0usize, 0u128);
        for (placed, &s) in order.iter().enumerate() {
            let left_after_this = sequences - placed;
            let share_reached = steps * count_wide >= (k as u128 + 1) * total;
            let must_move = left_after_this == count - k - 1;
            if !groups[k].is_empty() && k + 1 < count && (share_reached || must_move) {
                k += 1;
            }
            groups[k].push(s);
            steps += self.seqs.lengths()[s] as u128;
        }
        Ok(groups)
    }

    /// Splits the sequences into minibatches of at most `size` valid steps each, PyTorch's
    /// and SB3's `batch_size` (RLlib's `minibatch_size` in steps): whole sequences shuffled
    /// with `rng` as [`SequenceBatch::minibatches`] does, then cut greedily, a group closing
    /// before the next sequence would take it past `size` (a sequence longer than `size`
    /// gets a group of its own). Returns sequence indices for [`SequenceBatch::select`]; no
    /// group when there is no sequence. An error when `size` is 0.
    ///
    /// ```
    /// use rlgrad_mask::{chop_into_sequences, ChopConfig, Column, Rng};
    /// let ids: Vec<i64> = (0..40).map(|r| r / 4).collect(); // 10 episodes of 4 steps
    /// let x: Vec<f32> = (0..40).map(|r| r as f32).collect();
    /// let batch = chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], ChopConfig::new(4))?;
    /// let groups = batch.minibatches_of_size(12, &mut Rng::new(0, "minibatch"))?;
    /// assert_eq!(groups.len(), 4); // 12 + 12 + 12 + 4 steps
    /// assert!(groups.iter().all(|g| g.len() <= 3));
    /// # Ok::<(), rlgrad_mask::Error>(())
    /// ```
    pub fn minibatches_of_size(&self, size: usize, rng: &mut Rng) -> Result<Vec<Vec<usize>>> {
        if size == 0 {
            return Err(Error::value(
                "SequenceBatch::minibatches_of_size",
                "size",
                "at least 1 valid step",
                size,
            ));
        }
        let mut order: Vec<usize> = (0..self.seqs.batch()).collect();
        rng.shuffle(&mut order);
        let mut groups = Vec::new();
        let (mut group, mut steps) = (Vec::new(), 0usize);
        for s in order {
            let len = self.seqs.lengths()[s];
            if !group.is_empty() && steps.saturating_add(len) > size {
                groups.push(std::mem::take(&mut group));
                steps = 0;
            }
            group.push(s);
            steps = steps.saturating_add(len);
        }
        if !group.is_empty() {
            groups.push(group);
        }
        Ok(groups)
    }
}
