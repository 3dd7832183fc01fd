//! Strided views as kernel parameters.

use cudarc::driver::{DeviceRepr, LaunchArgs, PushKernelArg};
use rlgrad_core::{Error, Layout, Result};

use crate::device::KernelArg;

/// The most dimensions a view may keep after merging (`MAX_DIMS` in common.cuh).
pub(crate) const MAX_DIMS: usize = 8;

/// A strided view as the kernels read it (`struct Strided` in common.cuh).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Strided {
    ndim: u32,
    pad: u32,
    offset: u64,
    dims: [u64; MAX_DIMS],
    strides: [u64; MAX_DIMS],
}

impl Strided {
    /// `ndim offset dims... strides...`, as the host emulation of the kernels reads it.
    #[cfg(test)]
    pub(crate) fn words(&self) -> String {
        let n = self.ndim as usize;
        let mut words = vec![self.ndim as u64, self.offset];
        words.extend_from_slice(&self.dims[..n]);
        words.extend_from_slice(&self.strides[..n]);
        words
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

// SAFETY: `Strided` is `repr(C)` plain data laid out exactly as `struct Strided` in
// common.cuh (two u32, then u64 fields), passed by value.
unsafe impl DeviceRepr for Strided {}

impl KernelArg for Strided {
    fn push<'a>(&'a self, builder: &mut LaunchArgs<'a>) {
        builder.arg(self);
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: no padding (see the `DeviceRepr` implementation above).
        unsafe { crate::device::value_bytes(self) }
    }
}

/// The kernel views of `N` layouts of one shape, with dimensions of size 1 dropped and
/// neighbours merged where every layout allows it (so a dense view is one dimension of
/// stride 1). An error when more than [`MAX_DIMS`] dimensions remain.
pub(crate) fn strided<const N: usize>(
    function: &'static str,
    layouts: [&Layout; N],
) -> Result<[Strided; N]> {
    let dims = layouts[0].shape().dims();
    let mut kept: Vec<(usize, [usize; N])> = Vec::with_capacity(dims.len());
    for (d, &size) in dims.iter().enumerate() {
        if size == 1 {
            continue;
        }
        let strides: [usize; N] = std::array::from_fn(|j| layouts[j].strides()[d]);
        match kept.last_mut() {
            Some((outer, outer_strides))
                if (0..N).all(|j| outer_strides[j] == strides[j] * size) =>
            {
                *outer *= size;
                *outer_strides = strides;
            }
            _ => kept.push((size, strides)),
        }
    }
    if kept.len() > MAX_DIMS {
        return Err(Error::shape(
            function,
            "layout",
            format_args!("a view of at most {MAX_DIMS} dimensions once dense ones are merged"),
            format_args!("{} dimensions ({})", kept.len(), layouts[0].shape()),
        ));
    }
    Ok(std::array::from_fn(|j| {
        let mut view = Strided {
            ndim: kept.len() as u32,
            pad: 0,
            offset: layouts[j].offset() as u64,
            dims: [0; MAX_DIMS],
            strides: [0; MAX_DIMS],
        };
        for (d, (size, strides)) in kept.iter().enumerate() {
            view.dims[d] = *size as u64;
            view.strides[d] = strides[j] as u64;
        }
        view
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlgrad_core::{Dims, Shape};

    #[test]
    fn dense_views_merge_into_one_dimension() {
        let dense = Layout::contiguous(Shape::from([2, 3, 4]));
        let [view] = strided("t", [&dense]).unwrap();
        assert_eq!((view.ndim, view.dims[0], view.strides[0]), (1, 24, 1));
        let transposed = Layout::from_parts(Shape::from([3, 2]), Dims::from_slice(&[1, 3]), 5);
        let [a, b] = strided("t", [&transposed, &Layout::contiguous(Shape::from([3, 2]))]).unwrap();
        assert_eq!(
            (a.ndim, a.offset, a.strides[..2].to_vec()),
            (2, 5, vec![1, 3])
        );
        assert_eq!(b.strides[..2].to_vec(), vec![2, 1]);
        let scalar = Layout::contiguous(Shape::scalar());
        assert_eq!(strided("t", [&scalar]).unwrap()[0].ndim, 0);
        let deep = Layout::from_parts(Shape::from(vec![2; 9]), Dims::from_slice(&[1; 9]), 0);
        assert!(strided("t", [&deep]).is_err());
    }
}
