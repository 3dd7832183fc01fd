//! rlgrad-gpu-bench: rlgrad's CUDA kernels and the same workloads in PyTorch, on one GPU,
//! in one sitting. Prints a table (milliseconds, GB/s, share of the device-to-device copy
//! bandwidth, ratio to PyTorch) and writes JSON (`--out FILE`, default `gpu-bench.json`).
//!
//! Standalone: PyTorch's side is a script embedded in this binary, run with `python3`
//! (skipped with a note when torch is missing). `--quick` runs small sizes. Without a GPU
//! it says so and exits 0 (1 with `RLGRAD_REQUIRE_GPU=1`). Never a test: timings need a quiet machine.

use std::io::Write;
use std::process::Command;
use std::time::Instant;

use rlgrad_core::kernels::optim::{AdamTorch, Update};
use rlgrad_core::kernels::recurrence::{Episodes, TimeMajor};
use rlgrad_core::kernels::sequence::{PadOrder, Sequences};
use rlgrad_core::kernels::{OptimKernel, RecurrenceKernel, ReduceKernel, ReduceOp, SequenceKernel};
use rlgrad_core::{Device, Layout, Result, Rng, Shape, View};
use rlgrad_cuda::Cuda;

const TORCH_SCRIPT: &str = include_str!("gpu_bench_torch.py");

/// One workload: its name (as the PyTorch script names it), bytes moved, milliseconds.
struct Row {
    name: String,
    bytes: f64,
    ms: f64,
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

fn rlgrad_rows(gpu: &Cuda, quick: bool) -> Result<Vec<Row>> {
    let mut rng = Rng::new(0, "gpu-bench");
    let mut rows = Vec::new();
    let big = 1usize << if quick { 22 } else { 28 };
    let x = gpu.upload(&random(&mut rng, big))?;
    let mut y = gpu.alloc_zeros::<f32>(big)?;
    let ms = time(gpu, 20, || gpu.copy_buffer(&x, &mut y))?;
    rows.push(Row {
        name: "copy".into(),
        bytes: 8.0 * big as f64,
        ms,
    });
    drop(y);
    let layout = Layout::contiguous(Shape::from([big]));
    let mut sum = gpu.alloc_zeros::<f32>(1)?;
    let ms = time(gpu, 20, || {
        gpu.reduce(ReduceOp::Sum, View::new(&x, &layout), None, &mut sum)
    })?;
    rows.push(Row {
        name: "sum".into(),
        bytes: 4.0 * big as f64,
        ms,
    });
    drop(x);
    for n in if quick {
        vec![1 << 20]
    } else {
        vec![1 << 24, 1 << 28]
    } {
        let mut p = gpu.upload(&random(&mut rng, n))?;
        let g = gpu.upload(&random(&mut rng, n))?;
        let (mut m, mut v) = (gpu.alloc_zeros::<f32>(n)?, gpu.alloc_zeros::<f32>(n)?);
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
        let ms = time(gpu, 20, || {
            gpu.update(&update, &mut p, &g, &mut [&mut m, &mut v])
        })?;
        rows.push(Row {
            name: format!("adam {n}"),
            bytes: 28.0 * n as f64,
            ms,
        });
    }
    for (t, b) in if quick {
        vec![(256, 64)]
    } else {
        vec![(2048, 64), (2048, 4096)]
    } {
        let layout = TimeMajor::new(t, b);
        let r = gpu.upload(&random(&mut rng, t * b))?;
        let v = gpu.upload(&random(&mut rng, t * b))?;
        let term: Vec<f32> = (0..t * b).map(|_| f32::from(rng.below(100) == 0)).collect();
        let term = gpu.upload(&term)?;
        let boot = gpu.upload(&random(&mut rng, b))?;
        let mut adv = gpu.alloc_zeros::<f32>(t * b)?;
        let episodes = Episodes::Flags {
            gamma: 0.99,
            terminated: &term,
            truncation: None,
        };
        let ms = time(gpu, 50, || {
            gpu.gae(layout, &r, &v, &boot, episodes, 0.95, &mut adv, None)
        })?;
        rows.push(Row {
            name: format!("gae {t}x{b}"),
            bytes: 16.0 * (t * b) as f64,
            ms,
        });
    }
    let (batch, features) = if quick { (512, 16) } else { (4096, 64) };
    let lengths: Vec<usize> = (0..batch).map(|i| 1 + i % 256).collect();
    let seqs = Sequences::new(&lengths, Some(256))?;
    let flat = gpu.upload(&random(&mut rng, seqs.total() * features))?;
    let mut padded = gpu.alloc_zeros::<f32>(seqs.padded_steps() * features)?;
    let mut back = gpu.alloc_zeros::<f32>(seqs.total() * features)?;
    let (packed, full) = (
        4.0 * (seqs.total() * features) as f64,
        4.0 * (seqs.padded_steps() * features) as f64,
    );
    let ms = time(gpu, 20, || {
        gpu.pad(&seqs, features, PadOrder::BatchMajor, &flat, &mut padded)
    })?;
    rows.push(Row {
        name: "pad".into(),
        bytes: packed + full,
        ms,
    });
    let ms = time(gpu, 20, || {
        gpu.unpad(&seqs, features, PadOrder::BatchMajor, &padded, &mut back)
    })?;
    rows.push(Row {
        name: "unpad".into(),
        bytes: 2.0 * packed,
        ms,
    });
    Ok(rows)
}

/// PyTorch's milliseconds by workload, or why there are none.
fn torch_times(quick: bool) -> std::result::Result<serde_json::Value, String> {
    let dir = std::env::temp_dir().join(format!("rlgrad-gpu-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = dir.join("gpu_bench_torch.py");
    std::fs::write(&script, TORCH_SCRIPT).map_err(|e| e.to_string())?;
    let mut command = Command::new("python3");
    command.arg(&script);
    if quick {
        command.arg("--quick");
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())
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
    let rows = match rlgrad_rows(&gpu, quick) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("gpu-bench: {e}");
            std::process::exit(1);
        }
    };
    let torch = torch_times(quick).unwrap_or_else(|why| {
        println!("gpu-bench: no PyTorch column ({why})");
        serde_json::Value::Null
    });
    let copy_gbs = rows[0].bytes / rows[0].ms / 1e6;
    println!(
        "{} ({})",
        gpu.model(),
        if quick { "quick sizes" } else { "full sizes" }
    );
    println!(
        "{:<16} {:>10} {:>9} {:>8} {:>11} {:>9}",
        "workload", "rlgrad ms", "GB/s", "of copy", "PyTorch ms", "speedup"
    );
    let mut json = Vec::new();
    for row in &rows {
        let gbs = row.bytes / row.ms / 1e6;
        let torch_ms = torch[&row.name].as_f64();
        println!(
            "{:<16} {:>10.4} {:>9.0} {:>7.0}% {:>11} {:>9}",
            row.name,
            row.ms,
            gbs,
            100.0 * gbs / copy_gbs,
            torch_ms.map_or("-".to_owned(), |t| format!("{t:.4}")),
            torch_ms.map_or("-".to_owned(), |t| format!("{:.2}x", t / row.ms)),
        );
        json.push(serde_json::json!({
            "workload": row.name,
            "rlgrad_ms": row.ms,
            "bytes": row.bytes,
            "gb_per_s": gbs,
            "fraction_of_copy": gbs / copy_gbs,
            "torch_ms": torch_ms,
        }));
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
}
