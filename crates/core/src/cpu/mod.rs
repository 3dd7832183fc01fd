//! The [`Cpu`] device: host memory (`Vec<E>`) and the reference implementation of every
//! kernel trait, parallel on rayon as its [`Par`] setting allows.
//!
//! The public submodules hold the slice-level kernels that the algorithm crates expose
//! directly (plain `&[T]` in, `&mut [T]` out, a [`Par`] setting): the `Cpu` device's
//! trait implementations call the same functions, so there is one implementation. Beside
//! them are the settings that change the Cpu's speed and never its bits: the instruction
//! set ([`simd`]) and the grain sizes ([`grain`](mod@grain)).

pub mod alloc;
pub mod cache;
pub mod cell;
mod copy;
mod elementwise;
mod gemm;
pub mod grain;
mod lanes;
pub mod layout;
mod lines;
mod matmul;
pub mod optim;
pub(crate) mod par;
mod random;
pub mod recurrence;
pub(crate) mod reduce;
pub mod sequence;
pub mod simd;

use std::sync::Arc;

use crate::cpu::grain::{Family, grain};
use crate::{Device, Element, Error, Layout, Par, Result, View};

/// The host device. Its [`Par`] setting decides how many rayon tasks a kernel may use;
/// results are the same bits for every setting.
///
/// ```
/// use rlgrad_core::{Cpu, Device, Par};
/// let cpu = Cpu::new(Par::rayon(2));
/// let buffer = cpu.upload(&[1.0f32, 2.0]).unwrap();
/// assert_eq!(cpu.download(&buffer).unwrap(), [1.0, 2.0]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cpu {
    par: Par,
}

impl Cpu {
    /// A Cpu device with the given parallelism.
    pub fn new(par: Par) -> Self {
        Self { par }
    }

    /// A Cpu device that runs every kernel on the calling thread.
    pub fn seq() -> Self {
        Self::new(Par::Seq)
    }

    /// The parallelism setting.
    pub fn par(&self) -> Par {
        self.par
    }
}

impl Device for Cpu {
    type Buffer<E: Element> = Vec<E>;

    fn name(&self) -> String {
        "cpu".to_owned()
    }

    fn alloc_zeros<E: Element>(&self, len: usize) -> Result<Vec<E>> {
        alloc::try_zeroed(len, "Device::alloc_zeros", "len")
    }

    /// A buffer from this thread's [`cache`] when one of `len` elements is there, else a
    /// fresh zeroed one.
    fn alloc_output<E: Element>(&self, len: usize) -> Result<Arc<Vec<E>>> {
        match cache::take(len) {
            Some(buffer) => Ok(buffer),
            None => Ok(Arc::new(alloc::try_zeroed(
                len,
                "Device::alloc_output",
                "len",
            )?)),
        }
    }

    /// Keeps `buffer` in this thread's [`cache`] (within its limit) when it is the last
    /// reference.
    fn recycle<E: Element>(&self, buffer: Arc<Vec<E>>) {
        cache::give_back(buffer);
    }

    fn upload<E: Element>(&self, host: &[E]) -> Result<Vec<E>> {
        alloc::try_copy(host, "Device::upload", "host")
    }

    fn upload_vec<E: Element>(&self, host: Vec<E>) -> Result<Vec<E>> {
        Ok(host)
    }

    fn download<E: Element>(&self, buffer: &Vec<E>) -> Result<Vec<E>> {
        crate::step::note_host_read("Device::download");
        alloc::try_copy(buffer, "Device::download", "buffer")
    }

    fn buffer_len<E: Element>(&self, buffer: &Vec<E>) -> usize {
        buffer.len()
    }

    fn host_slice<'b, E: Element>(&self, buffer: &'b Vec<E>) -> Option<&'b [E]> {
        crate::step::note_host_read("Device::host_slice");
        Some(buffer)
    }

    fn synchronize(&self) -> Result<()> {
        crate::step::note_host_read("Device::synchronize");
        Ok(())
    }

    /// Nothing: the Cpu runs every step as it comes (`Step::run` still watches its host
    /// reads, so that a step that runs here records on a GPU).
    type Recordings = ();
}

/// Elements per parallel piece of elementwise work: large enough to amortize a task,
/// small enough to balance two to four threads on mid-sized tensors.
const CHUNK: usize = 1 << 14;

/// `Ok` when every element `view` addresses lies inside its buffer.
fn check_view<E>(
    function: &'static str,
    argument: &'static str,
    view: View<'_, Vec<E>>,
) -> Result<()> {
    crate::check::inside_buffer(function, argument, view.layout, view.buffer.len())
}

/// `Ok` when the output buffer `out` has the `len` elements the kernel writes.
fn check_output<E>(function: &'static str, out: &[E], len: usize) -> Result<()> {
    if out.len() == len {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            "out",
            format_args!("an output of {len} elements"),
            format_args!("{} elements", out.len()),
        ))
    }
}

/// The view as a plain slice when it is dense, `None` otherwise.
fn dense<'a, E>(view: View<'a, Vec<E>>) -> Option<&'a [E]> {
    view.layout
        .is_contiguous()
        .then(|| &view.buffer[view.layout.offset()..view.layout.offset() + view.layout.numel()])
}

/// The row that `view` repeats when it is a dense last axis broadcast along every other
/// axis (a bias added to each row of a batch), `None` otherwise.
fn repeated_row<'a, E>(view: View<'a, Vec<E>>) -> Option<&'a [E]> {
    let layout = view.layout;
    let (&last, outer) = layout.strides().split_last()?;
    let len = layout.inner_len();
    (len > 0 && (last == 1 || len == 1) && outer.iter().all(|&s| s == 0))
        .then(|| &view.buffer[layout.offset()..layout.offset() + len])
}

/// Calls `f(out_pos, starts, strides, count)` for the [`runs`] of `N` layouts of one shape
/// over the row-major element range `start..start + len`.
fn for_each_run<const N: usize>(
    layouts: [&Layout; N],
    start: usize,
    len: usize,
    mut f: impl FnMut(usize, [usize; N], [usize; N], usize),
) {
    for run in runs(layouts, start, len) {
        f(run.pos, run.starts, run.strides, run.count);
    }
}

/// A piece of a row shared by `N` layouts of one shape: the elements `pos + i` (row-major,
/// counted from the start of the range walked) for `i < count` live at
/// `starts[j] + i * strides[j]` of layout `j`.
struct Run<const N: usize> {
    pos: usize,
    starts: [usize; N],
    strides: [usize; N],
    count: usize,
}

/// The runs (pieces of rows) that cover the row-major element range `start..start + len`
/// of `N` layouts of one shape. (An iterator rather than a callback, so that a loop over
/// runs compiles inside its caller, vector instruction set included.)
#[inline(always)]
fn runs<const N: usize>(layouts: [&Layout; N], start: usize, len: usize) -> Runs<'_, N> {
    let inner = layouts[0].inner_len();
    let cursors = layouts.map(|l| crate::shape::RowCursor::new(l, start / inner.max(1)));
    Runs {
        strides: std::array::from_fn(|j| cursors[j].inner_stride()),
        cursors,
        inner,
        col: start % inner.max(1),
        pos: 0,
        len: if inner == 0 { 0 } else { len },
    }
}

/// The iterator of [`runs`].
struct Runs<'a, const N: usize> {
    cursors: [crate::shape::RowCursor<'a>; N],
    strides: [usize; N],
    inner: usize,
    col: usize,
    pos: usize,
    len: usize,
}

impl<const N: usize> Iterator for Runs<'_, N> {
    type Item = Run<N>;

    #[inline(always)]
    fn next(&mut self) -> Option<Run<N>> {
        if self.pos >= self.len {
            return None;
        }
        let count = (self.inner - self.col).min(self.len - self.pos);
        let run = Run {
            pos: self.pos,
            starts: std::array::from_fn(|j| self.cursors[j].start() + self.col * self.strides[j]),
            strides: self.strides,
            count,
        };
        self.pos += count;
        self.col = 0;
        if self.pos < self.len {
            for cursor in &mut self.cursors {
                cursor.advance();
            }
        }
        Some(run)
    }
}

/// A dense copy of `view` (borrowed when it already is dense); an error when a copy that
/// large cannot be allocated.
fn dense_or_copy<'a, E: Element>(
    function: &'static str,
    par: Par,
    view: View<'a, Vec<E>>,
) -> Result<std::borrow::Cow<'a, [E]>> {
    match dense(view) {
        Some(slice) => Ok(std::borrow::Cow::Borrowed(slice)),
        None => {
            // A broadcast view can address far more elements than its buffer holds.
            let mut out = alloc::try_zeroed(view.layout.numel(), function, "x")?;
            let par = par.for_work(out.len(), grain(Family::Elementwise));
            par.for_each_chunk_mut(&mut out, CHUNK, |ci, chunk| {
                for_each_run(
                    [view.layout],
                    ci * CHUNK,
                    chunk.len(),
                    |pos, [s], [st], count| {
                        for (i, o) in chunk[pos..pos + count].iter_mut().enumerate() {
                            *o = view.buffer[s + i * st];
                        }
                    },
                );
            });
            Ok(std::borrow::Cow::Owned(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Shape;

    #[test]
    fn views_outside_their_buffer_are_refused() {
        let buffer = vec![0.0f32; 5];
        let layout = Layout::contiguous(Shape::from([2, 3]));
        let err = check_view("t", "x", View::new(&buffer, &layout)).unwrap_err();
        assert!(err.to_string().contains("reaching element 5"), "{err}");
    }

    #[test]
    fn runs_split_rows_at_chunk_edges() {
        let layout = Layout::contiguous(Shape::from([3, 4]));
        let mut runs = Vec::new();
        for_each_run([&layout], 2, 7, |pos, [s], _, count| {
            runs.push((pos, s, count))
        });
        assert_eq!(runs, [(0, 2, 2), (2, 4, 4), (6, 8, 1)]);
    }
}
