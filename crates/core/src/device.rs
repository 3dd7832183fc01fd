//! The [`Device`] trait: where buffers live and how data gets there and back.
//!
//! A device owns memory; the kernel traits of [`crate::kernels`] add computations. An
//! algorithm is written once, generic over `D: Device + SomeKernel<T>`, and runs on the
//! [`crate::Cpu`] device or on the CUDA device of `rlgrad-cuda` unchanged.

use std::fmt::Debug;
use std::sync::Arc;

use crate::{Element, Layout, Result};

/// Memory and transfers of a compute device.
pub trait Device: Clone + Debug + Send + Sync + 'static {
    /// A buffer of `len` elements of type `E` on this device (`Vec<E>` on the Cpu).
    type Buffer<E: Element>: Debug + Send + Sync;

    /// A short name for messages (`"cpu"`, `"cuda:0"`).
    fn name(&self) -> String;

    /// A buffer of `len` zeros.
    fn alloc_zeros<E: Element>(&self, len: usize) -> Result<Self::Buffer<E>>;

    /// A buffer holding a copy of `host`.
    fn upload<E: Element>(&self, host: &[E]) -> Result<Self::Buffer<E>>;

    /// A buffer made from `host`; the Cpu device takes the vector without copying.
    fn upload_vec<E: Element>(&self, host: Vec<E>) -> Result<Self::Buffer<E>> {
        self.upload(&host)
    }

    /// A buffer of `len` elements for a kernel to overwrite entirely, shared-ready: the
    /// returned `Arc` is the buffer's only reference. Its contents are unspecified (a
    /// device may hand back a buffer it recycled), so it is only for outputs whose every
    /// element the kernel writes; every kernel trait documents that it does.
    ///
    /// Tensors take their outputs from here and give them back with
    /// [`Device::recycle`], so a loop that repeats the same ops reaches a steady state
    /// without allocating. The default allocates zeros.
    fn alloc_output<E: Element>(&self, len: usize) -> Result<Arc<Self::Buffer<E>>> {
        Ok(Arc::new(self.alloc_zeros(len)?))
    }

    /// Hands back a buffer its owner no longer needs, for [`Device::alloc_output`] to
    /// reuse when `buffer` is the last reference to it. The default frees it.
    fn recycle<E: Element>(&self, buffer: Arc<Self::Buffer<E>>) {
        drop(buffer);
    }

    /// The buffer's contents, copied to the host.
    fn download<E: Element>(&self, buffer: &Self::Buffer<E>) -> Result<Vec<E>>;

    /// The number of elements of `buffer`.
    fn buffer_len<E: Element>(&self, buffer: &Self::Buffer<E>) -> usize;

    /// The buffer's memory, where the host can read it in place (the Cpu's `Vec`), so
    /// that a check of every element needs no copy; `None` (the default) elsewhere, where
    /// [`Device::download`] is the way.
    fn host_slice<'b, E: Element>(&self, buffer: &'b Self::Buffer<E>) -> Option<&'b [E]> {
        let _ = buffer;
        None
    }

    /// The buffer's values for the host to read: in place where [`Device::host_slice`]
    /// allows, else downloaded.
    fn host_values<'b, E: Element>(
        &self,
        buffer: &'b Self::Buffer<E>,
    ) -> Result<std::borrow::Cow<'b, [E]>> {
        match self.host_slice(buffer) {
            Some(values) => Ok(std::borrow::Cow::Borrowed(values)),
            None => self.download(buffer).map(std::borrow::Cow::Owned),
        }
    }

    /// Waits until every operation queued on the device has finished.
    fn synchronize(&self) -> Result<()>;

    /// What the device keeps of a [`Step`](crate::Step) between its runs: its recordings
    /// where the device records steps (a GPU), nothing where it runs each as it comes.
    type Recordings: Default + Debug + Send;

    /// Runs `step` as one run of a [`Step`](crate::Step) whose recordings are
    /// `recordings`: recorded or replayed with the bits of running it as it comes, or (by
    /// default) run as it comes. Either way the step runs to its end once; the host reads
    /// in its work ([`crate::step::note_host_read`]) are [`Step::run`](crate::Step::run)'s
    /// to report.
    fn run_step<R>(
        &self,
        _recordings: &mut Self::Recordings,
        step: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        step()
    }
}

/// A read-only strided view into a device buffer: what kernels take as input.
#[derive(Debug)]
pub struct View<'a, B> {
    /// The buffer.
    pub buffer: &'a B,
    /// Which elements of the buffer, in which order.
    pub layout: &'a Layout,
}

impl<B> Clone for View<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for View<'_, B> {}

impl<'a, B> View<'a, B> {
    /// A view of `buffer` through `layout`.
    pub fn new(buffer: &'a B, layout: &'a Layout) -> Self {
        Self { buffer, layout }
    }
}
