//! [`Checkpoint`]: named tensors and string metadata, in memory and as safetensors files.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use rlgrad_core::{Error, Result, Rng, RngState};

use crate::atomic;
use crate::dtype::{Dtype, Scalar};
use crate::restore::Restore;

/// Metadata keys starting with this are written by rlgrad itself (optimizer state).
pub(crate) const RESERVED_PREFIX: &str = "rlgrad.";

/// Bytes of the header-length prefix of a safetensors file.
const HEADER_LEN_BYTES: usize = 8;

/// The name safetensors reserves for its metadata map.
const SAFETENSORS_METADATA: &str = "__metadata__";

/// Words of a stored RNG position: seed, stream key, draws, has-spare flag, spare bits.
pub(crate) const RNG_WORDS: usize = 5;

/// A stored tensor's element type and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The element type.
    pub dtype: Dtype,
    /// The shape, row-major; `[]` for a scalar.
    pub shape: Vec<usize>,
}

impl fmt::Display for TensorInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.dtype, self.shape)
    }
}

/// One stored tensor: its type, shape and little-endian bytes.
#[derive(Clone, PartialEq)]
pub(crate) struct Stored {
    pub(crate) info: TensorInfo,
    pub(crate) bytes: Vec<u8>,
}

impl safetensors::View for &Stored {
    fn dtype(&self) -> safetensors::Dtype {
        self.info.dtype.to_safetensors()
    }
    fn shape(&self) -> &[usize] {
        &self.info.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// A set of named tensors and string metadata: everything a training run needs to resume.
///
/// Names are hierarchical by convention (`actor/l1/weight`, `optim/actor/l1/weight/m`,
/// `rng/explore`) and unique: putting a name twice is an error, so two components of a
/// run cannot silently overwrite each other. Values are kept as their little-endian bytes,
/// so a round trip through [`Checkpoint::to_bytes`] / [`Checkpoint::from_bytes`] or a file
/// is bit-identical. Files are [safetensors]: `safetensors.numpy.load_file` and
/// `safetensors.torch.load_file` open them, and this crate opens theirs.
///
/// Restoring into a training run's state goes through a [`Restore`] plan, which checks
/// every name, dtype and shape before it writes anything and reports every mismatch in one
/// error.
///
/// ```
/// use rlgrad_checkpoint::{Checkpoint, Restore};
/// use rlgrad_core::Rng;
///
/// let mut weight = vec![0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75];
/// let mut noise = Rng::new(7, "explore");
/// noise.normal_f64();
///
/// let mut checkpoint = Checkpoint::new();
/// checkpoint.put("actor/l1/weight", &[2, 3], &weight)?;
/// checkpoint.put_scalar("progress/env_step", 123_456u64)?;
/// checkpoint.put_rng("rng/explore", &noise)?;
/// checkpoint.set_metadata("config", r#"{"lr": 0.001}"#)?;
/// let bytes = checkpoint.to_bytes()?;
///
/// let loaded = Checkpoint::from_bytes(&bytes)?;
/// let (mut restored, mut env_step, mut resumed) = (vec![0.0f32; 6], 0u64, Rng::new(0, ""));
/// let mut plan = Restore::new();
/// plan.slice("actor/l1/weight", &[2, 3], &mut restored)
///     .scalar("progress/env_step", &mut env_step)
///     .rng("rng/explore", &mut resumed);
/// loaded.restore(plan)?;
/// assert_eq!(restored, weight);
/// assert_eq!(env_step, 123_456);
/// assert_eq!(resumed.normal_f64().to_bits(), noise.normal_f64().to_bits());
/// assert_eq!(loaded.metadata("config"), Some(r#"{"lr": 0.001}"#));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
///
/// [safetensors]: https://huggingface.co/docs/safetensors
#[derive(Clone, Default, PartialEq)]
pub struct Checkpoint {
    tensors: BTreeMap<String, Stored>,
    metadata: BTreeMap<String, String>,
}

impl fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checkpoint")
            .field(
                "tensors",
                &self
                    .tensors
                    .iter()
                    .map(|(name, stored)| (name, &stored.info))
                    .collect::<BTreeMap<_, _>>(),
            )
            .field("metadata", &self.metadata)
            .finish()
    }
}

fn numel(function: &'static str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| {
            Error::shape(
                function,
                "shape",
                "a shape whose element count fits in usize",
                format_args!("{shape:?}"),
            )
        })
}

/// Element count of `shape`, `None` on overflow (shapes read from files).
pub(crate) fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

impl Checkpoint {
    /// An empty checkpoint.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `data` (row-major) under `name` with `shape`. An error when `name` is empty,
    /// is safetensors' reserved `__metadata__` or is already stored, or when `data` does
    /// not hold exactly the elements of `shape`.
    pub fn put<T: Scalar>(&mut self, name: &str, shape: &[usize], data: &[T]) -> Result<()> {
        const FUNCTION: &str = "Checkpoint::put";
        let expected = numel(FUNCTION, shape)?;
        if data.len() != expected {
            return Err(Error::shape(
                FUNCTION,
                "data",
                format_args!("{expected} elements for shape {shape:?}"),
                format_args!("{} elements", data.len()),
            ));
        }
        let mut bytes = Vec::new();
        T::extend_le_bytes(data, &mut bytes);
        self.insert(FUNCTION, name, T::DTYPE, shape.to_vec(), bytes)
    }

    /// Stores one value under `name` with shape `[]` (a step counter as `u64`, never as a
    /// float). Errors as [`Checkpoint::put`].
    pub fn put_scalar<T: Scalar>(&mut self, name: &str, value: T) -> Result<()> {
        self.put(name, &[], &[value])
    }

    /// Stores the position of `rng` under `name` as 5 `u64`s: seed, stream key, draws, a
    /// 0/1 flag for a pending normal sample and that sample's bits (see
    /// [`RngState`]). Errors as [`Checkpoint::put`].
    pub fn put_rng(&mut self, name: &str, rng: &Rng) -> Result<()> {
        let state = rng.state();
        let words: [u64; RNG_WORDS] = [
            state.seed,
            state.stream_key,
            state.draws,
            u64::from(state.spare_normal.is_some()),
            state.spare_normal.unwrap_or(0),
        ];
        self.put(name, &[RNG_WORDS], &words)
    }

    pub(crate) fn insert(
        &mut self,
        function: &'static str,
        name: &str,
        dtype: Dtype,
        shape: Vec<usize>,
        bytes: Vec<u8>,
    ) -> Result<()> {
        check_name(function, name)?;
        if self.tensors.contains_key(name) {
            return Err(Error::value(
                function,
                "name",
                "a name not yet in the checkpoint",
                format_args!("`{name}`, which is already stored"),
            ));
        }
        self.tensors.insert(
            name.to_owned(),
            Stored {
                info: TensorInfo { dtype, shape },
                bytes,
            },
        );
        Ok(())
    }

    /// Whether a tensor named `name` is stored.
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The stored tensors' names, in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The element type and shape of tensor `name`, if it is stored.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name).map(|stored| &stored.info)
    }

    pub(crate) fn stored(&self, name: &str) -> Option<&Stored> {
        self.tensors.get(name)
    }

    /// The values of tensor `name`, which must be stored as `T` with exactly `shape`
    /// (use [`Checkpoint::tensor_info`] to learn a shape first). An error naming what is
    /// stored otherwise.
    pub fn read<T: Scalar>(&self, name: &str, shape: &[usize]) -> Result<Vec<T>> {
        let stored = self.matching("Checkpoint::read", name, T::DTYPE, shape)?;
        let mut out = vec![T::default(); stored.bytes.len() / T::DTYPE.size_in_bytes()];
        T::decode_le_bytes(&stored.bytes, &mut out);
        Ok(out)
    }

    /// The value of scalar `name` (shape `[]`, stored as `T`).
    pub fn read_scalar<T: Scalar>(&self, name: &str) -> Result<T> {
        let stored = self.matching("Checkpoint::read_scalar", name, T::DTYPE, &[])?;
        let mut out = [T::default()];
        T::decode_le_bytes(&stored.bytes, &mut out);
        Ok(out[0])
    }

    fn matching(
        &self,
        function: &'static str,
        name: &str,
        dtype: Dtype,
        shape: &[usize],
    ) -> Result<&Stored> {
        let wanted = || format_args!("`{name}` as {dtype} {shape:?}").to_string();
        let stored = self
            .tensors
            .get(name)
            .ok_or_else(|| Error::state(function, "name", wanted(), "no tensor of that name"))?;
        if stored.info.dtype != dtype || stored.info.shape != shape {
            return Err(Error::state(function, "name", wanted(), &stored.info));
        }
        Ok(stored)
    }

    /// Sets the metadata entry `key` (environment step, wall time, a JSON config: any
    /// string). An error for keys starting with `rlgrad.`, which rlgrad itself writes.
    pub fn set_metadata(&mut self, key: &str, value: impl Into<String>) -> Result<()> {
        if key.starts_with(RESERVED_PREFIX) {
            return Err(Error::value(
                "Checkpoint::set_metadata",
                "key",
                format_args!("a key not starting with `{RESERVED_PREFIX}`"),
                format_args!("`{key}`"),
            ));
        }
        self.metadata.insert(key.to_owned(), value.into());
        Ok(())
    }

    /// The metadata entry `key`, rlgrad's own entries (`rlgrad.*`) included.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// Every metadata entry, sorted by key.
    pub fn metadata_entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub(crate) fn set_reserved_metadata(&mut self, key: String, value: String) {
        debug_assert!(key.starts_with(RESERVED_PREFIX));
        self.metadata.insert(key, value);
    }

    /// The safetensors encoding: an 8-byte header length, a JSON header (names, dtypes,
    /// shapes, offsets, and the metadata under `__metadata__`), then the tensors' bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let metadata = (!self.metadata.is_empty()).then(|| {
            self.metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<HashMap<_, _>>()
        });
        safetensors::serialize(self.tensors.iter(), metadata).map_err(|e| {
            Error::value(
                "Checkpoint::to_bytes",
                "self",
                "tensors and metadata safetensors can encode",
                e,
            )
        })
    }

    /// Decodes a safetensors file's bytes (written by rlgrad, NumPy, PyTorch...). An error,
    /// never a panic, for bytes that are not a complete, consistent safetensors file or
    /// that hold an element type without a [`Dtype`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::decode(bytes).map_err(|why| {
            Error::value(
                "Checkpoint::from_bytes",
                "bytes",
                "a complete safetensors file",
                why,
            )
        })
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        // `read_metadata` checks the header: JSON, dtypes, shapes without overflow, data
        // offsets contiguous from 0 and ending exactly at the end of `bytes`.
        let (header_len, header) =
            safetensors::SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
        let outside = || "data offsets outside the file".to_owned();
        let data = HEADER_LEN_BYTES
            .checked_add(header_len)
            .and_then(|start| bytes.get(start..))
            .ok_or_else(outside)?;
        let mut checkpoint = Self::new();
        for (name, info) in header.tensors() {
            let dtype = Dtype::from_safetensors(info.dtype)
                .ok_or_else(|| format!("tensor `{name}` has unsupported dtype {}", info.dtype))?;
            let (start, end) = info.data_offsets;
            let values = data.get(start..end).ok_or_else(outside)?;
            checkpoint
                .insert(
                    "Checkpoint::from_bytes",
                    &name,
                    dtype,
                    info.shape.clone(),
                    values.to_vec(),
                )
                .map_err(|e| e.to_string())?;
        }
        if let Some(metadata) = header.metadata() {
            checkpoint.metadata = metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
        Ok(checkpoint)
    }

    /// Writes the checkpoint to `path` atomically: a temporary file in the same directory
    /// is written, synced to disk and renamed over `path`, then the directory is synced.
    /// A crash at any point leaves `path` with its previous content or the new one, never
    /// a mix. On an error no temporary file stays and `path` is untouched, unless only
    /// the final directory sync failed (the error says so; the new content is in place).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        atomic::write("Checkpoint::save", path.as_ref(), &self.to_bytes()?)
    }

    /// Reads a safetensors file. An error for a missing or unreadable file and as
    /// [`Checkpoint::from_bytes`] for its content, naming the file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes =
            std::fs::read(path).map_err(|e| Error::io("Checkpoint::load", "read", path, &e))?;
        Self::decode(&bytes).map_err(|why| {
            Error::value(
                "Checkpoint::load",
                "path",
                "a complete safetensors file",
                format_args!("`{}`: {why}", path.display()),
            )
        })
    }

    /// Writes the stored values into the plan's targets after checking every one of them:
    /// each target's name must be stored with its dtype and shape, and every stored tensor
    /// must be some target's (unless the plan allows missing or extra entries). All
    /// mismatches are reported in one [`Error::State`]; then nothing was written.
    ///
    /// Targets are matched by name only; their order in the plan does not matter.
    /// Optimizers load first, each through its own `load_state`, which changes nothing on
    /// error; should a second optimizer refuse its state, the first one keeps the state it
    /// loaded, and no other target is written.
    pub fn restore(&self, plan: Restore<'_>) -> Result<()> {
        plan.apply_from(self)
    }
}

/// Decodes an RNG position stored by [`Checkpoint::put_rng`]; `None` for a flag other
/// than 0 or 1.
pub(crate) fn rng_state(words: &[u64; RNG_WORDS]) -> Option<RngState> {
    let [seed, stream_key, draws, has_spare, spare] = *words;
    let spare_normal = match has_spare {
        0 => None,
        1 => Some(spare),
        _ => return None,
    };
    Some(RngState {
        seed,
        stream_key,
        draws,
        spare_normal,
    })
}

pub(crate) const RNG_SHAPE: [usize; 1] = [RNG_WORDS];

fn check_name(function: &'static str, name: &str) -> Result<()> {
    if name.is_empty() || name == SAFETENSORS_METADATA {
        return Err(Error::value(
            function,
            "name",
            format_args!("a non-empty name other than `{SAFETENSORS_METADATA}`"),
            format_args!("`{name}`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        let mut c = Checkpoint::new();
        c.put(
            "actor/l1/weight",
            &[2, 3],
            &[1.0f32, 2.0, 3.0, 4.0, 5.0, -0.0],
        )
        .unwrap();
        c.put("actor/l1/bias", &[3], &[f64::NAN, 1e-300, -7.0])
            .unwrap();
        c.put_scalar("optim/step", u64::MAX).unwrap();
        c.put("counts", &[2, 2], &[-1i32, 0, 1, i32::MAX]).unwrap();
        c.put("mask", &[4], &[0u8, 1, 1, 0]).unwrap();
        c.set_metadata("env_step", "1000").unwrap();
        c
    }

    #[test]
    fn bytes_round_trip_is_bit_identical() {
        let c = sample();
        let back = Checkpoint::from_bytes(&c.to_bytes().unwrap()).unwrap();
        assert_eq!(back.tensors.len(), c.tensors.len());
        for (name, stored) in &c.tensors {
            assert!(back.tensors[name] == *stored, "{name}");
        }
        assert_eq!(back.metadata, c.metadata);
        assert_eq!(back.read_scalar::<u64>("optim/step").unwrap(), u64::MAX);
        let bias: Vec<f64> = back.read("actor/l1/bias", &[3]).unwrap();
        assert!(bias[0].is_nan());
        assert_eq!(bias[1].to_bits(), 1e-300f64.to_bits());
    }

    #[test]
    fn put_refuses_duplicates_bad_names_and_wrong_lengths() {
        let mut c = sample();
        let e = c.put("mask", &[1], &[0u8]).unwrap_err();
        assert!(e.to_string().contains("already stored"), "{e}");
        assert!(c.put("", &[1], &[0u8]).is_err());
        assert!(c.put("__metadata__", &[1], &[0u8]).is_err());
        let e = c.put("x", &[2, 3], &[0.0f32; 5]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Checkpoint::put: argument `data` has the wrong shape: expected 6 elements for shape [2, 3], got 5 elements"
        );
        assert!(c.put("x", &[usize::MAX, 2], &[0.0f32]).is_err());
        assert!(c.set_metadata("rlgrad.optimizer:x", "{}").is_err());
    }

    #[test]
    fn read_names_what_is_stored() {
        let c = sample();
        let e = c.read::<f64>("actor/l1/weight", &[2, 3]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Checkpoint::read: argument `name` does not match: expected `actor/l1/weight` as F64 [2, 3], got F32 [2, 3]"
        );
        assert!(c.read::<f32>("actor/l1/weight", &[3, 2]).is_err());
        assert!(c.read::<f32>("nope", &[1]).is_err());
        assert!(c.read_scalar::<f64>("optim/step").is_err());
    }

    #[test]
    fn rng_positions_need_a_0_or_1_flag() {
        assert!(rng_state(&[1, 2, 3, 0, 9]).is_some_and(|s| s.spare_normal.is_none()));
        assert_eq!(rng_state(&[1, 2, 3, 1, 9]).unwrap().spare_normal, Some(9));
        assert!(rng_state(&[1, 2, 3, 2, 9]).is_none());
    }

    #[test]
    fn files_save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.safetensors");
        let c = sample();
        c.save(&path).unwrap();
        assert!(Checkpoint::load(&path).unwrap() == c);
        let e = Checkpoint::load(dir.path().join("missing")).unwrap_err();
        assert!(
            e.to_string().starts_with("Checkpoint::load: cannot read"),
            "{e}"
        );
        std::fs::write(&path, b"not a checkpoint").unwrap();
        let e = Checkpoint::load(&path).unwrap_err();
        assert!(e.to_string().contains("c.safetensors"), "{e}");
    }
}
