//! rlgrad-gpu-bench: rlgrad's CUDA kernels and the same workloads in PyTorch and JAX, on
//! one GPU, in one sitting. Each workload first checks that its output has the Cpu's bits
//! (the `bits` column; any difference makes the bench exit 1), then times. Prints a table
//! (milliseconds, GB/s, share of the device-to-device copy bandwidth, ratio to the best
//! peer) and writes JSON (`--out FILE`, default `gpu-bench.json`).
//!
//! Beside the kernels, whole training steps ([`rlgrad_benches::training`]): W7's TD3
//! iteration and a PPO minibatch update, each run on the Cpu and on the GPU from the same
//! start for a few steps (every parameter compared bit for bit), then timed; their peers
//! are `gpu_train.py` (a copy of `../shared/peers/gpu_train.py`): PyTorch eager, PyTorch
//! with the step captured in CUDA graphs, and JAX with one `jit` per step. Each training
//! row also says what a step asks of the GPU ([`rlgrad_cuda::Activity`]): kernel launches,
//! uploads, and downloads, each a wait that keeps the host from queueing ahead.
//!
//! The baselines are what a GPU user runs: `torch.sum`, PyTorch's Adam with
//! `fused=True`, GAE as a PyTorch loop and as JAX `lax.scan` under `jit`, pad and unpad
//! as `index_copy_`/`index_select` (PyTorch) and gathers (JAX) with precomputed indices,
//! FP32 GEMMs as `torch.matmul` with TF32 off (cuBLAS), and the device-to-device copy as
//! the bandwidth bound. GEMM rows also give TFLOP/s.
//!
//! Standalone: the peers' sides are scripts embedded in this binary, run with `python3`
//! (a column is left out, with a note, when torch or jax is missing). `--quick` runs small sizes. Without a GPU
//! it says so and exits 0 (1 with `RLGRAD_REQUIRE_GPU=1`). Never a test: timings need a quiet machine.

use std::io::Write;
use std::process::Command;
use std::time::Instant;

use rlgrad_benches::training::{PpoUpdate, Td3};
use rlgrad_core::Step;
use rlgrad_core::kernels::optim::{AdamTorch, Update};
use rlgrad_core::kernels::recurrence::{Episodes, TimeMajor};
use rlgrad_core::kernels::sequence::{PadOrder, Sequences};
use rlgrad_core::kernels::{
    MatmulKernel, OptimKernel, RecurrenceKernel, ReduceKernel, ReduceOp, SequenceKernel,
};
use rlgrad_core::{Cpu, Device, Layout, Par, Result, Rng, Shape, View};
use rlgrad_cuda::{Activity, Cuda};
use rlgrad_tensor::Tensor;

const TORCH_SCRIPT: &str = include_str!("gpu_bench_torch.py");
const JAX_SCRIPT: &str = include_str!("gpu_bench_jax.py");
const TRAIN_SCRIPT: &str = include_str!("gpu_train.py");

/// One workload: its name (as the peer scripts name it), bytes moved (0 for training
/// steps), floating-point operations (GEMMs; 0 elsewhere), milliseconds, and whether its
/// output had the Cpu's bits.
struct Row {
    name: String,
    bytes: f64,
    flops: f64,
    ms: f64,
    bits: String,
    /// A training step's launches, uploads and downloads (the timed steps' average).
    per_step: Option<PerStep>,
}

/// [`Activity`] per step, averaged over the timed steps.
#[derive(Clone, Copy)]
struct PerStep {
    launches: f64,
    graph_launches: f64,
    uploads: f64,
    downloads: f64,
}

/// Milliseconds per step of `step`, as [`time`] measures them, and what each step asked of
/// the GPU.
fn time_step(
    gpu: &Cuda,
    repeats: usize,
    step: impl FnMut() -> Result<()>,
) -> Result<(f64, PerStep)> {
    let before = gpu.activity();
    let ms = time(gpu, repeats, step)?;
    let Activity {
        launches,
        graph_launches,
        uploads,
        downloads,
    } = gpu.activity().since(before);
    // `time` runs one warm-up step before the timed ones.
    let steps = (repeats + 1) as f64;
    let per_step = PerStep {
        launches: launches as f64 / steps,
        graph_launches: graph_launches as f64 / steps,
        uploads: uploads as f64 / steps,
        downloads: downloads as f64 / steps,
    };
    Ok((ms, per_step))
}

/// Milliseconds per call of `run`, after a warm-up call, over `repeats` queued calls.
fn time(gpu: &Cuda, repeats: usize, mut run: impl FnMut() -> Result<()>) -> Result<f64> {
    run()?;
    gpu.synchronize()?;
    let start = Instant::now();
    for _ in 0..repeats {
        run()?;
    }
    gpu.synchronize()?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / repeats as f64)
}

fn random(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.normal(0.0, 1.0)).collect()
}

/// `same` when the GPU's output has the Cpu's bits (NaN payloads aside), else how many
/// elements differ: checked before a workload is timed.
fn bits(cpu: &[f32], gpu: &[f32]) -> String {
    if cpu.len() != gpu.len() {
        return format!("DIFFER: {} elements, the Cpu has {}", gpu.len(), cpu.len());
    }
    let differing = cpu
        .iter()
        .zip(gpu)
        .filter(|(a, b)| a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()))
        .count();
    if differing == 0 {
        "same".to_owned()
    } else {
        format!("DIFFER: {differing} of {}", cpu.len())
    }
}

fn rlgrad_rows(gpu: &Cuda, quick: bool) -> Result<Vec<Row>> {
    let cpu = Cpu::seq();
    let mut rng = Rng::new(0, "gpu-bench");
    let mut rows = Vec::new();
    let big = 1usize << if quick { 22 } else { 28 };
    let host = random(&mut rng, big);
    let x = gpu.upload(&host)?;
    let mut y = gpu.alloc_zeros::<f32>(big)?;
    gpu.copy_buffer(&x, &mut y)?;
    let copied = bits(&host, &gpu.download(&y)?);
    let ms = time(gpu, 20, || gpu.copy_buffer(&x, &mut y))?;
    rows.push(Row {
        name: "copy".into(),
        bytes: 8.0 * big as f64,
        flops: 0.0,
        ms,
        bits: copied,
        per_step: None,
    });
    drop(y);
    let layout = Layout::contiguous(Shape::from([big]));
    let mut sum = gpu.alloc_zeros::<f32>(1)?;
    let mut cpu_sum = vec![0.0f32];
    cpu.reduce(ReduceOp::Sum, View::new(&host, &layout), None, &mut cpu_sum)?;
    gpu.reduce(ReduceOp::Sum, View::new(&x, &layout), None, &mut sum)?;
    let summed = bits(&cpu_sum, &gpu.download(&sum)?);
    let ms = time(gpu, 20, || {
        gpu.reduce(ReduceOp::Sum, View::new(&x, &layout), None, &mut sum)
    })?;
    rows.push(Row {
        name: "sum".into(),
        bytes: 4.0 * big as f64,
        flops: 0.0,
        ms,
        bits: summed,
        per_step: None,
    });
    drop((x, host));
    for n in if quick {
        vec![1 << 20]
    } else {
        vec![1 << 24, 1 << 28]
    } {
        let (p0, g0) = (random(&mut rng, n), random(&mut rng, n));
        let update = Update::Adam(rlgrad_core::kernels::optim::Adam::Torch(AdamTorch {
            step_size: 1e-3 / 0.1,
            bias_correction2_sqrt: 0.001f32.sqrt(),
            one_minus_beta1: 0.1,
            beta2: 0.999,
            one_minus_beta2: 0.001,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_keep: 1.0,
            amsgrad: false,
        }));
        let (mut p, g) = (gpu.upload(&p0)?, gpu.upload(&g0)?);
        let (mut m, mut v) = (gpu.alloc_zeros::<f32>(n)?, gpu.alloc_zeros::<f32>(n)?);
        gpu.update(&update, &mut p, &g, &mut [&mut m, &mut v])?;
        let (mut cpu_p, mut cpu_m, mut cpu_v) = (p0, vec![0.0f32; n], vec![0.0f32; n]);
        cpu.update(&update, &mut cpu_p, &g0, &mut [&mut cpu_m, &mut cpu_v])?;
        let mut updated = bits(&cpu_p, &gpu.download(&p)?);
        if updated == "same" {
            updated = bits(&cpu_v, &gpu.download(&v)?);
        }
        drop((cpu_p, cpu_m, cpu_v));
        let ms = time(gpu, 20, || {
            gpu.update(&update, &mut p, &g, &mut [&mut m, &mut v])
        })?;
        rows.push(Row {
            name: format!("adam {n}"),
            bytes: 28.0 * n as f64,
            flops: 0.0,
            ms,
            bits: updated,
            per_step: None,
        });
    }
    for (t, b) in if quick {
        vec![(256, 64)]
    } else {
        vec![(2048, 64), (2048, 4096)]
    } {
        let layout = TimeMajor::new(t, b);
        let (r0, v0) = (random(&mut rng, t * b), random(&mut rng, t * b));
        let term0: Vec<f32> = (0..t * b).map(|_| f32::from(rng.below(100) == 0)).collect();
        let boot0 = random(&mut rng, b);
        let (r, v, term, boot) = (
            gpu.upload(&r0)?,
            gpu.upload(&v0)?,
            gpu.upload(&term0)?,
            gpu.upload(&boot0)?,
        );
        let mut adv = gpu.alloc_zeros::<f32>(t * b)?;
        let episodes = Episodes::Flags {
            gamma: 0.99,
            terminated: &term,
            truncation: None,
        };
        gpu.gae(layout, &r, &v, &boot, episodes, 0.95, &mut adv, None)?;
        let mut cpu_adv = vec![0.0f32; t * b];
        let cpu_episodes = Episodes::Flags {
            gamma: 0.99,
            terminated: &term0,
            truncation: None,
        };
        cpu.gae(
            layout,
            &r0,
            &v0,
            &boot0,
            cpu_episodes,
            0.95,
            &mut cpu_adv,
            None,
        )?;
        let advantages = bits(&cpu_adv, &gpu.download(&adv)?);
        let ms = time(gpu, 50, || {
            gpu.gae(layout, &r, &v, &boot, episodes, 0.95, &mut adv, None)
        })?;
        rows.push(Row {
            name: format!("gae {t}x{b}"),
            bytes: 16.0 * (t * b) as f64,
            flops: 0.0,
            ms,
            bits: advantages,
            per_step: None,
        });
    }
    let (batch, features) = if quick { (512, 16) } else { (4096, 64) };
    let lengths: Vec<usize> = (0..batch).map(|i| 1 + i % 256).collect();
    let seqs = Sequences::new(&lengths, Some(256))?;
    let flat0 = random(&mut rng, seqs.total() * features);
    let flat = gpu.upload(&flat0)?;
    let mut padded = gpu.alloc_zeros::<f32>(seqs.padded_steps() * features)?;
    let mut back = gpu.alloc_zeros::<f32>(seqs.total() * features)?;
    let (packed, full) = (
        4.0 * (seqs.total() * features) as f64,
        4.0 * (seqs.padded_steps() * features) as f64,
    );
    gpu.pad(&seqs, features, PadOrder::BatchMajor, &flat, &mut padded)?;
    let mut cpu_padded = vec![0.0f32; seqs.padded_steps() * features];
    cpu.pad(
        &seqs,
        features,
        PadOrder::BatchMajor,
        &flat0,
        &mut cpu_padded,
    )?;
    let padded_bits = bits(&cpu_padded, &gpu.download(&padded)?);
    let ms = time(gpu, 20, || {
        gpu.pad(&seqs, features, PadOrder::BatchMajor, &flat, &mut padded)
    })?;
    rows.push(Row {
        name: "pad".into(),
        bytes: packed + full,
        flops: 0.0,
        ms,
        bits: padded_bits,
        per_step: None,
    });
    gpu.unpad(&seqs, features, PadOrder::BatchMajor, &padded, &mut back)?;
    let unpadded_bits = bits(&flat0, &gpu.download(&back)?);
    let ms = time(gpu, 20, || {
        gpu.unpad(&seqs, features, PadOrder::BatchMajor, &padded, &mut back)
    })?;
    rows.push(Row {
        name: "unpad".into(),
        bytes: 2.0 * packed,
        flops: 0.0,
        ms,
        bits: unpadded_bits,
        per_step: None,
    });
    rows.extend(matmul_rows(gpu, quick, &mut rng)?);
    Ok(rows)
}

/// The parameters' values, one after the other, on the host.
fn values(
    tensors: &[&Tensor<f32, impl rlgrad_benches::training::TrainDevice<f32>>],
) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    for t in tensors {
        out.extend(t.to_vec()?);
    }
    Ok(out)
}

/// The rows of the training steps (`gpu_train.py`'s `td3_*` and `ppo_*` figures).
const TD3_ROW: &str = "td3 iteration";
const TD3_CAPTURED_ROW: &str = "td3 iteration, captured";
const PPO_ROW: &str = "ppo update";
const PPO_CAPTURED_ROW: &str = "ppo update, captured";

/// The training steps: each runs `checked` steps on the Cpu and on the GPU from the same
/// start, compares every parameter's bits, then times the GPU's steps; then the same with
/// the GPU's steps captured ([`Step`]: recorded once as CUDA graphs, replayed), where the
/// step allows it (a step with a host read is a row named `NOT CAPTURED`, not timed).
fn training_rows(gpu: &Cuda, quick: bool) -> Result<Vec<Row>> {
    let cpu = Cpu::new(Par::auto());
    let (checked, repeats) = if quick { (4, 10) } else { (20, 200) };
    let mut td3 = (Td3::new_on(&cpu)?, Td3::new_on(gpu)?);
    for _ in 0..checked {
        td3.0.iterate()?;
        td3.1.iterate()?;
    }
    let td3_bits = bits(&values(&td3.0.parameters())?, &values(&td3.1.parameters())?);
    let (td3_captured, captured_bits) = captured(
        gpu,
        TD3_CAPTURED_ROW,
        (checked, repeats),
        (Td3::new_on(gpu)?, Td3::parameters),
        Td3::iterate,
        &values(&td3.0.parameters())?,
    )
    .unwrap_or_else(|e| not_captured(TD3_CAPTURED_ROW, e));
    let td3 = time_step(gpu, repeats, || td3.1.iterate())?;
    // gpu_train.py's minibatch: 8192 samples, 256 in its quick mode.
    let samples = if quick { 256 } else { 8192 };
    let mut ppo = (
        PpoUpdate::new_on(&cpu, samples)?,
        PpoUpdate::new_on(gpu, samples)?,
    );
    for _ in 0..checked {
        ppo.0.update()?;
        ppo.1.update()?;
    }
    let ppo_bits = bits(&values(&ppo.0.parameters())?, &values(&ppo.1.parameters())?);
    let (ppo_captured, ppo_captured_bits) = captured(
        gpu,
        PPO_CAPTURED_ROW,
        (checked, repeats),
        (PpoUpdate::new_on(gpu, samples)?, PpoUpdate::parameters),
        PpoUpdate::update,
        &values(&ppo.0.parameters())?,
    )
    .unwrap_or_else(|e| not_captured(PPO_CAPTURED_ROW, e));
    let ppo = time_step(gpu, repeats, || ppo.1.update())?;
    let row = |name: &str, (ms, per_step), bits| Row {
        name: name.into(),
        bytes: 0.0,
        flops: 0.0,
        ms,
        bits,
        per_step: Some(per_step),
    };
    Ok(vec![
        row(TD3_ROW, td3, td3_bits),
        row(TD3_CAPTURED_ROW, td3_captured, captured_bits),
        row(PPO_ROW, ppo, ppo_bits),
        row(PPO_CAPTURED_ROW, ppo_captured, ppo_captured_bits),
    ])
}

/// The row of a captured step that failed (a host read inside it, a refused capture):
/// not timed, its error in place of the bits, so that the other rows are still reported.
fn not_captured(name: &str, error: rlgrad_core::Error) -> ((f64, PerStep), String) {
    eprintln!("{name}: not captured: {error}");
    let none = PerStep {
        launches: f64::NAN,
        graph_launches: f64::NAN,
        uploads: f64::NAN,
        downloads: f64::NAN,
    };
    ((f64::NAN, none), format!("NOT CAPTURED: {error}"))
}

/// How a training workload lists its parameters (`Td3::parameters`).
type ParametersOf<W> = fn(&W) -> Vec<&Tensor<f32, Cuda>>;

/// A training step of `workload` on the GPU as a captured [`Step`]: `checked` runs, its
/// parameters' bits against the Cpu's `want` (after as many runs), then `repeats` timed;
/// the step's recordings printed under `name`.
fn captured<W>(
    gpu: &Cuda,
    name: &str,
    (checked, repeats): (usize, usize),
    (mut workload, parameters): (W, ParametersOf<W>),
    mut run: impl FnMut(&mut W) -> Result<()>,
    want: &[f32],
) -> Result<((f64, PerStep), String)> {
    let mut step = Step::new(gpu);
    for _ in 0..checked {
        step.run(|| run(&mut workload))?;
    }
    let same = bits(want, &values(&parameters(&workload))?);
    let timed = time_step(gpu, repeats, || step.run(|| run(&mut workload)))?;
    println!("{name}: {:?}", step.recordings());
    Ok((timed, same))
}

/// FP32 GEMMs `[m, k] @ [k, n]`, row-major: 4096^3 and `[65536, 256] @ [256, 256]`
/// (throughput), the TD3 critic layer and PPO's hidden layer (small outputs, whole k per
/// output). Named `matmul MxKxN` with the tile chosen by size, then `matmul MxKxN tile E`
/// with each tile forced ([`Cuda::force_matmul_tile`]): the figures to set the choice by.
fn matmul_rows(gpu: &Cuda, quick: bool, rng: &mut Rng) -> Result<Vec<Row>> {
    // The Cpu's bits by the same canonical chain on every core (any thread count gives
    // them): 4096^3 is 69 G fma.
    let cpu = Cpu::new(Par::auto());
    let shapes: &[(usize, usize, usize)] = if quick {
        &[(1024, 1024, 1024), (256, 400, 300), (8192, 64, 64)]
    } else {
        &[
            (4096, 4096, 4096),
            (65536, 256, 256),
            (256, 400, 300),
            (8192, 64, 64),
        ]
    };
    let mut rows = Vec::new();
    for &(m, k, n) in shapes {
        let (a0, b0) = (random(rng, m * k), random(rng, k * n));
        let (la, lb) = (
            Layout::contiguous(Shape::from([m, k])),
            Layout::contiguous(Shape::from([k, n])),
        );
        let (a, b) = (gpu.upload(&a0)?, gpu.upload(&b0)?);
        let mut c = gpu.alloc_zeros::<f32>(m * n)?;
        gpu.matmul(View::new(&a, &la), View::new(&b, &lb), &mut c)?;
        let mut cpu_c = vec![0.0f32; m * n];
        cpu.matmul(View::new(&a0, &la), View::new(&b0, &lb), &mut cpu_c)?;
        let product = bits(&cpu_c, &gpu.download(&c)?);
        let repeats = if m * n * k >= 1 << 30 { 10 } else { 50 };
        let ms = time(gpu, repeats, || {
            gpu.matmul(View::new(&a, &la), View::new(&b, &lb), &mut c)
        })?;
        let row = |name: String, ms, bits| Row {
            name,
            bytes: 4.0 * (m * k + k * n + m * n) as f64,
            flops: 2.0 * (m * k * n) as f64,
            ms,
            bits,
            per_step: None,
        };
        rows.push(row(format!("matmul {m}x{k}x{n}"), ms, product));
        // Each tile forced in turn, for calibrating the choice by size: the same bits.
        for edge in [128, 64, 32] {
            gpu.force_matmul_tile(Some(edge))?;
            let timed = (|| -> Result<(f64, String)> {
                gpu.matmul(View::new(&a, &la), View::new(&b, &lb), &mut c)?;
                let product = bits(&cpu_c, &gpu.download(&c)?);
                let ms = time(gpu, repeats, || {
                    gpu.matmul(View::new(&a, &la), View::new(&b, &lb), &mut c)
                })?;
                Ok((ms, product))
            })();
            gpu.force_matmul_tile(None)?;
            let (ms, product) = timed?;
            rows.push(row(format!("matmul {m}x{k}x{n} tile {edge}"), ms, product));
        }
    }
    Ok(rows)
}

/// The standard output of peer script `script` (written to `file` and run with
/// `python3`), or why it failed.
fn run_peer(
    file: &str,
    script: &str,
    quick: bool,
    environment: &[(&str, &str)],
) -> std::result::Result<String, String> {
    let dir = std::env::temp_dir().join(format!("rlgrad-gpu-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join(file);
    std::fs::write(&path, script).map_err(|e| e.to_string())?;
    let mut command = Command::new("python3");
    command.arg(&path).envs(environment.iter().copied());
    if quick {
        command.arg("--quick");
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    let _ = std::fs::remove_file(&path);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Err(tail.into_iter().rev().collect::<Vec<_>>().join(" | "));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A peer's milliseconds by workload (its script printing one JSON object), or why there
/// are none.
fn peer_times(
    file: &str,
    script: &str,
    quick: bool,
    environment: &[(&str, &str)],
) -> std::result::Result<serde_json::Value, String> {
    let stdout = run_peer(file, script, quick, environment)?;
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).map_err(|e| format!("{e} in {line:?}"))
}

/// The training peers of `gpu_train.py` (one JSON object per line, `{"name", "value"}`
/// in milliseconds for the steps), by column: PyTorch eager, PyTorch with CUDA graphs,
/// JAX, each `{TD3_ROW: ms, PPO_ROW: ms}` where measured.
fn training_peer_times(quick: bool) -> std::result::Result<[serde_json::Value; 3], String> {
    let stdout = run_peer("gpu_train.py", TRAIN_SCRIPT, quick, &[])?;
    let mut columns = [(); 3].map(|()| serde_json::Map::new());
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let figure: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{e} in {line:?}"))?;
        let (Some(name), Some(ms)) = (figure["name"].as_str(), figure["value"].as_f64()) else {
            continue;
        };
        let Some((workload, peer)) = name.split_once('_') else {
            continue;
        };
        let column = match peer {
            "torch" => 0,
            "graph" => 1,
            "jax" => 2,
            _ => continue,
        };
        let rows: &[&str] = match workload {
            "td3" => &[TD3_ROW, TD3_CAPTURED_ROW],
            "ppo" => &[PPO_ROW, PPO_CAPTURED_ROW],
            _ => continue,
        };
        for row in rows {
            columns[column].insert((*row).to_owned(), ms.into());
        }
    }
    Ok(columns.map(serde_json::Value::Object))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| "gpu-bench.json".to_owned());
    let gpu = match Cuda::new(0) {
        Ok(gpu) => gpu,
        Err(why) => match rlgrad_cuda::skip_outcome(rlgrad_cuda::gpu_required(), "GPU", &why) {
            Ok(skipped) => return println!("gpu-bench: {skipped}"),
            Err(refused) => {
                eprintln!("gpu-bench: {refused}");
                std::process::exit(1);
            }
        },
    };
    let mut rows = match rlgrad_rows(&gpu, quick) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("gpu-bench: {e}");
            std::process::exit(1);
        }
    };
    // A training step that fails (an op without its GPU kernel, say) costs its rows, not
    // the kernels' table.
    let training_failed = match training_rows(&gpu, quick) {
        Ok(training) => {
            rows.extend(training);
            false
        }
        Err(e) => {
            eprintln!("gpu-bench: the training steps failed: {e}");
            true
        }
    };
    // The peers get the GPU's memory back: rlgrad's cached buffers are freed first, and
    // JAX allocates as it goes instead of taking 75% of the GPU at start.
    gpu.clear_cache();
    let torch = peer_times("gpu_bench_torch.py", TORCH_SCRIPT, quick, &[]).unwrap_or_else(|why| {
        println!("gpu-bench: no PyTorch column ({why})");
        serde_json::Value::Null
    });
    let jax = peer_times(
        "gpu_bench_jax.py",
        JAX_SCRIPT,
        quick,
        &[("XLA_PYTHON_CLIENT_PREALLOCATE", "false")],
    )
    .unwrap_or_else(|why| {
        println!("gpu-bench: no JAX column ({why})");
        serde_json::Value::Null
    });
    let [train_torch, torch_graph, train_jax] = training_peer_times(quick).unwrap_or_else(|why| {
        println!("gpu-bench: no training peers ({why})");
        [(); 3].map(|()| serde_json::Value::Null)
    });
    let (torch, jax) = (merged(torch, train_torch), merged(jax, train_jax));
    let copy_gbs = rows[0].bytes / rows[0].ms / 1e6;
    println!(
        "{} ({})",
        gpu.model(),
        if quick { "quick sizes" } else { "full sizes" }
    );
    println!(
        "{:<22} {:>6} {:>10} {:>9} {:>8} {:>8} {:>11} {:>10} {:>9} {:>12}",
        "workload",
        "bits",
        "rlgrad ms",
        "GB/s",
        "of copy",
        "TFLOP/s",
        "PyTorch ms",
        "graphs ms",
        "JAX ms",
        "vs best peer"
    );
    let mut json = Vec::new();
    let mut differing = 0;
    for row in &rows {
        let gbs = (row.bytes > 0.0).then(|| row.bytes / row.ms / 1e6);
        let torch_ms = torch[&row.name].as_f64();
        let graph_ms = torch_graph[&row.name].as_f64();
        let jax_ms = jax[&row.name].as_f64();
        let best = [torch_ms, graph_ms, jax_ms]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        let ms = |t: Option<f64>| t.map_or("-".to_owned(), |t| format!("{t:.4}"));
        let tflops = (row.flops > 0.0).then(|| row.flops / row.ms / 1e9);
        println!(
            "{:<22} {:>6} {:>10.4} {:>9} {:>8} {:>8} {:>11} {:>10} {:>9} {:>12}",
            row.name,
            if row.bits == "same" { "same" } else { "DIFFER" },
            row.ms,
            gbs.map_or("-".to_owned(), |g| format!("{g:.0}")),
            gbs.map_or("-".to_owned(), |g| format!("{:.0}%", 100.0 * g / copy_gbs)),
            tflops.map_or("-".to_owned(), |t| format!("{t:.1}")),
            ms(torch_ms),
            ms(graph_ms),
            ms(jax_ms),
            best.map_or("-".to_owned(), |t| format!("{:.2}x", t / row.ms)),
        );
        differing += usize::from(row.bits != "same");
        json.push(serde_json::json!({
            "workload": row.name,
            "bits": row.bits,
            "rlgrad_ms": row.ms,
            "bytes": row.bytes,
            "gb_per_s": gbs,
            "fraction_of_copy": gbs.map(|g| g / copy_gbs),
            "tflop_per_s": tflops,
            "torch_graph_ms": graph_ms,
            "torch_ms": torch_ms,
            "jax_ms": jax_ms,
            "per_step": row.per_step.map(|p| serde_json::json!({
                "launches": p.launches,
                "graph_launches": p.graph_launches,
                "uploads": p.uploads,
                "downloads": p.downloads,
            })),
        }));
    }
    for row in &rows {
        if let Some(p) = row.per_step {
            println!(
                "{} per step: {:.1} kernel launches, {:.1} graph launches, {:.1} uploads, \
                 {:.1} downloads (each a wait)",
                row.name, p.launches, p.graph_launches, p.uploads, p.downloads
            );
        }
    }
    let report = serde_json::json!({ "device": gpu.model(), "quick": quick, "rows": json });
    let written = std::fs::File::create(&out).and_then(|mut f| {
        f.write_all(
            serde_json::to_string_pretty(&report)
                .unwrap_or_default()
                .as_bytes(),
        )
    });
    match written {
        Ok(()) => println!("gpu-bench: JSON in {out}"),
        Err(e) => eprintln!("gpu-bench: cannot write {out}: {e}"),
    }
    if differing > 0 {
        eprintln!("gpu-bench: {differing} workload(s) did not give the Cpu's bits");
    }
    if differing > 0 || training_failed {
        std::process::exit(1);
    }
}

/// `kernels`' figures with `training`'s added (either may be missing: `Null`).
fn merged(kernels: serde_json::Value, training: serde_json::Value) -> serde_json::Value {
    match (kernels, training) {
        (serde_json::Value::Object(mut all), serde_json::Value::Object(more)) => {
            all.extend(more);
            serde_json::Value::Object(all)
        }
        (serde_json::Value::Null, other) | (other, _) => other,
    }
}
