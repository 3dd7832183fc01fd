//! The [`Cpu`](super::Cpu) device's buffer cache: the host side of
//! [`Device::alloc_output`](crate::Device::alloc_output) and
//! [`Device::recycle`](crate::Device::recycle).
//!
//! A training loop repeats the same ops on the same shapes step after step. Tensors hand
//! their buffers back when their last reference goes, and the next op of the same size
//! takes one of them instead of asking the allocator, so after the first step a loop
//! allocates nothing: no `malloc`, no page faults on fresh memory, no `Arc` headers (the
//! cache keeps the shared buffer whole). This is what PyTorch's caching allocator does for
//! CUDA memory, here for the host.
//!
//! - The cache is per thread (no lock on the hot path): a buffer returns to the cache of
//!   the thread that drops it.
//! - Buffers are matched by exact length. A recycled buffer keeps its old contents, which
//!   is why only outputs that a kernel overwrites entirely come from the cache; results
//!   never depend on it.
//! - Each thread's cache holds at most [`cache_limit`] bytes (1 GiB unless
//!   [`set_cache_limit`] says otherwise; 0 turns caching off); a buffer that does not fit
//!   is freed. [`clear_cache`] frees the calling thread's cached buffers.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{DType, Element};

static LIMIT_BYTES: AtomicUsize = AtomicUsize::new(1 << 30);

/// The most bytes each thread's cache keeps.
pub fn cache_limit() -> usize {
    LIMIT_BYTES.load(Ordering::Relaxed)
}

/// Sets the most bytes each thread's cache keeps (0: no caching). Buffers already cached
/// stay until they are taken or [`clear_cache`] runs.
pub fn set_cache_limit(bytes: usize) {
    LIMIT_BYTES.store(bytes, Ordering::Relaxed);
}

/// Frees every buffer in the calling thread's cache.
pub fn clear_cache() {
    let _ = CACHE.try_with(|cache| *cache.borrow_mut() = Cache::default());
}

/// The bytes the calling thread's cache holds now.
pub fn cached_bytes() -> usize {
    CACHE.try_with(|cache| cache.borrow().bytes).unwrap_or(0)
}

type FreeLists<E> = HashMap<usize, Vec<Arc<Vec<E>>>, BuildHasherDefault<LengthHasher>>;

/// The hash of a buffer length for [`FreeLists`]: one multiplication (Fibonacci hashing)
/// instead of SipHash, whose flooding resistance a map keyed by our own buffer lengths does
/// not need, and which cost a tenth of a small elementwise op.
#[derive(Default)]
struct LengthHasher(u64);

impl Hasher for LengthHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, len: usize) {
        self.0 = (len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Default)]
struct Cache {
    f32: FreeLists<f32>,
    f64: FreeLists<f64>,
    u8: FreeLists<u8>,
    u32: FreeLists<u32>,
    i64: FreeLists<i64>,
    bytes: usize,
}

impl Cache {
    fn lists<E: Element>(&mut self) -> &mut FreeLists<E> {
        let lists: &mut dyn Any = match E::DTYPE {
            DType::F32 => &mut self.f32,
            DType::F64 => &mut self.f64,
            DType::U8 => &mut self.u8,
            DType::U32 => &mut self.u32,
            DType::I64 => &mut self.i64,
        };
        lists
            .downcast_mut()
            .expect("DType::of an Element names its own type")
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::default();
}

fn bytes_of<E: Element>(buffer: &[E]) -> usize {
    std::mem::size_of_val(buffer)
}

/// A cached buffer of exactly `len` elements (unique, old contents), if there is one.
pub(crate) fn take<E: Element>(len: usize) -> Option<Arc<Vec<E>>> {
    CACHE
        .try_with(|cache| {
            let mut cache = cache.borrow_mut();
            let buffer = cache.lists::<E>().get_mut(&len)?.pop()?;
            cache.bytes -= bytes_of(&buffer);
            Some(buffer)
        })
        .ok()
        .flatten()
}

/// Keeps `buffer` for a later [`take`] when it is the last reference and fits the limit.
pub(crate) fn give_back<E: Element>(mut buffer: Arc<Vec<E>>) {
    let Some(vec) = Arc::get_mut(&mut buffer) else {
        return;
    };
    let bytes = bytes_of(vec);
    let _ = CACHE.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.bytes.saturating_add(bytes) <= cache_limit() {
            cache.bytes += bytes;
            let len = buffer.len();
            cache.lists::<E>().entry(len).or_default().push(buffer);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_buffer_is_taken_again_by_length_and_type() {
        clear_cache();
        let buffer = Arc::new(vec![1.5f32; 7]);
        let address = buffer.as_ptr();
        give_back(buffer);
        assert_eq!(cached_bytes(), 28);
        assert!(take::<f32>(6).is_none());
        assert!(take::<f64>(7).is_none());
        let again = take::<f32>(7).unwrap();
        assert_eq!(again.as_ptr(), address);
        assert_eq!(cached_bytes(), 0);
    }

    #[test]
    fn shared_buffers_are_not_cached() {
        clear_cache();
        let buffer = Arc::new(vec![0u8; 3]);
        let other = Arc::clone(&buffer);
        give_back(buffer);
        assert_eq!(cached_bytes(), 0);
        drop(other);
    }
}
