//! Loading parity cases (schema version 1) and comparing outputs with `expected`.

use std::collections::BTreeMap;
use std::path::Path;

use rlgrad_core::{DType, Float};
use serde_json::{Map, Value};

/// A flat row-major array with its shape, as stored in a case file.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Array {
    /// A scalar (shape `[]`).
    pub fn scalar(value: f64) -> Self {
        Self {
            shape: Vec::new(),
            data: vec![value],
        }
    }

    /// An array from values of the case dtype.
    pub fn new<T: Float>(shape: &[usize], data: &[T]) -> Self {
        Self {
            shape: shape.to_vec(),
            data: data.iter().map(|v| v.as_f64()).collect(),
        }
    }
}

/// What an implementation returns: arrays by output name.
pub type Outputs = BTreeMap<String, Array>;

/// One parity case.
#[derive(Debug)]
pub struct Case {
    pub name: String,
    pub suite: String,
    pub op: String,
    pub dtype: DType,
    pub config: Map<String, Value>,
    pub inputs: BTreeMap<String, Array>,
    pub expected: BTreeMap<String, Array>,
    pub max_abs: f64,
    pub max_rel: f64,
}

/// Every `*.json` file of `dir`, sorted by name: a case, or why it could not be read.
pub fn load_dir(dir: &Path) -> Result<Vec<Result<Case, String>>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read parity directory {}: {e}", dir.display()))?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    Ok(paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            Case::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect())
}

fn number(value: &Value) -> Result<f64, String> {
    match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not a float")),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        Value::String(s) => match s.as_str() {
            "nan" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            other => Err(format!("`{other}` is not a number")),
        },
        other => Err(format!("{other} is not a number")),
    }
}

fn arrays(value: Option<&Value>, field: &str) -> Result<BTreeMap<String, Array>, String> {
    let object = value
        .and_then(Value::as_object)
        .ok_or_else(|| format!("`{field}` must be an object"))?;
    object
        .iter()
        .map(|(name, entry)| {
            let shape = entry
                .get("shape")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{field}.{name}: missing `shape`"))?
                .iter()
                .map(|d| {
                    d.as_u64()
                        .map(|d| d as usize)
                        .ok_or_else(|| format!("{field}.{name}: bad dimension {d}"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let data = entry
                .get("data")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{field}.{name}: missing `data`"))?
                .iter()
                .map(number)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{field}.{name}: {e}"))?;
            let numel: usize = shape.iter().product();
            if data.len() != numel {
                return Err(format!(
                    "{field}.{name}: shape {shape:?} needs {numel} values, got {}",
                    data.len()
                ));
            }
            Ok((name.clone(), Array { shape, data }))
        })
        .collect()
}

impl Case {
    /// Parses one case file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let text_field = |name: &str| {
            root.get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("missing string field `{name}`"))
        };
        match root.get("schema").and_then(Value::as_u64) {
            Some(1) => {}
            other => return Err(format!("unsupported schema {other:?}, expected 1")),
        }
        let dtype = match text_field("dtype")?.as_str() {
            "f32" => DType::F32,
            "f64" => DType::F64,
            other => return Err(format!("unsupported dtype `{other}`")),
        };
        let tolerance = root.get("tolerance").ok_or("missing `tolerance`")?;
        let bound = |name: &str| {
            tolerance
                .get(name)
                .map(number)
                .transpose()?
                .ok_or_else(|| format!("missing tolerance.{name}"))
        };
        Ok(Self {
            name: text_field("case")?,
            suite: text_field("suite")?,
            op: text_field("op")?,
            dtype,
            config: root
                .get("config")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            inputs: arrays(root.get("inputs"), "inputs")?,
            expected: arrays(root.get("expected"), "expected")?,
            max_abs: bound("max_abs")?,
            max_rel: bound("max_rel")?,
        })
    }

    /// Input `name` converted to `T`.
    pub fn input<T: Float>(&self, name: &str) -> Result<Vec<T>, String> {
        Ok(self
            .input_array(name)?
            .data
            .iter()
            .map(|&v| T::from_f64(v))
            .collect())
    }

    /// Input `name` as stored.
    pub fn input_array(&self, name: &str) -> Result<&Array, String> {
        self.inputs
            .get(name)
            .ok_or_else(|| format!("missing input `{name}`"))
    }

    /// Input `name` as non-negative integers (lengths).
    pub fn input_usize(&self, name: &str) -> Result<Vec<usize>, String> {
        self.input_array(name)?
            .data
            .iter()
            .map(|&v| {
                if v >= 0.0 && v.fract() == 0.0 {
                    Ok(v as usize)
                } else {
                    Err(format!("input `{name}` holds {v}, not a count"))
                }
            })
            .collect()
    }

    /// Input `name` as integers (ids).
    pub fn input_i64(&self, name: &str) -> Result<Vec<i64>, String> {
        self.input_array(name)?
            .data
            .iter()
            .map(|&v| {
                if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    Ok(v as i64)
                } else {
                    Err(format!("input `{name}` holds {v}, not an integer"))
                }
            })
            .collect()
    }

    /// Config value `key` as an optional count (`null` or absent is `None`).
    pub fn optional_count(&self, key: &str) -> Result<Option<usize>, String> {
        match self.config.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(|n| Some(n as usize))
                .ok_or_else(|| format!("config `{key}`: {v} is not a count")),
        }
    }

    /// Config value `key` as a string.
    pub fn text(&self, key: &str) -> Result<&str, String> {
        self.config
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("missing string config `{key}`"))
    }

    /// Config value `key` as a number (booleans read as 0/1).
    pub fn number(&self, key: &str) -> Result<f64, String> {
        self.config
            .get(key)
            .ok_or_else(|| format!("missing config `{key}`"))
            .and_then(|v| number(v).map_err(|e| format!("config `{key}`: {e}")))
    }

    /// Config value `key` as a boolean.
    pub fn flag(&self, key: &str) -> Result<bool, String> {
        Ok(self.number(key)? != 0.0)
    }

    /// Compares `got` with `expected`: every expected output must be present with the
    /// same shape and each value within `max_abs + max_rel * |want|` (non-finite values
    /// exactly). On success, the worst error as a fraction of its allowance.
    pub fn compare(&self, got: &Outputs) -> Result<f64, String> {
        /// The element that is furthest outside (or closest to the edge of) its allowance.
        struct Worst {
            fraction: f64,
            report: String,
        }
        let mut worst: Option<Worst> = None;
        for (name, want) in &self.expected {
            let have = got
                .get(name)
                .ok_or_else(|| format!("output `{name}` missing"))?;
            if have.shape != want.shape {
                return Err(format!(
                    "output `{name}` has shape {:?}, expected {:?}",
                    have.shape, want.shape
                ));
            }
            for (i, (&g, &w)) in have.data.iter().zip(&want.data).enumerate() {
                let allowed = self.max_abs + self.max_rel * w.abs();
                let error = (g - w).abs();
                let fraction = if !w.is_finite() {
                    // Non-finite expectations must be reproduced exactly.
                    if g.is_nan() && w.is_nan() || g == w {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                } else if error.is_nan() {
                    f64::INFINITY
                } else if allowed > 0.0 {
                    error / allowed
                } else if error > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                };
                if worst.as_ref().is_none_or(|w| fraction > w.fraction) {
                    worst = Some(Worst {
                        fraction,
                        report: format!(
                            "{name}[{i}]: got {g:e}, want {w:e}, |error| {error:.3e}, allowed {allowed:.3e}"
                        ),
                    });
                }
            }
        }
        match worst {
            Some(w) if w.fraction > 1.0 => Err(format!("worst element {}", w.report)),
            Some(w) => Ok(w.fraction),
            None => Ok(0.0),
        }
    }
}

/// A library error as the parity runner reports it.
pub fn err(e: rlgrad_core::Error) -> String {
    e.to_string()
}

/// Input `name` as a tensor of its stored shape.
pub fn tensor<T: Float>(case: &Case, name: &str) -> Result<rlgrad_tensor::Tensor<T>, String> {
    let shape = case.input_array(name)?.shape.clone();
    rlgrad_tensor::Tensor::from_vec(case.input::<T>(name)?, shape).map_err(err)
}

/// Input `name` as a parameter named after it.
pub fn param<T: Float>(case: &Case, name: &str) -> Result<rlgrad_autodiff::Param<T>, String> {
    rlgrad_autodiff::Param::new(name, tensor(case, name)?).map_err(err)
}

/// The gradient of `p` in `grads` as output `name`.
pub fn grad_output<T: Float>(
    outputs: &mut Outputs,
    name: &str,
    grads: &rlgrad_autodiff::Gradients<T>,
    p: &rlgrad_autodiff::Param<T>,
) -> Result<(), String> {
    let g = grads.get(p).map_err(err)?;
    outputs.insert(
        name.to_owned(),
        Array::new(g.dims(), &g.to_vec().map_err(err)?),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CASE: &str = r#"{
        "schema": 1, "suite": "returns", "op": "demo", "case": "demo_case",
        "reference": "test", "dtype": "f32", "config": {"gamma": 0.5, "flag": true, "n": null},
        "inputs": {"x": {"shape": [2], "data": [1.0, "nan"]}},
        "expected": {"y": {"shape": [2], "data": [2.0, "-inf"]}},
        "tolerance": {"max_abs": 0.1, "max_rel": 0.0}
    }"#;

    #[test]
    fn parses_and_compares() {
        let case = Case::parse(CASE).unwrap();
        assert_eq!(case.dtype, DType::F32);
        assert!(case.input::<f32>("x").unwrap()[1].is_nan());
        assert!(case.flag("flag").unwrap());
        assert_eq!(case.optional_count("n").unwrap(), None);
        let out = |a: f64, b: f64| {
            Outputs::from([(
                "y".to_owned(),
                Array {
                    shape: vec![2],
                    data: vec![a, b],
                },
            )])
        };
        assert!(case.compare(&out(2.05, f64::NEG_INFINITY)).is_ok());
        assert!(
            case.compare(&out(2.2, f64::NEG_INFINITY))
                .unwrap_err()
                .contains("y[0]")
        );
        assert!(
            case.compare(&out(2.0, f64::NAN))
                .unwrap_err()
                .contains("y[1]")
        );
        // Two failures: the worst one is reported (a wrong non-finite value beats 0.3 off).
        let err = case.compare(&out(2.3, f64::NAN)).unwrap_err();
        assert!(err.starts_with("worst element y[1]"), "{err}");
        assert!(
            case.compare(&Outputs::new())
                .unwrap_err()
                .contains("missing")
        );
    }

    #[test]
    fn malformed_cases_are_reported() {
        assert!(Case::parse("{").unwrap_err().contains("not JSON"));
        assert!(
            Case::parse(&CASE.replace("\"schema\": 1", "\"schema\": 2"))
                .unwrap_err()
                .contains("schema")
        );
        assert!(
            Case::parse(&CASE.replace("[1.0, \"nan\"]", "[1.0]"))
                .unwrap_err()
                .contains("needs 2 values")
        );
    }
}
