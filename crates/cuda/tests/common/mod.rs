//! What the GPU test files share: the bit comparison with the Cpu, counted per test so
//! that the GPU runner can report how many elements each test compared.

use std::cell::Cell;
use std::ops::Deref;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use rlgrad_core::Float;
use rlgrad_cuda::Cuda;

thread_local! {
    /// Elements compared and elements differing on this test's thread (libtest runs each
    /// test on a thread of its own).
    static BITS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Same bits, or NaN on both sides, element by element; counts every element, then
/// panics naming how many differ and the first one.
pub fn same<T: Float>(what: &str, cpu: &[T], gpu: &[T]) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths");
    let differing: Vec<usize> = (0..cpu.len())
        .filter(|&i| {
            let (a, b) = (cpu[i], gpu[i]);
            a.to_bits_u64() != b.to_bits_u64() && !(a.is_nan() && b.is_nan())
        })
        .collect();
    BITS.with(|bits| {
        let (compared, different) = bits.get();
        bits.set((
            compared + cpu.len() as u64,
            different + differing.len() as u64,
        ));
    });
    if let Some(&i) = differing.first() {
        panic!(
            "{what}: {} of {} elements differ; the first, element {i}: cpu {:e}, gpu {:e}",
            differing.len(),
            cpu.len(),
            cpu[i],
            gpu[i]
        );
    }
}

/// Prints this test's counts ([`rlgrad_cuda::bits_line`]) when dropped, also when the
/// test panics.
#[derive(Debug)]
pub struct BitCount;

impl Drop for BitCount {
    fn drop(&mut self) {
        let (compared, differing) = BITS.with(Cell::get);
        println!("{}", rlgrad_cuda::bits_line(compared, differing));
    }
}

/// Tests share GPU 0 (`Cuda::new` hands out one device per ordinal, with one caching
/// allocator and one stream): they run side by side under a read lock, and the tests that
/// count the allocator's bytes or the device's activity (captured steps) run alone under
/// the write lock.
pub static SHARED_GPU: RwLock<()> = RwLock::new(());

/// GPU 0 for a test, or `None` (after saying the test was skipped, or failing it when
/// `RLGRAD_REQUIRE_GPU=1`).
pub struct Gpu<G> {
    cuda: Cuda,
    _lock: G,
    _count: BitCount,
}

impl<G> Deref for Gpu<G> {
    type Target = Cuda;
    fn deref(&self) -> &Cuda {
        &self.cuda
    }
}

fn open_gpu<G>(lock: G) -> Option<Gpu<G>> {
    match Cuda::new(0) {
        Ok(cuda) => Some(Gpu {
            cuda,
            _lock: lock,
            _count: BitCount,
        }),
        Err(why) => {
            rlgrad_cuda::skip("GPU", &why);
            None
        }
    }
}

pub fn gpu() -> Option<Gpu<RwLockReadGuard<'static, ()>>> {
    open_gpu(SHARED_GPU.read().unwrap_or_else(|e| e.into_inner()))
}

/// GPU 0 with no other test using it.
pub fn exclusive_gpu() -> Option<Gpu<RwLockWriteGuard<'static, ()>>> {
    open_gpu(SHARED_GPU.write().unwrap_or_else(|e| e.into_inner()))
}
