//! The `Local` backend: workers as threads of one process, talking over std channels.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rlgrad_core::{Error, Result};

use crate::collective::{Collective, check_all_to_all, check_root, check_timeout};

/// Which collective a message belongs to, so that ranks calling different collectives get
/// an error instead of each other's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    AllGather,
    AllToAll,
    Broadcast,
    Barrier,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::AllGather => "all_gather",
            Op::AllToAll => "all_to_all",
            Op::Broadcast => "broadcast",
            Op::Barrier => "barrier",
        })
    }
}

#[derive(Debug)]
enum Payload {
    Data(Arc<[u8]>),
    /// The sender's `Local` was dropped: its thread returned, failed or panicked.
    Left,
}

#[derive(Debug)]
struct Message {
    from: usize,
    /// The sender's count of collectives before this one (for `Left`: all it made).
    call: u64,
    op: Op,
    payload: Payload,
}

/// One worker of a group of threads in this process (the [`Collective`] for tests and for
/// data parallelism on one machine).
///
/// [`Local::run`] starts `W` workers and returns their results; [`Local::group`] gives the
/// `W` communicators to move into threads of your own. Messages travel over std channels;
/// a worker waits at most `timeout` for each collective, so a worker that died (its
/// `Local` is dropped when its thread returns, fails or panics) or that stalls makes the
/// others fail with an error naming its rank instead of hanging.
///
/// ```
/// use rlgrad_dist::{Collective, Local};
/// use std::time::Duration;
/// let sizes = Local::run(3, Duration::from_secs(10), |comm| {
///     let all = comm.all_gather(&vec![7u8; comm.rank()])?;
///     Ok(all.iter().map(Vec::len).collect::<Vec<_>>())
/// })?;
/// assert_eq!(sizes, vec![vec![0, 1, 2]; 3]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Local {
    rank: usize,
    size: usize,
    timeout: Duration,
    /// A sender to every rank; `None` at this rank's own index.
    peers: Vec<Option<Sender<Message>>>,
    inbox: Receiver<Message>,
    /// Messages that arrived from a rank while this one waited for another, per source.
    early: RefCell<Vec<VecDeque<Message>>>,
    calls: Cell<u64>,
}

impl fmt::Debug for Local {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Local")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("timeout", &self.timeout)
            .field("calls", &self.calls.get())
            .finish_non_exhaustive()
    }
}

impl Local {
    /// The timeout [`Local::run`] users pick when they have no better figure: a minute,
    /// longer than any collective of a training step on one machine.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    /// `workers` connected communicators, rank `r` at index `r`, each waiting at most
    /// `timeout` for a collective. Errors: `workers == 0`, a zero `timeout`.
    pub fn group(workers: usize, timeout: Duration) -> Result<Vec<Local>> {
        let function = "Local::group";
        check_group(function, workers, timeout)?;
        let (senders, inboxes): (Vec<_>, Vec<_>) = (0..workers).map(|_| channel()).unzip();
        Ok(inboxes
            .into_iter()
            .enumerate()
            .map(|(rank, inbox)| Local {
                rank,
                size: workers,
                timeout,
                peers: senders
                    .iter()
                    .enumerate()
                    .map(|(r, s)| (r != rank).then(|| s.clone()))
                    .collect(),
                inbox,
                early: RefCell::new((0..workers).map(|_| VecDeque::new()).collect()),
                calls: Cell::new(0),
            })
            .collect())
    }

    /// Runs `f` on `workers` threads, each with its communicator, and returns the results
    /// by rank.
    ///
    /// When a worker fails (returns an error or panics), the error returned is the first
    /// failure in time: the worker's own error, or, for a panic, an error naming its rank;
    /// the others then fail within `timeout` with errors naming that rank, and those are
    /// not returned. Errors: `workers == 0`, a zero `timeout`.
    pub fn run<R, F>(workers: usize, timeout: Duration, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&Local) -> Result<R> + Sync,
    {
        let function = "Local::run";
        check_group(function, workers, timeout)?;
        let comms = Local::group(workers, timeout)?;
        let failures: Mutex<Vec<Error>> = Mutex::new(Vec::new());
        let results: Vec<Option<R>> = std::thread::scope(|scope| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|comm| {
                    let (f, failures) = (&f, &failures);
                    scope.spawn(move || {
                        let rank = comm.rank;
                        let outcome = catch_unwind(AssertUnwindSafe(|| f(&comm)));
                        let error = match outcome {
                            Ok(Ok(r)) => return Some(r),
                            Ok(Err(e)) => e,
                            Err(panic) => Error::Device {
                                function,
                                device: format!("Local rank {rank}"),
                                message: format!("rank {rank} panicked: {}", panic_text(&*panic)),
                                cause: None,
                            },
                        };
                        // Recorded before the communicator is dropped (which tells the
                        // others this rank has left), so that it comes before their errors.
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(error);
                        drop(comm);
                        None
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
        if !failures.is_empty() {
            return Err(failures.swap_remove(0));
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("a worker without a failure has a result"))
            .collect())
    }

    /// The timeout of each collective.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn next_call(&self) -> u64 {
        let call = self.calls.get();
        self.calls.set(call + 1);
        call
    }

    fn fail(&self, function: &'static str, message: String) -> Error {
        Error::Device {
            function,
            device: format!("Local rank {}", self.rank),
            message,
            cause: None,
        }
    }

    fn send(
        &self,
        function: &'static str,
        to: usize,
        call: u64,
        op: Op,
        data: Arc<[u8]>,
    ) -> Result<()> {
        let sender = self.peers[to].as_ref().expect("no sender to oneself");
        let message = Message {
            from: self.rank,
            call,
            op,
            payload: Payload::Data(data),
        };
        sender.send(message).map_err(|_| {
            self.fail(
                function,
                format!("rank {to} has left (its thread returned, failed or panicked) before collective #{call} ({op})"),
            )
        })
    }

    /// The message of collective `call` from rank `from`, waiting until `deadline`.
    fn receive(
        &self,
        function: &'static str,
        from: usize,
        call: u64,
        op: Op,
        deadline: Instant,
    ) -> Result<Arc<[u8]>> {
        let message = loop {
            if let Some(m) = self.early.borrow_mut()[from].pop_front() {
                break m;
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.inbox.recv_timeout(wait) {
                Ok(m) if m.from == from => break m,
                Ok(m) => self.early.borrow_mut()[m.from].push_back(m),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.fail(
                        function,
                        format!(
                            "rank {from} sent nothing within the timeout of {:?} in collective \
                             #{call} ({op}): it is dead, stalled, or not calling this collective",
                            self.timeout
                        ),
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.fail(
                        function,
                        format!("rank {from} has left before collective #{call} ({op})"),
                    ));
                }
            }
        };
        match message.payload {
            Payload::Left => Err(self.fail(
                function,
                format!(
                    "rank {from} has left (its thread returned, failed or panicked) after {} \
                     collectives, while this rank waits in collective #{call} ({op})",
                    message.call
                ),
            )),
            Payload::Data(_) if message.call != call || message.op != op => Err(self.fail(
                function,
                format!(
                    "rank {from} called {} as collective #{} where this rank called {op} as #{call}: \
                     the ranks do not run the same collectives",
                    message.op, message.call
                ),
            )),
            Payload::Data(data) => Ok(data),
        }
    }

    /// Sends `outgoing(r)` to every other rank `r`, then receives from every other rank.
    fn exchange(
        &self,
        function: &'static str,
        op: Op,
        outgoing: impl Fn(usize) -> Arc<[u8]>,
        own: Vec<u8>,
    ) -> Result<Vec<Vec<u8>>> {
        let call = self.next_call();
        let deadline = Instant::now() + self.timeout;
        for to in (0..self.size).filter(|&r| r != self.rank) {
            self.send(function, to, call, op, outgoing(to))?;
        }
        let mut own = Some(own);
        (0..self.size)
            .map(|from| {
                if from == self.rank {
                    Ok(own.take().expect("one own message"))
                } else {
                    Ok(self.receive(function, from, call, op, deadline)?.to_vec())
                }
            })
            .collect()
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        for sender in self.peers.iter().flatten() {
            // A peer that has left already needs no notice.
            let _ = sender.send(Message {
                from: self.rank,
                call: self.calls.get(),
                op: Op::Barrier,
                payload: Payload::Left,
            });
        }
    }
}

impl Collective for Local {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_gather(&self, send: &[u8]) -> Result<Vec<Vec<u8>>> {
        let shared: Arc<[u8]> = Arc::from(send);
        self.exchange(
            "Local::all_gather",
            Op::AllGather,
            |_| shared.clone(),
            send.to_vec(),
        )
    }

    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let function = "Local::all_to_all";
        check_all_to_all(function, "send", send.len(), self.size)?;
        self.exchange(
            function,
            Op::AllToAll,
            |to| Arc::from(send[to].as_slice()),
            send[self.rank].clone(),
        )
    }

    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()> {
        let function = "Local::broadcast";
        check_root(function, root, self.size)?;
        let call = self.next_call();
        if self.rank == root {
            let shared: Arc<[u8]> = Arc::from(data.as_slice());
            for to in (0..self.size).filter(|&r| r != root) {
                self.send(function, to, call, Op::Broadcast, shared.clone())?;
            }
        } else {
            let deadline = Instant::now() + self.timeout;
            *data = self
                .receive(function, root, call, Op::Broadcast, deadline)?
                .to_vec();
        }
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        let empty: Arc<[u8]> = Arc::from(&[][..]);
        self.exchange("Local::barrier", Op::Barrier, |_| empty.clone(), Vec::new())
            .map(drop)
    }
}

fn check_group(function: &'static str, workers: usize, timeout: Duration) -> Result<()> {
    if workers == 0 {
        return Err(Error::value(function, "workers", "at least one worker", 0));
    }
    check_timeout(function, timeout)
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: Duration = Duration::from_millis(300);

    #[test]
    fn collectives_deliver_by_rank() {
        for workers in 1..=4 {
            let out = Local::run(workers, Local::DEFAULT_TIMEOUT, |c| {
                let r = c.rank() as u8;
                let gathered = c.all_gather(&vec![r; c.rank() + 1])?;
                let sent: Vec<Vec<u8>> = (0..c.size()).map(|to| vec![r * 10 + to as u8]).collect();
                let exchanged = c.all_to_all(&sent)?;
                let mut b = if c.rank() == workers - 1 {
                    vec![9, 9, 9]
                } else {
                    vec![1]
                };
                c.broadcast(workers - 1, &mut b)?;
                c.barrier()?;
                Ok((gathered, exchanged, b))
            })
            .unwrap();
            for (rank, (gathered, exchanged, b)) in out.into_iter().enumerate() {
                for (from, g) in gathered.iter().enumerate() {
                    assert_eq!(g, &vec![from as u8; from + 1]);
                }
                for (from, e) in exchanged.iter().enumerate() {
                    assert_eq!(e, &vec![from as u8 * 10 + rank as u8]);
                }
                assert_eq!(b, [9, 9, 9]);
            }
        }
    }

    #[test]
    fn a_dead_worker_is_named_instead_of_a_hang() {
        // Rank 2 fails before the collective: the error returned is its own.
        let err = Local::run(4, SHORT, |c| {
            if c.rank() == 2 {
                return Err(Error::value("worker", "rank", "not 2", 2));
            }
            c.barrier()
        })
        .unwrap_err();
        assert_eq!(err.function(), "worker");
        // What the survivors see: the dead rank named.
        let mut comms = Local::group(3, SHORT).unwrap();
        drop(comms.remove(1));
        let err = comms[0].all_gather(&[1]).unwrap_err();
        assert!(err.to_string().contains("rank 1 has left"), "{err}");
        // A stalled worker: a timeout naming it.
        let comms = Local::group(2, SHORT).unwrap();
        let err = comms[0].barrier().unwrap_err();
        assert!(
            err.to_string()
                .contains("rank 1 sent nothing within the timeout"),
            "{err}"
        );
        // A panic becomes an error naming the rank.
        let err = Local::run(3, SHORT, |c| {
            assert!(c.rank() != 1, "worker 1 broke");
            c.barrier()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("rank 1 panicked: worker 1 broke"),
            "{err}"
        );
    }

    #[test]
    fn different_collectives_are_an_error() {
        let err = Local::run(2, SHORT, |c| {
            if c.rank() == 0 {
                c.barrier()
            } else {
                c.all_gather(&[1]).map(drop)
            }
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("the ranks do not run the same collectives"),
            "{err}"
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(Local::group(0, SHORT).is_err());
        assert!(Local::run(2, Duration::ZERO, |_| Ok(())).is_err());
        let err = Local::run(2, SHORT, |c| c.broadcast(2, &mut Vec::new())).unwrap_err();
        assert_eq!(err.argument(), Some("root"));
        let err = Local::run(2, SHORT, |c| c.all_to_all(&[vec![]]).map(drop)).unwrap_err();
        assert_eq!(err.argument(), Some("send"));
    }
}
