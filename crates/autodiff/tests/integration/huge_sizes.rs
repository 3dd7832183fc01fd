//! Every public constructor refuses a size the host cannot allocate with an `Err` naming
//! itself, and none aborts: tensors, the `Cpu` device's buffers, `Linear`, `Mlp`, `Gru`,
//! `Lstm`, and the allocating functions of `rlgrad-mask`, over f32 and f64.
//!
//! An abort (a failed `vec!` or `collect`) kills the process that runs it, so each case
//! runs in a child process: this test binary again, with `RLGRAD_HUGE_CASE` naming the
//! case. The child exits with 0 only when the call returned an `Err`, which it prints.
//! Every size here is at least 2^48 bytes, which no allocator hands out, so a child fails
//! at once, before touching memory.

use std::process::Command;

use rlgrad_autodiff::nn::{Activation, Gru, Init, Linear, Lstm, Mlp};
use rlgrad_core::{Cpu, Device, Float, Result, Rng, Shape};
use rlgrad_mask::Sequences;
use rlgrad_tensor::Tensor;

const CASE: &str = "RLGRAD_HUGE_CASE";
/// The test's name as libtest knows it: its module path inside the test crate, then the
/// function (`huge_sizes::huge_sizes_are_errors_never_aborts`).
fn test_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    let name = "huge_sizes_are_errors_never_aborts";
    if module.is_empty() {
        name.to_owned()
    } else {
        format!("{module}::{name}")
    }
}

struct Case {
    name: String,
    /// The function the error must name.
    function: &'static str,
    run: Box<dyn Fn() -> Result<()>>,
}

fn rng() -> Rng {
    Rng::new(0, "huge")
}

/// 2^60 elements; more bytes than `usize` holds; more elements than `usize` holds.
fn shapes() -> [Shape; 4] {
    [
        Shape::from([1 << 30, 1 << 30]),
        Shape::from([1 << 60]),
        Shape::from([usize::MAX]),
        Shape::from([1 << 62, 4]),
    ]
}

/// A constructor call and the function its error must name.
type Constructor = (&'static str, fn() -> Result<()>);
type ShapedConstructor = (&'static str, fn(Shape) -> Result<()>);

fn shaped<T: Float>() -> [ShapedConstructor; 7] {
    [
        ("Tensor::zeros", |s| Tensor::<T>::zeros(s).map(drop)),
        ("Tensor::ones", |s| Tensor::<T>::ones(s).map(drop)),
        ("Tensor::full", |s| {
            Tensor::<T>::full(s, T::from_f64(0.5)).map(drop)
        }),
        ("Tensor::rand_uniform", |s| {
            Tensor::<T>::rand_uniform(s, T::zero(), T::one(), &mut rng()).map(drop)
        }),
        ("Tensor::rand_normal", |s| {
            Tensor::<T>::rand_normal(s, 0.0, 1.0, &mut rng()).map(drop)
        }),
        ("Device::alloc_output", |s| {
            Tensor::<T>::from_kernel(&Cpu::default(), s, |_| Ok(())).map(drop)
        }),
        ("Device::alloc_zeros", |s| {
            Cpu::default().alloc_zeros::<T>(s.numel()).map(drop)
        }),
    ]
}

fn linear<T: Float>(inputs: usize, outputs: usize, init: Init) -> Result<()> {
    Linear::<T>::new("l", inputs, outputs, init, &mut rng()).map(drop)
}

fn mlp<T: Float>(sizes: &[usize]) -> Result<()> {
    let relu = Activation::Relu;
    Mlp::<T>::new("m", sizes, relu, relu, Init::TorchDefault, &mut rng()).map(drop)
}

/// A broadcast view allocates nothing; its dense copy is a kernel output.
fn dense_broadcast<T: Float>(dims: [usize; 2]) -> Result<()> {
    let view = Tensor::<T>::scalar(T::one()).broadcast_to(dims)?;
    view.contiguous().map(drop)
}

fn sized<T: Float>() -> [Constructor; 17] {
    use Init::{GlorotUniform, TorchDefault};
    [
        ("Tensor::arange", || {
            Tensor::<T>::arange(0.0, 2f64.powi(60), 1.0).map(drop)
        }),
        ("Tensor::linspace", || {
            Tensor::<T>::linspace(0.0, 1.0, 1 << 60).map(drop)
        }),
        ("Tensor::linspace", || {
            Tensor::<T>::linspace(0.0, 1.0, usize::MAX).map(drop)
        }),
        ("Device::alloc_output", || {
            dense_broadcast::<T>([1 << 30, 1 << 30])
        }),
        ("Tensor::broadcast_to", || {
            dense_broadcast::<T>([1 << 62, 4])
        }),
        ("Linear::new", || linear::<T>(1 << 40, 64, TorchDefault)),
        ("Linear::new", || linear::<T>(1 << 40, 64, GlorotUniform)),
        // inputs * outputs overflows usize.
        ("Linear::new", || linear::<T>(usize::MAX, 2, TorchDefault)),
        // inputs + outputs overflows usize (Glorot's limit adds them).
        ("Linear::new", || linear::<T>(usize::MAX, 1, GlorotUniform)),
        ("Mlp::new", || mlp::<T>(&[4, 1 << 60, 4])),
        // The third layer's size overflows usize.
        ("Mlp::new", || mlp::<T>(&[4, 4, 1 << 62, 1 << 62])),
        ("Gru::new", || {
            Gru::<T>::new("g", 4, 1 << 60, &mut rng()).map(drop)
        }),
        ("Lstm::new", || {
            Lstm::<T>::new("l", 1 << 40, 1 << 20, &mut rng()).map(drop)
        }),
        // gates * hidden overflows usize.
        ("Lstm::new", || {
            Lstm::<T>::new("l", 4, 1 << 62, &mut rng()).map(drop)
        }),
        ("Gru::new", || {
            Gru::<T>::new("g", 4, usize::MAX, &mut rng()).map(drop)
        }),
        ("pad", || {
            let seqs = Sequences::new(&[1], Some(1 << 60))?;
            rlgrad_mask::pad(&seqs, &[T::one()], 1).map(drop)
        }),
        ("masked_sum_backward", || {
            let seqs = Sequences::new(&[1], Some(1 << 60))?;
            rlgrad_mask::masked_sum_backward(&seqs, 1, T::one()).map(drop)
        }),
    ]
}

fn cases_of<T: Float>(dtype: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for shape in shapes() {
        for (i, (function, run)) in shaped::<T>().into_iter().enumerate() {
            let shape = shape.clone();
            cases.push(Case {
                name: format!("{dtype} {function} #{i} {shape}"),
                function,
                run: Box::new(move || run(shape.clone())),
            });
        }
    }
    for (i, (function, run)) in sized::<T>().into_iter().enumerate() {
        cases.push(Case {
            name: format!("{dtype} {function} #{i}"),
            function,
            run: Box::new(run),
        });
    }
    cases
}

fn cases() -> Vec<Case> {
    let mut cases = cases_of::<f32>("f32");
    cases.extend(cases_of::<f64>("f64"));
    cases
}

/// The child's side: runs one case and exits, 0 only for an `Err`.
fn run_child(name: &str) -> ! {
    let Some(case) = cases().into_iter().find(|c| c.name == name) else {
        eprintln!("no case named {name:?}");
        std::process::exit(2);
    };
    // On a line of its own: libtest has printed the test's name without a newline.
    match (case.run)() {
        Err(e) => {
            println!("\nrefused: {e}");
            std::process::exit(0)
        }
        Ok(()) => {
            println!("\nallocated");
            std::process::exit(1)
        }
    }
}

#[test]
fn huge_sizes_are_errors_never_aborts() {
    if let Ok(name) = std::env::var(CASE) {
        run_child(&name);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut failures = Vec::new();
    let all = cases();
    let test = test_name();
    for case in &all {
        let out = Command::new(&exe)
            .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env(CASE, &case.name)
            .output()
            .expect("the test binary runs again");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let named = stdout.contains(&format!("\nrefused: {}: ", case.function));
        if !out.status.success() || !named {
            // The child's last words: its result, or the panic or allocation failure.
            let stderr = String::from_utf8_lossy(&out.stderr);
            let said = stdout.lines().chain(stderr.lines()).filter(|l| {
                ["refused", "allocated", "panicked", "memory allocation"]
                    .iter()
                    .any(|w| l.contains(w))
            });
            failures.push(format!(
                "{}: {} (expected an Err naming {}): {:?}",
                case.name,
                out.status,
                case.function,
                said.collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}
