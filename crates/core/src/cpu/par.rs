use std::cell::RefCell;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
            self.split(|| {
                data.par_chunks_mut(chunk_len)
                    .enumerate()
                    .with_min_len(per_task)
                    .for_each(|(i, c)| f(i, c));
            });
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
            self.split(|| {
                (0..chunks)
                    .into_par_iter()
                    .with_min_len(per_task)
                    .for_each(|i| f(range_of(i)));
            });
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
            self.split(|| items.into_par_iter().with_min_len(per_task).for_each(f));
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
            self.split(|| rayon::join(a, b))
        }
    }

    /// Runs `split`, which hands pieces of work to the current rayon pool, after starting
    /// again the pollers of [`keep_workers_awake`] that stopped for lack of work: the one
    /// door through which every kernel splits (the methods above go through it), so that
    /// none can split without waking them.
    pub(crate) fn split<R>(self, split: impl FnOnce() -> R) -> R {
        wake_idle_pollers();
        split()
    }
}

impl Default for Par {
    /// [`Par::auto`].
    fn default() -> Self {
        Self::auto()
    }
}

/// The first wait between two polls of [`keep_workers_awake`]'s workers after a poll
/// that found no work; each further empty poll doubles it up to [`MAX_POLL_INTERVAL`].
const MIN_POLL_INTERVAL: Duration = Duration::from_nanos(250);
/// The longest wait between two polls, and so the longest a parallel kernel waits for an
/// idle worker (its caller runs the pieces no worker took, so it never waits for one).
/// Short against a kernel worth splitting (tens of microseconds), and long enough that a
/// worker spends nearly all its idle time in `pause`: polling the queues' shared cache
/// lines without one slows down the thread that fills them, and on a CPU whose two
/// logical CPUs share a core (SMT), a worker that keeps polling takes the core's issue
/// slots from the thread running the serial code between kernels.
const MAX_POLL_INTERVAL: Duration = Duration::from_micros(4);
/// How long a worker of [`keep_workers_awake`] polls without finding work before it
/// stops, until the next parallel kernel of `op`'s thread starts it again: far longer
/// than the serial stretches between the kernels of a training step, so that a step
/// whose kernels split keeps its workers polling, while one whose kernels all run inline
/// (below their grain) ends up with its other CPUs idle, as on one thread.
const IDLE_LIMIT: Duration = Duration::from_millis(1);

/// Spins with `pause` (which hands the core to an SMT sibling) for about `interval`.
fn pause_for(interval: Duration) {
    let start = Instant::now();
    while start.elapsed() < interval {
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
}

/// One [`keep_workers_awake`] call, shared by its pollers.
struct Awake {
    /// Set when `op` has returned (or panicked): the pollers stop.
    done: AtomicBool,
    /// Pollers spawned and not yet ended (running, or queued in the pool).
    live: AtomicUsize,
    /// Pollers that stopped for lack of work, for the next parallel kernel to start again.
    idle: AtomicUsize,
    /// The rayon index of `op`'s thread, which must never poll.
    owner: Option<usize>,
}

impl Awake {
    /// Queues one poller in the current pool.
    fn spawn_poller(self: &Arc<Self>) {
        self.live.fetch_add(1, Ordering::AcqRel);
        let awake = Arc::clone(self);
        rayon::spawn(move || awake.poll());
    }

    /// Runs queued work until `op` ends, or until nothing came for [`IDLE_LIMIT`].
    fn poll(&self) {
        // `op`'s own thread may pick up a poller while it waits inside a kernel (a join
        // runs local jobs); it must not poll, and the next kernel queues the poller again.
        if rayon::current_thread_index() == self.owner {
            self.idle.fetch_add(1, Ordering::AcqRel);
        } else {
            let mut interval = MIN_POLL_INTERVAL;
            let mut last_work = Instant::now();
            while !self.done.load(Ordering::Acquire) {
                if rayon::yield_now() == Some(rayon::Yield::Executed) {
                    interval = MIN_POLL_INTERVAL;
                    last_work = Instant::now();
                    continue;
                }
                if last_work.elapsed() >= IDLE_LIMIT {
                    self.idle.fetch_add(1, Ordering::AcqRel);
                    break;
                }
                pause_for(interval);
                interval = (interval * 2).min(MAX_POLL_INTERVAL);
            }
        }
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

thread_local! {
    /// The [`keep_workers_awake`] call whose `op` runs on this thread, if any.
    static AWAKE: RefCell<Option<Arc<Awake>>> = const { RefCell::new(None) };
}

/// Starts again the pollers of the [`keep_workers_awake`] call running on this thread
/// that stopped for lack of work ([`Par::split`] calls it before every split). Without
/// such a call (or such pollers) it only reads a thread-local.
fn wake_idle_pollers() {
    AWAKE.with(|awake| {
        if let Some(awake) = &*awake.borrow() {
            for _ in 0..awake.idle.swap(0, Ordering::AcqRel) {
                awake.spawn_poller();
            }
        }
    });
}

/// Runs `op` in the current rayon pool (the global one, or the one entered with
/// `ThreadPool::install`) with the pool's other workers kept awake: instead of going to
/// sleep between parallel kernels, they poll for work. OpenMP's active wait policy
/// (`OMP_WAIT_POLICY=active`, Intel's `KMP_BLOCKTIME`), which the BLAS and deep-learning
/// runtimes behind PyTorch and TensorFlow use, for rayon.
///
/// A training step runs hundreds of kernels, and the parallel ones are separated by
/// serial stretches long enough for rayon's idle workers to fall asleep; waking one costs
/// a system call and, on a virtual machine whose idle CPU the host descheduled, tens of
/// microseconds more, per kernel. Measured on a 2-CPU VM, one TD3 iteration with 2 threads
/// (`W7`): 2.6-3.9 ms from run to run without, 2.6-2.8 ms with.
///
/// Like `KMP_BLOCKTIME`, the wait is bounded: a worker that found no work for a
/// millisecond goes back to rayon's sleep, and the next kernel of `op`'s thread that
/// splits sets it polling again (paying one wake-up, as without this function). So work
/// whose kernels all run inline, below their grain, leaves the other CPUs idle, and runs
/// as on one thread.
///
/// Results do not change (partitions never depend on timing or on which thread runs a
/// piece). The cost: the other workers' CPUs are busy while `op` runs kernels that split,
/// and through its serial code between them; use it around a training loop on CPUs the
/// process has to itself. `op` runs on a worker of the pool (the calling thread when it
/// is one); a panic in `op` is resumed here after the workers stopped polling.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use rlgrad_core::{Par, keep_workers_awake};
/// let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let covered = pool.install(|| {
///     keep_workers_awake(|| {
///         let seen = AtomicUsize::new(0);
///         for _ in 0..100 {
///             Par::rayon(2).for_each_range(1000, 100, |range| {
///                 seen.fetch_add(range.len(), Ordering::Relaxed);
///             });
///         }
///         seen.into_inner()
///     })
/// });
/// assert_eq!(covered, 100 * 1000);
/// ```
pub fn keep_workers_awake<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    /// Stops the pollers and waits for every one to end when dropped, so that none
    /// outlives `op`, even when `op` panics; restores this thread's previous call.
    struct Stop {
        awake: Arc<Awake>,
        outer: Option<Arc<Awake>>,
    }
    impl Drop for Stop {
        fn drop(&mut self) {
            self.awake.done.store(true, Ordering::Release);
            // A poller still queued on this thread's deque runs (and ends at once) here.
            while self.awake.live.load(Ordering::Acquire) > 0 {
                if rayon::yield_now() != Some(rayon::Yield::Executed) {
                    std::hint::spin_loop();
                }
            }
            AWAKE.with(|awake| *awake.borrow_mut() = self.outer.take());
        }
    }
    // A scope only to run on a worker of the pool (the calling thread when it is one):
    // the pollers are spawned with `rayon::spawn`, so that a later kernel can start one
    // again, and counted by `Stop`.
    rayon::scope(|_| {
        let awake = Arc::new(Awake {
            done: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            owner: rayon::current_thread_index(),
        });
        for _ in 1..rayon::current_num_threads() {
            awake.spawn_poller();
        }
        let outer = AWAKE.with(|slot| slot.borrow_mut().replace(Arc::clone(&awake)));
        let _stop = Stop { awake, outer };
        op()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Parallel work inside `keep_workers_awake` runs and ends (no worker is left
    /// polling), from inside a pool and from outside one, and a panic in `op` comes back
    /// to the caller instead of hanging the pool.
    #[test]
    fn keep_workers_awake_runs_parallel_work_and_returns() {
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let sum_in_pieces = || {
                let seen = AtomicUsize::new(0);
                for _ in 0..50 {
                    Par::rayon(threads).for_each_range(1000, 10, |r| {
                        seen.fetch_add(r.len(), Ordering::Relaxed);
                    });
                }
                seen.into_inner()
            };
            assert_eq!(pool.install(|| keep_workers_awake(sum_in_pieces)), 50_000);
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.install(|| keep_workers_awake(|| panic!("inside op")))
            }));
            assert!(panicked.is_err());
            assert_eq!(pool.install(|| keep_workers_awake(sum_in_pieces)), 50_000);
        }
        assert_eq!(keep_workers_awake(|| 7), 7);
    }

    /// Workers that find no work for `IDLE_LIMIT` stop polling, and the next kernel that
    /// splits starts them again, whichever kernel it is (a `Par` method, the optimizer
    /// update, the recurrences, which split their own way); its work is done either way,
    /// and none is left behind.
    #[test]
    fn idle_pollers_stop_and_every_kernel_that_splits_starts_them_again() {
        let seen = AtomicUsize::new(0);
        let mut for_each_range = || {
            Par::rayon(3).for_each_range(3000, 10, |range| {
                seen.fetch_add(range.len(), Ordering::Relaxed);
            });
        };
        let (mut param, grad) = (vec![1.0f32; 1 << 18], vec![0.5f32; 1 << 18]);
        let sgd = crate::kernels::optim::Update::Sgd(crate::kernels::optim::Sgd {
            lr: 0.0,
            weight_decay: 0.0,
        });
        let mut optimizer_update = || {
            crate::cpu::optim::update(Par::rayon(3), &sgd, &mut param, &grad, &mut []).unwrap();
        };
        let (t, b) = (512, 1024);
        let rewards = vec![0.5f32; t * b];
        let mut advantages = vec![0.0f32; t * b];
        let mut gae = || {
            let episodes = crate::kernels::recurrence::Episodes::Constant { gamma: 0.9 };
            let layout = crate::kernels::recurrence::TimeMajor::new(t, b);
            crate::cpu::recurrence::gae(
                Par::rayon(3),
                layout,
                &rewards,
                &rewards,
                &rewards[..b],
                episodes,
                0.9,
                &mut advantages,
                None,
            )
            .unwrap();
        };
        assert_restarts_idle_pollers(&mut for_each_range);
        assert_eq!(seen.load(Ordering::Relaxed) % 3000, 0, "every range ran");
        assert_restarts_idle_pollers(&mut optimizer_update);
        assert_restarts_idle_pollers(&mut gae);
    }

    /// Inside `keep_workers_awake` on a pool of 3: once both pollers stopped, `kernel` (a
    /// kernel that splits) starts them again; none outlives the call.
    fn assert_restarts_idle_pollers(kernel: &mut (dyn FnMut() + Send)) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let awake = pool.install(|| {
            let awake = keep_workers_awake(|| {
                let awake = AWAKE.with(|slot| slot.borrow().clone().expect("set for op"));
                // Nothing splits: both pollers stop after the idle limit.
                while awake.idle.load(Ordering::Acquire) < 2 {
                    assert!(Instant::now() < deadline, "the pollers never stopped");
                    std::thread::sleep(IDLE_LIMIT);
                }
                while awake.live.load(Ordering::Acquire) > 0 {
                    assert!(Instant::now() < deadline, "a stopped poller never ended");
                    std::thread::yield_now();
                }
                // A kernel that splits starts them again (seen before they can stop
                // again, unless this thread was held for an idle limit: then retry).
                let restarted = (0..100).any(|_| {
                    kernel();
                    let restarted = awake.idle.load(Ordering::Acquire) < 2;
                    while awake.idle.load(Ordering::Acquire) < 2 {
                        assert!(Instant::now() < deadline, "restarted pollers never stopped");
                        std::thread::sleep(IDLE_LIMIT);
                    }
                    restarted
                });
                assert!(restarted, "the kernel did not start the idle pollers again");
                awake
            });
            assert!(
                AWAKE.with(|slot| slot.borrow().is_none()),
                "the call is forgotten when it returns"
            );
            awake
        });
        assert_eq!(
            awake.live.load(Ordering::Acquire),
            0,
            "no poller outlives op"
        );
        assert!(awake.done.load(Ordering::Acquire));
    }

    /// A kernel that reaches rayon itself does so inside `Par::split`: every source file
    /// but this one that names a rayon parallel iterator or `rayon::join` calls `split`.
    #[test]
    fn every_file_that_splits_goes_through_par_split() {
        fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    sources(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        let splitting = [
            "into_par_iter",
            "par_chunks",
            "par_iter",
            "rayon::join",
            "rayon::scope",
        ];
        let mut checked = 0;
        for file in files.iter().filter(|f| !f.ends_with("par.rs")) {
            let text = std::fs::read_to_string(file).unwrap();
            if splitting.iter().any(|s| text.contains(s)) {
                checked += 1;
                assert!(
                    text.contains(".split(||"),
                    "{} splits work without Par::split (the pollers would not wake)",
                    file.display()
                );
            }
        }
        assert!(
            checked >= 2,
            "the optimizer and the recurrences split: {checked} files"
        );
    }

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
