//! The masked-reduction math is written once, generic over where the data lives: plain
//! slices on the Cpu (the slice level) or buffers of any device (the device level).

use rlgrad_core::cpu::sequence as kernel;
use rlgrad_core::kernels::SequenceKernel;
use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm};
use rlgrad_core::{Float, Par, Result};

use crate::Sequences;

/// The three sequence primitives, on one kind of storage. Padded data is `[B, T, F]`
/// with `features` values per step.
pub(crate) trait Backend<T: Float> {
    /// Borrowed `[B, T, F]` or `[B]` data.
    type Data: ?Sized;
    /// Owned data of the same kind.
    type Owned;

    fn sum(
        &self,
        seqs: &Sequences,
        features: usize,
        x: &Self::Data,
        term: MaskedTerm<'_, Self::Data, T>,
    ) -> Result<T>;
    /// The `[B]` per-sequence sums, on the host; `function` is named when they cannot be
    /// allocated.
    fn sequence_sums(
        &self,
        function: &'static str,
        seqs: &Sequences,
        features: usize,
        x: &Self::Data,
    ) -> Result<Vec<T>>;
    /// `map` at the valid values into a new `[B, T, F]` array; `x` may be `None` when the
    /// map does not read it. `function` is named when the output cannot be allocated.
    fn map(
        &self,
        function: &'static str,
        seqs: &Sequences,
        features: usize,
        x: Option<&Self::Data>,
        map: MaskedMap<'_, Self::Data, T>,
    ) -> Result<Self::Owned>;
    /// Per-sequence values made available to [`Backend::map`].
    fn upload(&self, host: Vec<T>) -> Result<Self::Owned>;
    fn borrow<'a>(&self, owned: &'a Self::Owned) -> &'a Self::Data;
    fn len(&self, x: &Self::Data) -> usize;
}

/// Slices on the Cpu with the given parallelism.
pub(crate) struct Slices(pub Par);

impl<T: Float> Backend<T> for Slices {
    type Data = [T];
    type Owned = Vec<T>;

    fn sum(
        &self,
        seqs: &Sequences,
        features: usize,
        x: &[T],
        term: MaskedTerm<'_, [T], T>,
    ) -> Result<T> {
        kernel::masked_sum(self.0, seqs, features, x, term)
    }

    fn sequence_sums(
        &self,
        function: &'static str,
        seqs: &Sequences,
        features: usize,
        x: &[T],
    ) -> Result<Vec<T>> {
        let mut sums = rlgrad_core::cpu::alloc::try_zeroed(seqs.batch(), function, "seqs")?;
        kernel::sequence_sums(self.0, seqs, features, x, &mut sums)?;
        Ok(sums)
    }

    fn map(
        &self,
        function: &'static str,
        seqs: &Sequences,
        features: usize,
        x: Option<&[T]>,
        map: MaskedMap<'_, [T], T>,
    ) -> Result<Vec<T>> {
        kernel::masked_map_new(self.0, function, seqs, features, x, map)
    }

    fn upload(&self, host: Vec<T>) -> Result<Vec<T>> {
        Ok(host)
    }

    fn borrow<'a>(&self, owned: &'a Vec<T>) -> &'a [T] {
        owned
    }

    fn len(&self, x: &[T]) -> usize {
        x.len()
    }
}

/// Buffers of a device.
pub(crate) struct OnDevice<'d, D>(pub &'d D);

impl<T: Float, D: SequenceKernel<T>> Backend<T> for OnDevice<'_, D> {
    type Data = D::Buffer<T>;
    type Owned = D::Buffer<T>;

    fn sum(
        &self,
        seqs: &Sequences,
        features: usize,
        x: &D::Buffer<T>,
        term: MaskedTerm<'_, D::Buffer<T>, T>,
    ) -> Result<T> {
        self.0.masked_sum(seqs, features, x, term)
    }

    fn sequence_sums(
        &self,
        _function: &'static str,
        seqs: &Sequences,
        features: usize,
        x: &D::Buffer<T>,
    ) -> Result<Vec<T>> {
        let mut sums = self.0.alloc_zeros(seqs.batch())?;
        self.0.sequence_sums(seqs, features, x, &mut sums)?;
        self.0.download(&sums)
    }

    fn map(
        &self,
        function: &'static str,
        seqs: &Sequences,
        features: usize,
        x: Option<&D::Buffer<T>>,
        map: MaskedMap<'_, D::Buffer<T>, T>,
    ) -> Result<D::Buffer<T>> {
        let len = rlgrad_core::check::product(function, "features", seqs.padded_steps(), features)?;
        let mut out = self.0.alloc_zeros(len)?;
        self.0.masked_map(seqs, features, x, map, &mut out)?;
        Ok(out)
    }

    fn upload(&self, host: Vec<T>) -> Result<D::Buffer<T>> {
        self.0.upload_vec(host)
    }

    fn borrow<'a>(&self, owned: &'a D::Buffer<T>) -> &'a D::Buffer<T> {
        owned
    }

    fn len(&self, x: &D::Buffer<T>) -> usize {
        self.0.buffer_len(x)
    }
}
