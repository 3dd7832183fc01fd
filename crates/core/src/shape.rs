//! [`Shape`]: dimensions of a row-major n-d array, with NumPy broadcasting; and
//! [`Layout`]: a shape with strides and an offset into a buffer, the view that kernels read.

use std::fmt;

use smallvec::SmallVec;

use crate::{Error, Result};

/// Dimension lists up to four long live inline; longer ones spill to the heap.
pub type Dims = SmallVec<[usize; 4]>;

/// The dimensions of an n-d array, outermost first. `[]` is a scalar (one element).
///
/// ```
/// use rlgrad_core::Shape;
/// let s = Shape::from([2, 3, 4]);
/// assert_eq!(s.numel(), 24);
/// assert_eq!(s.strides().as_slice(), &[12, 4, 1]);
/// let b = Shape::broadcast("example", &Shape::from([3, 1]), &Shape::from([4])).unwrap();
/// assert_eq!(b, Shape::from([3, 4]));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(Dims);

impl Shape {
    /// A shape from its dimensions.
    #[inline]
    pub fn new(dims: &[usize]) -> Self {
        Self(Dims::from_slice(dims))
    }

    /// The shape of a scalar, `[]`.
    #[inline]
    pub fn scalar() -> Self {
        Self(Dims::new())
    }

    /// The dimensions.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The number of dimensions.
    #[inline]
    pub fn ndim(&self) -> usize {
        self.0.len()
    }

    /// The number of elements (1 for a scalar). Saturates at `usize::MAX`; see
    /// [`Shape::checked_numel`] for shapes that came from a caller.
    #[inline]
    pub fn numel(&self) -> usize {
        self.checked_numel().unwrap_or(usize::MAX)
    }

    /// The number of elements, or `None` when it overflows `usize`.
    #[inline]
    pub fn checked_numel(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// The number of elements, or an error naming `function` when it overflows `usize`.
    pub fn numel_for(&self, function: &'static str, argument: &'static str) -> Result<usize> {
        self.checked_numel().ok_or_else(|| {
            Error::shape(
                function,
                argument,
                "a shape whose element count fits in usize",
                self,
            )
        })
    }

    /// Row-major (C order) strides in elements: the last dimension has stride 1.
    #[inline]
    pub fn strides(&self) -> Dims {
        let mut strides = Dims::from_elem(0, self.0.len());
        let mut step = 1usize;
        for (stride, &dim) in strides.iter_mut().zip(self.0.iter()).rev() {
            *stride = step;
            step = step.saturating_mul(dim);
        }
        strides
    }

    /// Dimension `axis`, or an error naming `function` when `axis >= ndim`.
    pub fn dim(&self, function: &'static str, axis: usize) -> Result<usize> {
        self.check_axis(function, "axis", axis)?;
        Ok(self.0[axis])
    }

    /// `Ok` when `axis < ndim`.
    pub fn check_axis(
        &self,
        function: &'static str,
        argument: &'static str,
        axis: usize,
    ) -> Result<()> {
        if axis < self.ndim() {
            Ok(())
        } else {
            Err(Error::out_of_range(
                function,
                argument,
                format_args!("an axis below {} for shape {}", self.ndim(), self),
                axis,
            ))
        }
    }

    /// The NumPy broadcast of two shapes: aligned at the last dimension, each pair of
    /// dimensions must be equal or one of them 1; the shorter shape is padded with 1s.
    pub fn broadcast(function: &'static str, lhs: &Shape, rhs: &Shape) -> Result<Shape> {
        let ndim = lhs.ndim().max(rhs.ndim());
        let mut dims = Dims::from_elem(0, ndim);
        for i in 0..ndim {
            let l = dim_from_end(lhs, ndim - 1 - i);
            let r = dim_from_end(rhs, ndim - 1 - i);
            dims[i] = match (l, r) {
                (a, b) if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                _ => {
                    return Err(Error::shape(
                        function,
                        "rhs",
                        format_args!("a shape broadcastable with {lhs}"),
                        rhs,
                    ));
                }
            };
        }
        Ok(Shape(dims))
    }

    /// Whether this shape broadcasts to `target` (NumPy rules, one direction).
    pub fn broadcasts_to(&self, target: &Shape) -> bool {
        if self.ndim() > target.ndim() {
            return false;
        }
        let pad = target.ndim() - self.ndim();
        self.0
            .iter()
            .zip(&target.0[pad..])
            .all(|(&s, &t)| s == t || s == 1)
    }
}

fn dim_from_end(shape: &Shape, from_end: usize) -> usize {
    // Missing leading dimensions broadcast as 1.
    if from_end < shape.ndim() {
        shape.0[shape.ndim() - 1 - from_end]
    } else {
        1
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0.as_slice())
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(dims: [usize; N]) -> Self {
        Self::new(&dims)
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Self {
        Self::new(dims)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Self {
        Self(Dims::from_vec(dims))
    }
}

impl From<Dims> for Shape {
    fn from(dims: Dims) -> Self {
        Self(dims)
    }
}

impl From<&Shape> for Shape {
    fn from(shape: &Shape) -> Self {
        shape.clone()
    }
}

impl From<usize> for Shape {
    fn from(len: usize) -> Self {
        Self::new(&[len])
    }
}

impl From<()> for Shape {
    fn from((): ()) -> Self {
        Self::scalar()
    }
}

/// A strided view of a buffer: element `index` (a multi-index into `shape`) lives at
/// `offset + sum(index[i] * strides[i])`. A stride of 0 repeats (broadcasts) a dimension.
///
/// Kernels take a `Layout` beside each input buffer, so views (transpose, narrow,
/// broadcast) cost nothing until an op reads them.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Layout {
    shape: Shape,
    strides: Dims,
    offset: usize,
}

impl Layout {
    /// The row-major layout of `shape` at offset 0.
    #[inline]
    pub fn contiguous(shape: Shape) -> Self {
        let strides = shape.strides();
        Self {
            shape,
            strides,
            offset: 0,
        }
    }

    /// A layout from its parts. The caller guarantees that every element it addresses
    /// lies inside the buffer it is used with; [`Layout::max_offset`] tells the extent.
    #[inline]
    pub fn from_parts(shape: Shape, strides: Dims, offset: usize) -> Self {
        debug_assert_eq!(shape.ndim(), strides.len());
        Self {
            shape,
            strides,
            offset,
        }
    }

    /// The shape of the view.
    #[inline]
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The strides, in elements.
    #[inline]
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// The offset of the first element, in elements.
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The number of elements of the view.
    #[inline]
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// Whether the view is row-major and dense (a plain slice starting at `offset`).
    /// Dimensions of size 1 may have any stride.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for (&dim, &stride) in self.shape.dims().iter().zip(&self.strides).rev() {
            if dim != 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(dim);
        }
        true
    }

    /// The largest offset any element of the view reads (`None` for an empty view);
    /// `usize::MAX` when that offset does not fit in `usize` (no buffer holds it).
    pub fn max_offset(&self) -> Option<usize> {
        if self.shape.dims().contains(&0) {
            return None;
        }
        let reach =
            self.shape
                .dims()
                .iter()
                .zip(&self.strides)
                .try_fold(self.offset, |acc, (&d, &s)| {
                    (d - 1)
                        .checked_mul(s)
                        .and_then(|step| acc.checked_add(step))
                });
        Some(reach.unwrap_or(usize::MAX))
    }

    /// Calls `f(row_start, inner_stride, inner_len)` for each row (the last dimension) of
    /// the rows `first_row..first_row + row_count`, in row-major order. A scalar is one
    /// row of length 1.
    pub fn for_each_row(
        &self,
        first_row: usize,
        row_count: usize,
        mut f: impl FnMut(usize, usize, usize),
    ) {
        let mut cursor = RowCursor::new(self, first_row);
        for _ in 0..row_count {
            f(cursor.start(), cursor.inner_stride(), cursor.inner_len());
            cursor.advance();
        }
    }

    /// The length of the last dimension (1 for a scalar).
    #[inline]
    pub fn inner_len(&self) -> usize {
        self.shape.dims().last().copied().unwrap_or(1)
    }

    /// The number of rows [`Layout::for_each_row`] visits in all.
    pub fn row_count(&self) -> usize {
        match self.shape.dims().split_last() {
            None => 1,
            Some((_, outer)) => outer.iter().product(),
        }
    }
}

/// Walks the rows (last dimension) of a [`Layout`] in row-major order, tracking where
/// each row starts in the buffer without a division per row.
#[derive(Debug, Clone)]
pub struct RowCursor<'a> {
    outer: &'a [usize],
    outer_strides: &'a [usize],
    index: Dims,
    start: usize,
    inner_stride: usize,
    inner_len: usize,
}

impl<'a> RowCursor<'a> {
    /// A cursor at row `row` of `layout`.
    pub fn new(layout: &'a Layout, row: usize) -> Self {
        let ndim = layout.shape.ndim();
        let (outer, outer_strides, inner_stride) = if ndim == 0 {
            (&[][..], &[][..], 0)
        } else {
            (
                &layout.shape.dims()[..ndim - 1],
                &layout.strides[..ndim - 1],
                layout.strides[ndim - 1],
            )
        };
        let mut index = Dims::from_elem(0, outer.len());
        let mut rem = row;
        for axis in (0..outer.len()).rev() {
            index[axis] = rem % outer[axis].max(1);
            rem /= outer[axis].max(1);
        }
        let start = layout.offset
            + index
                .iter()
                .zip(outer_strides)
                .map(|(&i, &s)| i * s)
                .sum::<usize>();
        Self {
            outer,
            outer_strides,
            index,
            start,
            inner_stride,
            inner_len: layout.inner_len(),
        }
    }

    /// Buffer offset of the current row's first element.
    #[inline]
    pub fn start(&self) -> usize {
        self.start
    }

    /// Stride between consecutive elements of a row.
    #[inline]
    pub fn inner_stride(&self) -> usize {
        self.inner_stride
    }

    /// Elements per row.
    #[inline]
    pub fn inner_len(&self) -> usize {
        self.inner_len
    }

    /// Moves to the next row (wrapping to the first after the last).
    #[inline]
    pub fn advance(&mut self) {
        for axis in (0..self.outer.len()).rev() {
            self.index[axis] += 1;
            self.start += self.outer_strides[axis];
            if self.index[axis] < self.outer[axis] {
                return;
            }
            self.start -= self.index[axis] * self.outer_strides[axis];
            self.index[axis] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_and_numel() {
        assert_eq!(Shape::scalar().numel(), 1);
        assert_eq!(Shape::from([2, 0, 3]).numel(), 0);
        assert_eq!(Shape::from([2, 3]).strides().as_slice(), &[3, 1]);
        assert_eq!(Shape::from([usize::MAX, 2]).checked_numel(), None);
        assert!(
            Shape::from([usize::MAX, 2])
                .numel_for("f", "shape")
                .is_err()
        );
    }

    #[test]
    fn broadcasting_follows_numpy() {
        let b = |a: &[usize], c: &[usize]| Shape::broadcast("t", &Shape::new(a), &Shape::new(c));
        assert_eq!(b(&[2, 1, 4], &[3, 1]).unwrap(), Shape::from([2, 3, 4]));
        assert_eq!(b(&[], &[5]).unwrap(), Shape::from([5]));
        assert_eq!(b(&[0], &[1]).unwrap(), Shape::from([0]));
        let err = b(&[2, 3], &[4]).unwrap_err();
        assert!(
            err.to_string().contains("broadcastable with [2, 3]"),
            "{err}"
        );
        assert!(Shape::from([3, 1]).broadcasts_to(&Shape::from([2, 3, 5])));
        assert!(!Shape::from([3, 2]).broadcasts_to(&Shape::from([3, 5])));
    }

    #[test]
    fn rows_of_a_transposed_view() {
        // [[0, 1, 2], [3, 4, 5]] viewed as its transpose [3, 2].
        let layout = Layout::from_parts(Shape::from([3, 2]), Dims::from_slice(&[1, 3]), 0);
        assert!(!layout.is_contiguous());
        let mut seen = Vec::new();
        layout.for_each_row(1, 2, |start, stride, len| {
            seen.extend((0..len).map(|i| start + i * stride));
        });
        assert_eq!(seen, [1, 4, 2, 5]);
        assert_eq!(layout.max_offset(), Some(5));
        assert_eq!(layout.row_count(), 3);
        // A reach beyond usize is no panic, and no buffer holds it.
        let far = Layout::from_parts(Shape::from([3, 2]), Dims::from_slice(&[usize::MAX, 1]), 1);
        assert_eq!(far.max_offset(), Some(usize::MAX));
    }

    #[test]
    fn contiguity_ignores_unit_dimensions() {
        let layout = Layout::from_parts(Shape::from([1, 3]), Dims::from_slice(&[7, 1]), 2);
        assert!(layout.is_contiguous());
    }
}
