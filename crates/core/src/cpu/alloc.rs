//! Host buffers whose size comes from the caller: every such allocation of rlgrad goes
//! through this module, so that a size the host cannot provide is an [`Error`] naming the
//! function, the argument and the size, never a `capacity overflow` panic or an abort
//! (which is what `vec![value; len]`, `Vec::with_capacity(len)` and `collect()` do).
//!
//! The family, one function for each way a buffer gets its first values:
//! - zeros: [`try_zeroed`];
//! - copies of one value: [`try_filled`];
//! - a value computed from each index, in index order: [`try_from_fn`];
//! - a copy of a slice: [`try_copy`];
//! - no values yet, room for the caller to push or write into: [`try_with_capacity`].
//!
//! Each checks the byte size first (a size that overflows `usize` or `isize::MAX` is an
//! error) and then asks the allocator without aborting (`try_reserve_exact`, or
//! `alloc_zeroed` with its null pointer checked), so a size no host has fails before any
//! memory is touched.
//!
//! Zeroed buffers ([`try_zeroed`]) come from `alloc_zeroed`: a large one is fresh pages of
//! the OS, which are zero without being written. The first write to each 4 KiB page
//! costs a page fault; on virtual machines that can take longer than writing the data. On
//! Linux, buffers of 4 MiB and more are marked for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`, what NumPy does for its arrays), so that the first touch
//! faults once per 2 MiB. This only changes how the memory is mapped, never its contents.
//!
//! ```
//! use rlgrad_core::cpu::alloc;
//! let zeros = alloc::try_zeroed::<f32>(4, "example", "len")?;
//! assert_eq!(zeros, [0.0; 4]);
//! assert_eq!(alloc::try_from_fn(3, |i| i * i, "example", "len")?, [0, 1, 4]);
//! let err = alloc::try_zeroed::<f64>(usize::MAX / 2, "example", "len").unwrap_err();
//! assert!(err.to_string().contains("9223372036854775807 elements of f64"), "{err}");
//! let err = alloc::try_filled(1 << 60, 1.0f32, "example", "len").unwrap_err();
//! assert!(err.to_string().contains("1152921504606846976 elements of f32"), "{err}");
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

use std::alloc::Layout;

use crate::{Element, Error, Result};

/// Buffers from this size on get the huge-page hint.
const HUGE_PAGE_HINT_BYTES: usize = 4 << 20;

/// The error for a buffer of `len` elements of `what` (`size` bytes each) that the host
/// cannot allocate.
fn cannot_allocate(
    function: &'static str,
    argument: &'static str,
    len: usize,
    what: &str,
    size: usize,
) -> Error {
    let bytes = match len.checked_mul(size) {
        Some(bytes) => format!("{bytes} bytes"),
        None => "more bytes than usize holds".to_owned(),
    };
    Error::Device {
        function,
        device: "cpu".to_owned(),
        message: format!(
            "cannot allocate {len} elements of {what} ({bytes}) for argument `{argument}`"
        ),
        cause: None,
    }
}

/// A vector of `len` zeros, or an error naming `function`, `argument` and the size when
/// the host cannot allocate it.
pub fn try_zeroed<E: Element>(
    len: usize,
    function: &'static str,
    argument: &'static str,
) -> Result<Vec<E>> {
    let size = E::DTYPE.size_in_bytes();
    let error = || cannot_allocate(function, argument, len, E::DTYPE.name(), size);
    let layout = Layout::array::<E>(len).map_err(|_| error())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `layout` has a nonzero size (checked above).
    let pointer = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<E>();
    if pointer.is_null() {
        return Err(error());
    }
    // SAFETY: `pointer` comes from the global allocator with the layout of `[E; len]`,
    // which is what a `Vec<E>` of capacity `len` owns; every byte is zero, and the zero bit
    // pattern is a valid `E` (the sealed `Element` types are plain integers and floats,
    // whose all-zero value is `E::default()`), so all `len` elements are initialized.
    let buffer = unsafe { Vec::from_raw_parts(pointer, len, len) };
    if layout.size() >= HUGE_PAGE_HINT_BYTES {
        advise_huge_pages(&buffer);
    }
    Ok(buffer)
}

/// An empty vector with room for `len` elements of any type, or an error naming
/// `function`, `argument` and the size when the host cannot allocate it.
pub fn try_with_capacity<T>(
    len: usize,
    function: &'static str,
    argument: &'static str,
) -> Result<Vec<T>> {
    let mut buffer = Vec::new();
    buffer.try_reserve_exact(len).map_err(|_| {
        cannot_allocate(
            function,
            argument,
            len,
            std::any::type_name::<T>(),
            std::mem::size_of::<T>(),
        )
    })?;
    Ok(buffer)
}

/// A vector of `len` copies of `value`, or an error naming `function`, `argument` and the
/// size when the host cannot allocate it.
pub fn try_filled<T: Clone>(
    len: usize,
    value: T,
    function: &'static str,
    argument: &'static str,
) -> Result<Vec<T>> {
    let mut buffer = try_with_capacity(len, function, argument)?;
    buffer.resize(len, value);
    Ok(buffer)
}

/// The vector `[f(0), f(1), ..., f(len - 1)]`, or an error naming `function`, `argument`
/// and the size when the host cannot allocate it (then `f` is never called). `f` runs in
/// index order, so a stateful one (drawing from an [`Rng`](crate::Rng)) gives what a loop
/// gives.
pub fn try_from_fn<T>(
    len: usize,
    f: impl FnMut(usize) -> T,
    function: &'static str,
    argument: &'static str,
) -> Result<Vec<T>> {
    let mut buffer = try_with_capacity(len, function, argument)?;
    buffer.extend((0..len).map(f));
    Ok(buffer)
}

/// A copy of `values`, or an error naming `function` and `argument` when the host cannot
/// allocate it.
pub fn try_copy<T: Clone>(
    values: &[T],
    function: &'static str,
    argument: &'static str,
) -> Result<Vec<T>> {
    let mut buffer = try_with_capacity(values.len(), function, argument)?;
    buffer.extend_from_slice(values);
    Ok(buffer)
}

#[cfg(target_os = "linux")]
fn advise_huge_pages<E>(buffer: &[E]) {
    const HUGE_PAGE: usize = 2 << 20;
    let start = buffer.as_ptr() as usize;
    let end = start + std::mem::size_of_val(buffer);
    let aligned = start.next_multiple_of(HUGE_PAGE);
    if aligned < end {
        // SAFETY: the range [aligned, end) lies inside `buffer`'s allocation, which stays
        // alive for the whole call; MADV_HUGEPAGE only changes how the kernel backs those
        // pages, never their contents, so no Rust-visible state changes. A failure (no
        // transparent huge pages) is harmless and ignored.
        unsafe {
            libc::madvise(
                aligned as *mut libc::c_void,
                end - aligned,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages<E>(_buffer: &[E]) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_and_small_buffers_are_zero() {
        let large = try_zeroed::<f32>(3 << 20, "t", "len").unwrap();
        assert!(large.len() == 3 << 20 && large.iter().all(|&v| v.to_bits() == 0));
        assert_eq!(try_zeroed::<u8>(5, "t", "len").unwrap(), [0; 5]);
        assert!(try_zeroed::<i64>(0, "t", "len").unwrap().is_empty());
    }

    #[test]
    fn sizes_the_host_cannot_provide_are_errors_naming_the_size() {
        for len in [usize::MAX, usize::MAX / 2, 1 << 60, 1 << 50] {
            let err = try_zeroed::<f32>(len, "pad", "max_len").unwrap_err();
            assert_eq!(err.function(), "pad");
            let message = err.to_string();
            assert!(
                message.contains(&format!("{len} elements of f32")),
                "{message}"
            );
            assert!(message.contains("`max_len`"), "{message}");
            assert!(try_with_capacity::<bool>(len, "t", "len").is_err());
            assert!(try_filled(len, 1.5f64, "t", "len").is_err());
            let err = try_from_fn(len, |_| -> u32 { unreachable!() }, "t", "len").unwrap_err();
            assert!(
                err.to_string().contains(&format!("{len} elements of u32")),
                "{err}"
            );
        }
        let err = try_with_capacity::<u64>(usize::MAX, "t", "len").unwrap_err();
        assert!(
            err.to_string().contains("more bytes than usize holds"),
            "{err}"
        );
    }

    #[test]
    fn copies_fills_and_index_maps_hold_their_values() {
        assert_eq!(try_copy(&[1u32, 2, 3], "t", "x").unwrap(), [1, 2, 3]);
        assert_eq!(try_filled(3, 7u8, "t", "x").unwrap(), [7, 7, 7]);
        // A stateful `f` is called in index order: running sums.
        let mut total = 0;
        let sums = try_from_fn(
            4,
            |i| {
                total += i;
                total
            },
            "t",
            "x",
        );
        assert_eq!(sums.unwrap(), [0, 1, 3, 6]);
        assert!(try_from_fn(0, |i| i, "t", "x").unwrap().is_empty());
    }
}
