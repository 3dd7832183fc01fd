//! A steady training loop allocates nothing once warmed up: the seed MLP trained with
//! Adam, counted by a global allocator that tallies every allocation of this process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rlgrad_core::Par;

mod common;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to the system allocator unchanged; the counters are only
// side effects.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_warmed_up_training_step_allocates_nothing() {
    let mut training = common::Training::new(Par::Seq, &[8, 64, 64, 1], 100);
    for _ in 0..5 {
        training.step();
    }
    let before = training.parameter_bits();
    let (count, bytes) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    for _ in 0..20 {
        training.step();
    }
    let count = ALLOCATIONS.load(Ordering::Relaxed) - count;
    let bytes = BYTES.load(Ordering::Relaxed) - bytes;
    assert_eq!(
        (count, bytes),
        (0, 0),
        "20 warmed-up steps allocated {count} times, {bytes} bytes"
    );
    assert_ne!(
        training.parameter_bits(),
        before,
        "the steps trained nothing"
    );
}
