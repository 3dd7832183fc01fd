//! What the GPU test files share: the bit comparison with the Cpu, counted per test so
//! that the GPU runner can report how many elements each test compared.

use std::cell::Cell;

use rlgrad_core::Float;

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
