//! Parameter lists the ranks must agree on, the check that they do, and a stable
//! fingerprint of parameter values for comparing runs.

use std::fmt;

use rlgrad_core::{DType, Error, Fingerprint, Float, Result};

use crate::collective::{Collective, Reader, put_u64};

/// The fingerprint of a set of parameters: for each parameter in name order, its name,
/// its length and the bits of its values. Equal fingerprints mean (up to hash collisions)
/// bit-identical parameters; print it as `{:016x}` to compare runs.
///
/// ```
/// use rlgrad_dist::params_fingerprint;
/// let a = params_fingerprint(&[("w", &[1.0f32, 2.0][..]), ("b", &[0.5][..])]);
/// let b = params_fingerprint(&[("b", &[0.5f32][..]), ("w", &[1.0, 2.0][..])]);
/// assert_eq!(a, b); // name order, not list order
/// assert_ne!(a, params_fingerprint(&[("w", &[1.0f32, 2.0][..]), ("b", &[-0.5][..])]));
/// ```
pub fn params_fingerprint<T: Float>(params: &[(&str, &[T])]) -> u64 {
    let mut sorted: Vec<&(&str, &[T])> = params.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Fingerprint::new();
    for (name, values) in sorted {
        h.write_u64(name.len() as u64);
        h.write(name.as_bytes());
        h.write_u64(values.len() as u64);
        h.write_floats(values);
    }
    h.finish()
}

/// A parameter as every rank must have it: its name and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSpec {
    /// The name, stable from step to step (`"critic.fc1.weight"`).
    pub name: String,
    /// The shape (row-major); the gradient has `shape.iter().product()` values.
    pub shape: Vec<usize>,
}

impl ParamSpec {
    /// A parameter named `name` of shape `shape`.
    pub fn new(name: impl Into<String>, shape: impl Into<Vec<usize>>) -> Self {
        Self {
            name: name.into(),
            shape: shape.into(),
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn hash(&self) -> u64 {
        let mut h = Fingerprint::new();
        h.write_u64(self.name.len() as u64);
        h.write(self.name.as_bytes());
        h.write_u64(self.shape.len() as u64);
        for &d in &self.shape {
            h.write_u64(d as u64);
        }
        h.finish()
    }
}

impl fmt::Display for ParamSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` {:?}", self.name, self.shape)
    }
}

fn dtype_tag(dtype: DType) -> u64 {
    match dtype {
        DType::F32 => 1,
        DType::F64 => 2,
        DType::U8 => 3,
        DType::U32 => 4,
        DType::I64 => 5,
        // A dtype added later gets a tag from its name: the same on every rank and build.
        other => {
            let mut h = Fingerprint::new();
            h.write(other.name().as_bytes());
            h.finish()
        }
    }
}

/// Checks that every rank has the same parameters (names, shapes, order) of the same
/// element type, before any gradient is reduced: a mismatch would otherwise add up
/// unrelated buffers. Costs one all-gather of 8 bytes per parameter; only when something
/// differs, a second one of the names and shapes, so that the error (the same on every
/// rank) names the first rank that differs from rank 0 and the parameter:
/// `check_same_params: argument `params` does not match: expected rank 0's parameter #1
/// `fc.bias` [4], got rank 2's `fc.bias` [3]`.
pub fn check_same_params<C: Collective + ?Sized>(
    comm: &C,
    params: &[ParamSpec],
    dtype: DType,
) -> Result<()> {
    let function = "check_same_params";
    let mut message = Vec::with_capacity(16 + 8 * params.len());
    put_u64(&mut message, dtype_tag(dtype));
    put_u64(&mut message, params.len() as u64);
    for p in params {
        put_u64(&mut message, p.hash());
    }
    let gathered = comm.all_gather(&message)?;
    let Some(rank) = gathered.iter().position(|m| *m != gathered[0]) else {
        return Ok(());
    };
    // Something differs: every rank sees it and takes part in the second round.
    let mut described = Vec::new();
    put_u64(&mut described, dtype_tag(dtype));
    let text = format!(
        "{dtype}\n{}",
        params.iter().map(|p| format!("{p}\n")).collect::<String>()
    );
    described.extend_from_slice(text.as_bytes());
    let all = comm.all_gather(&described)?;
    let read = |from: usize| -> Result<Vec<String>> {
        let mut reader = Reader::new(&all[from], function, from);
        reader.u64()?;
        Ok(String::from_utf8_lossy(reader.rest())
            .lines()
            .map(str::to_owned)
            .collect())
    };
    let (zero, other) = (read(0)?, read(rank)?);
    if zero[0] != other[0] {
        return Err(Error::state(
            function,
            "dtype",
            format_args!("rank 0's element type {}", zero[0]),
            format_args!("{} on rank {rank}", other[0]),
        ));
    }
    let (zero, other) = (&zero[1..], &other[1..]);
    match zero.iter().zip(other).position(|(a, b)| a != b) {
        Some(i) => Err(Error::state(
            function,
            "params",
            format_args!("rank 0's parameter #{i} {}", zero[i]),
            format_args!("rank {rank}'s {}", other[i]),
        )),
        None => {
            let (longer, missing) = if zero.len() > other.len() {
                (0, &zero[other.len()])
            } else {
                (rank, &other[zero.len()])
            };
            Err(Error::state(
                function,
                "params",
                format_args!("{} parameters, as on rank 0", zero.len()),
                format_args!(
                    "{} on rank {rank} (parameter #{} {missing} is only on rank {longer})",
                    other.len(),
                    zero.len().min(other.len())
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Local;

    fn specs(rank: usize, variant: usize) -> Vec<ParamSpec> {
        let mut v = vec![
            ParamSpec::new("fc.weight", [4, 3]),
            ParamSpec::new("fc.bias", [4]),
        ];
        if rank == 2 {
            match variant {
                1 => v[1].shape = vec![3],
                2 => v.push(ParamSpec::new("extra", [1])),
                3 => v[0].name = "fc.w".to_owned(),
                _ => {}
            }
        }
        v
    }

    #[test]
    fn equal_lists_pass_and_a_mismatch_names_rank_and_parameter() {
        let run = |variant| {
            Local::run(4, Local::DEFAULT_TIMEOUT, |c| {
                check_same_params(c, &specs(c.rank(), variant), DType::F32)
            })
        };
        run(0).unwrap();
        let err = run(1).unwrap_err().to_string();
        assert!(
            err.contains("rank 0's parameter #1 `fc.bias` [4], got rank 2's `fc.bias` [3]"),
            "{err}"
        );
        let err = run(2).unwrap_err().to_string();
        assert!(
            err.contains("parameter #2 `extra` [1] is only on rank 2"),
            "{err}"
        );
        let err = run(3).unwrap_err().to_string();
        assert!(
            err.contains("#0 `fc.weight` [4, 3], got rank 2's `fc.w` [4, 3]"),
            "{err}"
        );
        let err = Local::run(2, Local::DEFAULT_TIMEOUT, |c| {
            let dtype = if c.rank() == 1 {
                DType::F64
            } else {
                DType::F32
            };
            check_same_params(c, &specs(0, 0), dtype)
        })
        .unwrap_err();
        assert_eq!(err.argument(), Some("dtype"));
        assert!(err.to_string().contains("f64 on rank 1"), "{err}");
    }
}
