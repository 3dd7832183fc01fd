//! A steady training loop allocates nothing once warmed up: the seed MLP trained with
//! Adam, counted by a global allocator that tallies every allocation of this process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp};
use rlgrad_autodiff::{ApplyGradients, Tape};
use rlgrad_core::{Cpu, Par, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

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
    let cpu = Cpu::new(Par::Seq);
    let mut rng = Rng::new(3, "allocations");
    let mut model = Mlp::<f32>::new_on(
        &cpu,
        "model",
        &[8, 64, 64, 1],
        Activation::Relu,
        Activation::Identity,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let mut adam = Optimizer::new_on(cpu, Adam::torch(), 5e-4).unwrap();
    let x = Tensor::rand_normal_on(&cpu, [100, 8], 0.0, 1.0, &mut rng).unwrap();
    let advantages = Tensor::rand_normal_on(&cpu, [100, 1], 0.0, 1.0, &mut rng).unwrap();
    let mut tape = Tape::new_on(&cpu);
    let mut step = |tape: &mut Tape<f32>| {
        tape.reset();
        let out = model.forward(tape, &tape.constant(&x)).unwrap();
        let loss = out
            .mul(&tape.constant(&advantages))
            .unwrap()
            .mean_all()
            .unwrap();
        let grads = tape.gradient(&loss, &[&model]).unwrap();
        adam.apply_gradients(&mut model, &grads).unwrap();
    };
    for _ in 0..5 {
        step(&mut tape);
    }
    let (count, bytes) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    for _ in 0..20 {
        step(&mut tape);
    }
    let count = ALLOCATIONS.load(Ordering::Relaxed) - count;
    let bytes = BYTES.load(Ordering::Relaxed) - bytes;
    assert_eq!(
        (count, bytes),
        (0, 0),
        "20 warmed-up steps allocated {count} times, {bytes} bytes"
    );
}
