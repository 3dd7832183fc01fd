//! Zeroed host buffers that are cheap to fill for the first time.
//!
//! A large zeroed `Vec` comes from fresh pages of the OS, and the first write to each
//! 4 KiB page costs a page fault; on virtual machines that can take longer than writing
//! the data. On Linux, buffers of 4 MiB and more are marked for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`, what NumPy does for its arrays), so that the first touch
//! faults once per 2 MiB. This only changes how the memory is mapped, never its contents.

use crate::Element;

/// Buffers from this size on get the huge-page hint.
const HUGE_PAGE_HINT_BYTES: usize = 4 << 20;

/// A vector of `len` zeros.
pub fn zeroed<E: Element>(len: usize) -> Vec<E> {
    let buffer = vec![E::default(); len];
    if len * E::DTYPE.size_in_bytes() >= HUGE_PAGE_HINT_BYTES {
        advise_huge_pages(&buffer);
    }
    buffer
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
    #[test]
    fn large_and_small_buffers_are_zero() {
        assert!(super::zeroed::<f32>(3 << 20).iter().all(|&v| v == 0.0));
        assert_eq!(super::zeroed::<u8>(5), [0; 5]);
    }
}
