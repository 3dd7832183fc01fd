//! rlgrad's side of `cargo xtask interop`: `interop-write WORK` writes a checkpoint
//! (tensors of every native dtype, Adam's state, an RNG position, metadata) and an event
//! file (scalars, a histogram), with what they hold in `WORK/rlgrad_expected.json`;
//! `interop-check WORK` reads back the files Python's safetensors and tensorboard wrote
//! there (`python_expected.json` says what they hold). Every check prints `PASS name` or
//! `FAIL name: why`; xtask counts them beside the Python side's.

use std::collections::BTreeMap;
use std::path::Path;

use rlgrad_checkpoint::{Checkpoint, Dtype};
use rlgrad_core::Rng;
use rlgrad_optim::{Adam, Optimizer, Param};
use rlgrad_summary::{EventWriter, WriterOptions, read_scalars};
use serde_json::{Value, json};

/// The PASS/FAIL lines, and whether any check failed.
#[derive(Default)]
struct Tally {
    failed: usize,
}

impl Tally {
    fn check(&mut self, name: &str, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => println!("PASS {name}"),
            Err(why) => {
                self.failed += 1;
                println!("FAIL {name}: {why}");
            }
        }
    }
}

/// `rlgrad-tools interop-write WORK`.
pub fn write(args: &[String]) -> Result<(), String> {
    let work = work_dir("interop-write", args)?;
    write_rlgrad_files(&work).map_err(|e| format!("writing rlgrad's files: {e}"))
}

/// `rlgrad-tools interop-check WORK`: an error when a check failed.
pub fn check(args: &[String]) -> Result<(), String> {
    let work = work_dir("interop-check", args)?;
    let mut tally = Tally::default();
    check_python_files(&work, &mut tally);
    match tally.failed {
        0 => Ok(()),
        n => Err(format!("{n} checks of Python's files failed")),
    }
}

fn work_dir(command: &str, args: &[String]) -> Result<std::path::PathBuf, String> {
    match args {
        [work] => Ok(work.into()),
        _ => Err(format!("usage: rlgrad-tools {command} WORK, got {args:?}")),
    }
}

/// The values of a stored tensor as JSON integers: float bit patterns, or the integers.
fn bits_json<T: Copy>(values: &[T], bits: impl Fn(T) -> Value) -> Value {
    Value::Array(values.iter().map(|&v| bits(v)).collect())
}

fn numpy_dtype(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::F32 => "float32",
        Dtype::F64 => "float64",
        Dtype::U8 => "uint8",
        Dtype::I8 => "int8",
        Dtype::U16 => "uint16",
        Dtype::I16 => "int16",
        Dtype::U32 => "uint32",
        Dtype::I32 => "int32",
        Dtype::U64 => "uint64",
        Dtype::I64 => "int64",
        Dtype::F16 => "float16",
        Dtype::Bf16 => "bfloat16",
        Dtype::Bool => "bool",
        _ => "unknown",
    }
}

/// The values of tensor `name` as JSON integers (float bit patterns, or the integers);
/// `None` for a dtype without a native Rust type (f16, bf16, bool).
fn stored_bits(checkpoint: &Checkpoint, name: &str) -> Result<Option<Value>, String> {
    let info = checkpoint
        .tensor_info(name)
        .ok_or(format!("`{name}` is missing"))?;
    let shape = &info.shape;
    let e = |e: rlgrad_core::Error| e.to_string();
    Ok(Some(match info.dtype {
        Dtype::F32 => bits_json(&checkpoint.read::<f32>(name, shape).map_err(e)?, |v| {
            json!(v.to_bits())
        }),
        Dtype::F64 => bits_json(&checkpoint.read::<f64>(name, shape).map_err(e)?, |v| {
            json!(v.to_bits())
        }),
        Dtype::I8 => bits_json(&checkpoint.read::<i8>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        Dtype::I16 => bits_json(&checkpoint.read::<i16>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        Dtype::I32 => bits_json(&checkpoint.read::<i32>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        Dtype::I64 => bits_json(&checkpoint.read::<i64>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        Dtype::U8 => bits_json(&checkpoint.read::<u8>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        Dtype::U16 => bits_json(&checkpoint.read::<u16>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        Dtype::U32 => bits_json(&checkpoint.read::<u32>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        Dtype::U64 => bits_json(&checkpoint.read::<u64>(name, shape).map_err(e)?, |v| {
            json!(v)
        }),
        _ => return Ok(None),
    }))
}

/// Every tensor of `checkpoint` as `{dtype, shape, bits}` for the Python side.
fn expected_tensors(checkpoint: &Checkpoint) -> Result<Value, String> {
    let mut out = serde_json::Map::new();
    for name in checkpoint.names() {
        let info = checkpoint
            .tensor_info(name)
            .expect("listed names are stored");
        let bits = stored_bits(checkpoint, name)?
            .ok_or(format!("`{name}`: rlgrad writes only native dtypes"))?;
        out.insert(
            name.to_owned(),
            json!({ "dtype": numpy_dtype(info.dtype), "shape": info.shape, "bits": bits }),
        );
    }
    Ok(Value::Object(out))
}

fn write_rlgrad_files(work: &Path) -> Result<(), String> {
    let e = |e: rlgrad_core::Error| e.to_string();
    let mut rng = Rng::new(2024, "interop");
    let weight: Vec<f32> = (0..12).map(|_| rng.normal(0.0, 1.0)).collect();
    let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3).map_err(e)?;
    let mut trained = weight.clone();
    for _ in 0..2 {
        let grad: Vec<f32> = trained.iter().map(|w| 2.0 * w).collect();
        adam.step(&mut [Param {
            name: "actor/l1/weight",
            value: &mut trained,
            grad: &grad,
        }])
        .map_err(e)?;
    }
    let mut checkpoint = Checkpoint::new();
    checkpoint
        .put("actor/l1/weight", &[3, 4], &trained)
        .map_err(e)?;
    // Edge values: signed zero, subnormal, extremes, a NaN with a payload.
    let edge = [
        -0.0f64,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::from_bits(0x7ff8_0000_dead_beef),
    ];
    checkpoint.put("actor/l1/bias", &[5], &edge).map_err(e)?;
    checkpoint
        .put("buffer/actions", &[2, 2], &[-1i32, 0, 1, i32::MAX])
        .map_err(e)?;
    checkpoint
        .put("buffer/episode_ids", &[3], &[i64::MIN, 0, i64::MAX])
        .map_err(e)?;
    checkpoint
        .put("buffer/done", &[4], &[0u8, 1, 0, 1])
        .map_err(e)?;
    checkpoint
        .put("buffer/lengths", &[2], &[7u16, u16::MAX])
        .map_err(e)?;
    checkpoint
        .put_scalar("progress/env_step", u64::MAX - 1)
        .map_err(e)?;
    checkpoint.put_optimizer("optim", &adam).map_err(e)?;
    checkpoint.put_rng("rng/interop", &rng).map_err(e)?;
    checkpoint
        .set_metadata("config", r#"{"lr": 0.001, "gamma": 0.99}"#)
        .map_err(e)?;
    checkpoint
        .set_metadata("wall_time", "1718000000.5")
        .map_err(e)?;
    checkpoint
        .save(work.join("rlgrad.safetensors"))
        .map_err(e)?;

    let mut events =
        EventWriter::create(work.join("events"), WriterOptions::default()).map_err(e)?;
    let mut scalars: BTreeMap<&str, Vec<(u64, f64)>> = BTreeMap::new();
    for step in (0..50u64).step_by(5) {
        for (tag, value) in [
            ("train/critic_loss", 1.0 / (1.0 + step as f64)),
            ("eval/episode_return", -200.0 + 3.7 * step as f64),
        ] {
            events.scalar(tag, step, value).map_err(e)?;
            // TensorBoard keeps scalars as f32.
            scalars
                .entry(tag)
                .or_default()
                .push((step, f64::from(value as f32)));
        }
    }
    let histogram_values: Vec<f64> = (0..1000)
        .map(|_| rng.normal_f64() * 0.3)
        .chain([0.0, 1e-13, -5.0])
        .collect();
    events
        .histogram("actor/l1/weight", 40, &histogram_values)
        .map_err(e)?;
    events.close().map_err(e)?;

    let expected = json!({
        "tensors": expected_tensors(&checkpoint)?,
        "metadata": {
            "config": checkpoint.metadata("config"),
            "wall_time": checkpoint.metadata("wall_time"),
        },
        "scalars": scalars,
        "histograms": { "actor/l1/weight": { "step": 40, "values": histogram_values } },
    });
    std::fs::write(work.join("rlgrad_expected.json"), expected.to_string())
        .map_err(|e| format!("cannot write rlgrad_expected.json: {e}"))
}

/// Checks the files `interop.py` wrote against `python_expected.json`.
fn check_python_files(work: &Path, tally: &mut Tally) {
    let expected: Value = match std::fs::read_to_string(work.join("python_expected.json"))
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(value) => value,
        Err(why) => return tally.check("python_expected.json readable", Err(why)),
    };
    match Checkpoint::load(work.join("python.safetensors")) {
        Err(e) => tally.check("rlgrad loads Python's safetensors file", Err(e.to_string())),
        Ok(checkpoint) => {
            tally.check("rlgrad loads Python's safetensors file", Ok(()));
            tally.check(
                "Python's file, without rlgrad's checksums, loads unverified",
                (!checkpoint.is_verified())
                    .then_some(())
                    .ok_or("reported as verified".into()),
            );
            check_python_checkpoint(&checkpoint, &expected, tally);
        }
    }
    let scalars = std::fs::read_dir(work.join("python_events"))
        .map_err(|e| e.to_string())
        .and_then(|mut entries| {
            let file = entries
                .next()
                .ok_or("no event file")?
                .map_err(|e| e.to_string())?;
            read_scalars(file.path()).map_err(|e| e.to_string())
        });
    let want: BTreeMap<String, Vec<(u64, f64)>> =
        serde_json::from_value(expected["scalars"].clone()).unwrap_or_default();
    tally.check(
        "rlgrad reads the scalars of an event file Python's tensorboard wrote",
        scalars.and_then(|series| {
            let got: BTreeMap<String, Vec<(u64, f64)>> =
                series.into_iter().map(|s| (s.name, s.points)).collect();
            (got == want && !want.is_empty())
                .then_some(())
                .ok_or(format!("expected {want:?}, read {got:?}"))
        }),
    );
}

fn check_python_checkpoint(checkpoint: &Checkpoint, expected: &Value, tally: &mut Tally) {
    let Some(tensors) = expected["tensors"].as_object() else {
        return tally.check(
            "python_expected.json lists tensors",
            Err("no `tensors`".into()),
        );
    };
    let names: Vec<&str> = checkpoint.names().collect();
    let want_names: Vec<&str> = tensors.keys().map(String::as_str).collect();
    tally.check(
        "Python's tensor names",
        (names == want_names)
            .then_some(())
            .ok_or(format!("{names:?} != {want_names:?}")),
    );
    for (name, want) in tensors {
        let shape: Vec<usize> = serde_json::from_value(want["shape"].clone()).unwrap_or_default();
        let outcome = (|| {
            let info = checkpoint.tensor_info(name).ok_or("missing")?;
            let dtype = numpy_dtype(info.dtype);
            if dtype != want["dtype"] || info.shape != shape {
                return Err(format!(
                    "stored as {dtype} {:?}, expected {} {shape:?}",
                    info.shape, want["dtype"]
                ));
            }
            // Without a native Rust type (f16) the dtype and shape are what can be checked.
            match stored_bits(checkpoint, name)? {
                Some(bits) if bits != want["bits"] => {
                    Err(format!("bits {bits} != {}", want["bits"]))
                }
                _ => Ok(()),
            }
        })();
        tally.check(&format!("rlgrad reads Python's `{name}`"), outcome);
    }
    tally.check(
        "Python's metadata",
        (checkpoint.metadata("format") == expected["metadata"]["format"].as_str()
            && checkpoint.metadata("note") == expected["metadata"]["note"].as_str())
        .then_some(())
        .ok_or(format!(
            "{:?}",
            checkpoint.metadata_entries().collect::<Vec<_>>()
        )),
    );
}
