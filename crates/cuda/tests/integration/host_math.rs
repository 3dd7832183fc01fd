//! The CUDA ports of `libm`'s `expf`, `logf`, `tanhf`, `powf`, `exp`, `log`, `tanh`,
//! `pow`, and `sin` and `cos` below 2^20 pi / 2 (`src/cuda/math.cuh`) compiled for the host with the system C++ compiler (FMA
//! contraction off, as NVRTC compiles them) and compared with the `libm` crate bit for bit
//! on about two million inputs: ranges, special values and random bit patterns.
//!
//! This checks the port itself on any machine with a C++ compiler; that the GPU evaluates
//! the same IEEE operations is what the GPU tests (`tests/integration/kernels.rs`) check. Without a
//! compiler (`$CXX` or `c++`), the test prints that it was skipped.

use std::io::Write;
use std::process::{Command, Stdio};

use rlgrad_core::Rng;

/// One input line and the `libm` result's bits.
struct Case {
    line: String,
    want: u64,
    is_nan: bool,
}

fn f32_case(name: &str, x: f32, f: fn(f32) -> f32) -> Case {
    let y = f(x);
    Case {
        line: format!("{name} {:x}", x.to_bits()),
        want: u64::from(y.to_bits()),
        is_nan: y.is_nan(),
    }
}

fn f64_case(name: &str, x: f64, f: fn(f64) -> f64) -> Case {
    let y = f(x);
    Case {
        line: format!("{name} {:x}", x.to_bits()),
        want: y.to_bits(),
        is_nan: y.is_nan(),
    }
}

/// Arguments that cover every branch: a stride through all bit patterns, ranges around
/// the functions' thresholds, and specials.
fn f32_inputs(rng: &mut Rng) -> Vec<f32> {
    let mut xs: Vec<f32> = (0..=u32::MAX).step_by(5227).map(f32::from_bits).collect();
    xs.extend((0..150_000).map(|_| (rng.uniform_f64() * 240.0 - 120.0) as f32));
    xs.extend((0..50_000).map(|_| (rng.uniform_f64() * 2.0 - 1.0) as f32));
    xs.extend([
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        1e-40,
        88.72283,
        88.72284,
        -103.97208,
        -87.33655,
    ]);
    xs
}

fn f64_inputs(rng: &mut Rng) -> Vec<f64> {
    let mut xs: Vec<f64> = (0..200_000)
        .map(|_| f64::from_bits(rng.next_u64()))
        .collect();
    xs.extend((0..150_000).map(|_| rng.uniform_f64() * 1600.0 - 800.0));
    xs.extend((0..100_000).map(|_| rng.uniform_f64() * 60.0 - 30.0));
    xs.extend((0..50_000).map(|_| rng.uniform_f64() * 2.0 - 1.0));
    xs.extend([
        0.0,
        -0.0,
        1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
        5e-324,
        709.782712893384,
        -745.1332191019411,
    ]);
    xs
}

/// Bases and exponents for pow: random magnitudes of both signs against small exponents,
/// integers (odd and even, for negative bases) and halves, and fully random pairs.
fn pow_pairs(rng: &mut Rng) -> Vec<(f64, f64)> {
    let mut pairs = Vec::new();
    for _ in 0..150_000 {
        let base =
            (rng.uniform_f64() * 40.0 - 20.0).exp() * if rng.below(4) == 0 { -1.0 } else { 1.0 };
        let exponent = match rng.below(3) {
            0 => rng.uniform_f64() * 20.0 - 10.0,
            1 => rng.below(41) as f64 - 20.0,
            _ => (rng.below(41) as f64 - 20.0) / 2.0,
        };
        pairs.push((base, exponent));
    }
    for _ in 0..50_000 {
        pairs.push((
            f64::from_bits(rng.next_u64()),
            f64::from_bits(rng.next_u64()),
        ));
    }
    for x in [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        0.5,
        2.0,
    ] {
        for y in [
            0.0,
            1.0,
            -1.0,
            2.0,
            0.5,
            3.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ] {
            pairs.push((x, y));
        }
    }
    pairs
}

fn cases() -> Vec<Case> {
    let mut rng = Rng::new(11, "cuda-host-math");
    let mut cases = Vec::new();
    for x in f32_inputs(&mut rng) {
        cases.push(f32_case("expf", x, libm::expf));
        cases.push(f32_case("logf", x, libm::logf));
        cases.push(f32_case("tanhf", x, libm::tanhf));
    }
    for x in f64_inputs(&mut rng) {
        cases.push(f64_case("exp", x, libm::exp));
        cases.push(f64_case("log", x, libm::log));
        cases.push(f64_case("tanh", x, libm::tanh));
    }
    // sin and cos where they are ported: below 2^20 pi / 2 in magnitude (every branch of
    // the reduction: near multiples of pi / 2, the small cases up to 9 pi / 4, the medium
    // one), the Box-Muller angles 2 pi u, and the specials; beyond, NaN (not libm).
    let limit = f64::from_bits(0x4139_21fb_0000_0000);
    let mut angles: Vec<f64> = f64_inputs(&mut rng)
        .into_iter()
        .filter(|x| x.abs() < limit || !x.is_finite())
        .collect();
    angles.extend((0..100_000).map(|_| (rng.uniform_f64() * 2.0 - 1.0) * limit));
    angles.extend((0..100_000).map(|_| 2.0 * std::f64::consts::PI * rng.uniform_f64()));
    for k in 1..=2000 {
        let near = k as f64 * std::f64::consts::FRAC_PI_2;
        for ulps in [-2i64, -1, 0, 1, 2] {
            let x = f64::from_bits((near.to_bits() as i64 + ulps) as u64);
            angles.extend([x, -x]);
        }
    }
    angles.extend([1e-300, -1e-300, 1e-9, std::f64::consts::FRAC_PI_4, f64::NAN]);
    // Near 5, 6 and 7 pi / 2: the reduction's third round (found by a search over every
    // multiple below 2^20 pi / 2).
    for bits in [
        0x401f_6a7a_2955_385e_u64,
        0x4022_d97c_7f33_21d2,
        0x4025_fdbb_e9bb_a775,
    ] {
        for ulps in [-1i64, 0, 1] {
            let x = f64::from_bits((bits as i64 + ulps) as u64);
            angles.extend([x, -x]);
        }
    }
    for x in angles {
        cases.push(f64_case("sin", x, libm::sin));
        cases.push(f64_case("cos", x, libm::cos));
    }
    for x in [limit, 1e7, -1e300] {
        cases.push(Case {
            line: format!("sin {:x}", x.to_bits()),
            want: f64::NAN.to_bits(),
            is_nan: true,
        });
    }
    for (x, y) in pow_pairs(&mut rng) {
        let (xf, yf) = (x as f32, y as f32);
        let zf = libm::powf(xf, yf);
        cases.push(Case {
            line: format!("powf {:x} {:x}", xf.to_bits(), yf.to_bits()),
            want: u64::from(zf.to_bits()),
            is_nan: zf.is_nan(),
        });
        let z = libm::pow(x, y);
        cases.push(Case {
            line: format!("pow {:x} {:x}", x.to_bits(), y.to_bits()),
            want: z.to_bits(),
            is_nan: z.is_nan(),
        });
    }
    cases
}

#[test]
fn the_cuda_math_port_gives_libm_bits_on_the_host() {
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let binary = dir.path().join("host_math");
    // Embedded, not opened by a path of the build machine: the test binary is carried to
    // and run on other machines.
    let source = dir.path().join("host_math.cpp");
    std::fs::write(&source, include_str!("../host_math.cpp")).expect("a temporary file");
    let header = dir.path().join("math.cuh");
    std::fs::write(&header, include_str!("../../src/cuda/math.cuh")).expect("a temporary file");
    let built = Command::new(&compiler)
        .args(["-O2", "-ffp-contract=off", "-fno-fast-math", "-o"])
        .arg(&binary)
        .arg(&source)
        .status();
    match built {
        Err(error) => {
            println!(
                "SKIPPED: no C++ compiler `{compiler}` to build the host math check ({error})"
            );
            return;
        }
        Ok(status) => assert!(
            status.success(),
            "`{compiler}` failed on {}",
            source.display()
        ),
    }
    let cases = cases();
    let mut child = Command::new(&binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the host math binary runs");
    let mut input = String::with_capacity(cases.len() * 24);
    for case in &cases {
        input.push_str(&case.line);
        input.push('\n');
    }
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child
        .wait_with_output()
        .expect("the host math binary finishes");
    writer
        .join()
        .expect("the writer thread")
        .expect("writing the inputs");
    assert!(
        output.status.success(),
        "host math binary: {}",
        output.status
    );
    let stdout = String::from_utf8(output.stdout).expect("hex output");
    let got: Vec<&str> = stdout.lines().collect();
    assert_eq!(got.len(), cases.len(), "one result per input");
    let mut mismatches = Vec::new();
    for (case, line) in cases.iter().zip(&got) {
        let bits = u64::from_str_radix(line, 16).expect("hex bits");
        let port_is_nan = if case.line.starts_with("expf")
            || case.line.starts_with("logf")
            || case.line.starts_with("tanhf")
            || case.line.starts_with("powf")
        {
            f32::from_bits(bits as u32).is_nan()
        } else {
            f64::from_bits(bits).is_nan()
        };
        let same = bits == case.want || (case.is_nan && port_is_nan);
        if !same {
            mismatches.push(format!("{} -> {line}, libm {:x}", case.line, case.want));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} differ, first: {:?}",
        mismatches.len(),
        cases.len(),
        &mismatches[..mismatches.len().min(10)]
    );
    println!(
        "host math: {} inputs, every result libm's bits",
        cases.len()
    );
}
