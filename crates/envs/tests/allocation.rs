//! `reset` and `step` allocate nothing once the environments and the wrapper exist: a
//! counting global allocator watches this test's thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rlgrad_envs::{CartPole, CartPoleNoVelocity, Env, Pendulum, VecEnv};

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

fn run<E: Env>(mut envs: VecEnv<E>, actions: &[E::Action]) -> usize {
    allocations_during(|| {
        envs.reset(Some(3)).unwrap();
        for _ in 0..1_200 {
            envs.step(actions).unwrap();
        }
        envs.reset(None).unwrap();
    })
}

#[test]
fn reset_and_step_do_not_allocate() {
    assert_eq!(
        allocations_during(|| drop(vec![0u8; 16])),
        1,
        "the counter counts"
    );
    let cartpoles = VecEnv::from_fn(8, CartPole::new).unwrap();
    let hidden = VecEnv::from_fn(8, CartPoleNoVelocity::new).unwrap();
    let pendulums = VecEnv::from_fn(4, Pendulum::new).unwrap();
    // 1,200 steps: several episode ends and auto-resets in every environment.
    assert_eq!(run(cartpoles, &[0, 1, 1, 0, 1, 0, 0, 1]), 0);
    assert_eq!(run(hidden, &[1; 8]), 0);
    assert_eq!(run(pendulums, &[2.0, -1.0, 0.5, 9.0]), 0);
}
