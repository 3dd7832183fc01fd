use crate::{Device, Float, Result, View};

/// Data movement: materializing views, gathering and scattering along an axis,
/// concatenating. Every kernel writes every element of its (dense, row-major) output.
pub trait CopyKernel<T: Float>: Device {
    /// `out` = the elements of `x` in row-major order.
    fn copy(&self, x: View<'_, Self::Buffer<T>>, out: &mut Self::Buffer<T>) -> Result<()>;

    /// `out` = the slices `indices[i]` of `x` along `axis`, stacked along `axis` in the
    /// order given (indices may repeat). An error when an index is out of range.
    fn index_select(
        &self,
        x: View<'_, Self::Buffer<T>>,
        axis: usize,
        indices: &[usize],
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// The adjoint of [`CopyKernel::index_select`]: `out` has `x`'s shape with axis `axis`
    /// of size `size`; it starts at zero and slice `i` of `x` along `axis` is added to slice
    /// `indices[i]` of `out`, for `i` in increasing order (so repeated indices accumulate
    /// in a fixed order). An error when an index is `>= size`.
    fn index_add(
        &self,
        x: View<'_, Self::Buffer<T>>,
        axis: usize,
        indices: &[usize],
        size: usize,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// `out` = `parts` joined along `axis`; all parts have equal dimensions except `axis`.
    fn concat(
        &self,
        parts: &[View<'_, Self::Buffer<T>>],
        axis: usize,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}
