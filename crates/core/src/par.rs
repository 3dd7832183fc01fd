use std::num::NonZeroUsize;

use rayon::prelude::*;

/// [`Par`]: how much parallelism a kernel may use, passed explicitly (as in faer) rather
/// than taken from the ambient rayon pool, so one process can run a kernel at 1, 2 and 4
/// threads and compare the bits.
///
/// Parallelism never changes results: every kernel partitions its work by element index
/// into pieces whose boundaries do not depend on the thread count, and combines partial
/// results in a fixed order.
///
/// The variants:
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Par {
    /// Run on the calling thread.
    Seq,
    /// Split the work into at most this many tasks, run on the current rayon pool
    /// (the global one, or the one entered with `ThreadPool::install`).
    Rayon(NonZeroUsize),
}

impl Par {
    /// `Par::Rayon(threads)`; `0` means the size of the current rayon pool, 1 means `Seq`.
    pub fn rayon(threads: usize) -> Self {
        let threads = if threads == 0 {
            rayon::current_num_threads()
        } else {
            threads
        };
        match NonZeroUsize::new(threads) {
            Some(n) if n.get() > 1 => Self::Rayon(n),
            _ => Self::Seq,
        }
    }

    /// As many tasks as the current rayon pool has threads.
    pub fn auto() -> Self {
        Self::rayon(0)
    }

    /// This setting, with fewer tasks when `work` (elements) is too small to give each
    /// task `min_per_task`: waking a thread costs microseconds, which small kernels do not
    /// recover. Results do not change: partitions never depend on the thread count.
    pub fn for_work(self, work: usize, min_per_task: usize) -> Self {
        let tasks = (work / min_per_task.max(1)).clamp(1, self.threads());
        Self::rayon(tasks)
    }

    /// The number of tasks this setting allows (1 for `Seq`).
    pub fn threads(self) -> usize {
        match self {
            Self::Seq => 1,
            Self::Rayon(n) => n.get(),
        }
    }

    /// Calls `f(chunk_index, chunk)` for the consecutive `chunk_len`-sized chunks of
    /// `data` (the last may be shorter), spread over at most [`Par::threads`] tasks.
    /// The chunk boundaries depend only on `chunk_len`, never on the thread count.
    pub fn for_each_chunk_mut<T, F>(self, data: &mut [T], chunk_len: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync + Send,
    {
        let chunk_len = chunk_len.max(1);
        let chunks = data.len().div_ceil(chunk_len);
        if self.threads() == 1 || chunks <= 1 {
            data.chunks_mut(chunk_len)
                .enumerate()
                .for_each(|(i, c)| f(i, c));
        } else {
            let per_task = chunks.div_ceil(self.threads());
            data.par_chunks_mut(chunk_len)
                .enumerate()
                .with_min_len(per_task)
                .for_each(|(i, c)| f(i, c));
        }
    }

    /// Calls `f(range)` for consecutive index ranges of length `chunk_len` covering
    /// `0..len` (the last may be shorter), spread over at most [`Par::threads`] tasks.
    pub fn for_each_range<F>(self, len: usize, chunk_len: usize, f: F)
    where
        F: Fn(std::ops::Range<usize>) + Sync + Send,
    {
        let chunk_len = chunk_len.max(1);
        let chunks = len.div_ceil(chunk_len);
        let range_of = |i: usize| i * chunk_len..((i + 1) * chunk_len).min(len);
        if self.threads() == 1 || chunks <= 1 {
            (0..chunks).for_each(|i| f(range_of(i)));
        } else {
            let per_task = chunks.div_ceil(self.threads());
            (0..chunks)
                .into_par_iter()
                .with_min_len(per_task)
                .for_each(|i| f(range_of(i)));
        }
    }

    /// Calls `f` on every item, spread over at most [`Par::threads`] tasks of consecutive
    /// items.
    pub fn for_each_item<I, F>(self, items: Vec<I>, f: F)
    where
        I: Send,
        F: Fn(I) + Sync + Send,
    {
        if self.threads() == 1 || items.len() <= 1 {
            items.into_iter().for_each(f);
        } else {
            let per_task = items.len().div_ceil(self.threads());
            items.into_par_iter().with_min_len(per_task).for_each(f);
        }
    }

    /// Runs `a` and `b`, in parallel unless this is `Seq`.
    pub fn join<A, B, RA, RB>(self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        if self.threads() == 1 {
            (a(), b())
        } else {
            rayon::join(a, b)
        }
    }
}

impl Default for Par {
    /// [`Par::auto`].
    fn default() -> Self {
        Self::auto()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn rayon_with_one_thread_is_sequential() {
        assert_eq!(Par::rayon(1), Par::Seq);
        assert_eq!(Par::rayon(3).threads(), 3);
    }

    #[test]
    fn small_work_gets_fewer_tasks() {
        assert_eq!(Par::rayon(4).for_work(100, 1000), Par::Seq);
        assert_eq!(Par::rayon(4).for_work(2500, 1000), Par::rayon(2));
        assert_eq!(Par::rayon(4).for_work(1 << 30, 1000), Par::rayon(4));
        assert_eq!(Par::Seq.for_work(1 << 30, 1), Par::Seq);
    }

    #[test]
    fn chunks_cover_the_data_once() {
        for par in [Par::Seq, Par::rayon(2), Par::rayon(4)] {
            let mut data = vec![0usize; 1003];
            par.for_each_chunk_mut(&mut data, 100, |i, chunk| {
                for (j, v) in chunk.iter_mut().enumerate() {
                    *v = i * 100 + j;
                }
            });
            assert!(data.iter().enumerate().all(|(i, &v)| i == v));
            let seen = AtomicUsize::new(0);
            par.for_each_range(1003, 100, |r| {
                seen.fetch_add(r.len(), Ordering::Relaxed);
            });
            assert_eq!(seen.into_inner(), 1003);
        }
    }
}
