//! [`Checkpoint`]: named tensors and string metadata, in memory and as safetensors files.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::Path;

use rlgrad_core::{Error, Result, Rng, RngState};

use crate::atomic;
use crate::dtype::{Dtype, Scalar};

/// Metadata keys starting with this are written by rlgrad itself (optimizer state).
pub(crate) const RESERVED_PREFIX: &str = "rlgrad.";

/// Bytes of the header-length prefix of a safetensors file.
const HEADER_LEN_BYTES: usize = 8;

/// The longest JSON header safetensors reads (its `MAX_HEADER_SIZE`); a longer one would
/// give a file nobody can open.
const MAX_HEADER_BYTES: usize = 100_000_000;

/// Metadata entry holding the CRC32C of every tensor's bytes, as the JSON object
/// `{"NAME": "8 hex digits", ...}`.
const TENSOR_CRCS: &str = "rlgrad.tensor_crc32c";

/// Metadata entry holding the CRC32C of the file's header (see [`Checkpoint::sealed_header`]).
const HEADER_CRC: &str = "rlgrad.header_crc32c";

/// What a file's bytes must be, in the errors of `load` and `from_bytes`.
const INTACT_FILE: &str = "an intact safetensors file";

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

impl Stored {
    /// The CRC32C of the bytes, as stored in [`TENSOR_CRCS`].
    fn crc(&self) -> String {
        hex(crc32c::crc32c(&self.bytes))
    }
}

fn hex(crc: u32) -> String {
    format!("{crc:08x}")
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
/// Restoring into a training run's state goes through a [`Restore`](crate::Restore) plan, which checks
/// every name, dtype and shape before it writes anything and reports every mismatch in one
/// error.
///
/// **Integrity**: every file rlgrad writes carries CRC32C checksums of each tensor and of
/// its header, checked when it is read ([`Checkpoint::load`], [`Checkpoint::from_bytes`]),
/// so that any single changed byte anywhere in it (data, names, shapes, metadata, even the
/// header's padding) is an error naming the file and, for tensor data, the tensor; files
/// without checksums (written by Python's `safetensors` or an older rlgrad) load
/// unverified, which [`Checkpoint::is_verified`] reports.
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
/// assert!(loaded.is_verified());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
///
/// [safetensors]: https://huggingface.co/docs/safetensors
#[derive(Clone, Default)]
pub struct Checkpoint {
    tensors: BTreeMap<String, Stored>,
    metadata: BTreeMap<String, String>,
    verified: bool,
    /// Entries stored 1-d that take the shape of the entry named by the key when it is
    /// stored with as many elements: an optimizer's slots put before their parameter
    /// (see [`Checkpoint::reshape_when_stored`]).
    shaped_later: BTreeMap<String, Vec<String>>,
}

impl PartialEq for Checkpoint {
    /// Same tensors and metadata, however they were checked when read.
    fn eq(&self, other: &Self) -> bool {
        self.tensors == other.tensors && self.metadata == other.metadata
    }
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
            .field("verified", &self.verified)
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
        for follower in self.shaped_later.remove(name).unwrap_or_default() {
            if let Some(stored) = self.tensors.get_mut(&follower)
                && checked_numel(&stored.info.shape) == checked_numel(&shape)
            {
                stored.info.shape.clone_from(&shape);
            }
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

    /// Gives the stored entry `follower` the shape of entry `leader` when `leader` is
    /// stored later with as many elements (row-major, so the bytes stay as they are): an
    /// optimizer's slots take their parameter's shape whichever is put first.
    #[cfg_attr(not(feature = "optim"), allow(dead_code))]
    pub(crate) fn reshape_when_stored(&mut self, leader: &str, follower: &str) {
        self.shaped_later
            .entry(leader.to_owned())
            .or_default()
            .push(follower.to_owned());
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

    #[cfg_attr(not(feature = "optim"), allow(dead_code))]
    pub(crate) fn set_reserved_metadata(&mut self, key: String, value: String) {
        debug_assert!(key.starts_with(RESERVED_PREFIX));
        self.metadata.insert(key, value);
    }

    /// The safetensors encoding: an 8-byte header length, a JSON header (names, dtypes,
    /// shapes, offsets, and the metadata under `__metadata__`, rlgrad's checksums
    /// included), then the tensors' bytes. A checkpoint has exactly one encoding: the
    /// same tensors and metadata always give the same bytes. An error when the header
    /// would be longer than safetensors reads (100 MB).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let (mut bytes, _) = self.sealed_header(self.tensor_crcs());
        let header_len = bytes.len() - HEADER_LEN_BYTES;
        if header_len > MAX_HEADER_BYTES {
            return Err(Error::value(
                "Checkpoint::to_bytes",
                "self",
                format_args!("a header of at most {MAX_HEADER_BYTES} bytes (safetensors' limit)"),
                format_args!("{header_len} bytes"),
            ));
        }
        let order = self.file_order();
        bytes.reserve(order.iter().map(|(_, stored)| stored.bytes.len()).sum());
        for (_, stored) in order {
            bytes.extend_from_slice(&stored.bytes);
        }
        Ok(bytes)
    }

    /// The tensors in the order of their bytes in a file: wider elements first, so that
    /// each tensor starts at a multiple of its element size (the header is padded to a
    /// multiple of 8 bytes), then by name.
    fn file_order(&self) -> Vec<(&String, &Stored)> {
        let mut order: Vec<_> = self.tensors.iter().collect();
        // Stable, so tensors of one width keep the name order of the map.
        order.sort_by_key(|(_, stored)| Reverse(stored.info.dtype.size_in_bytes()));
        order
    }

    /// The value of the [`TENSOR_CRCS`] entry for the stored tensors.
    fn tensor_crcs(&self) -> String {
        let crcs: BTreeMap<&str, String> = self
            .tensors
            .iter()
            .map(|(name, stored)| (name.as_str(), stored.crc()))
            .collect();
        serde_json::to_string(&crcs).expect("a map of strings serializes")
    }

    /// The header of this checkpoint's file whose [`TENSOR_CRCS`] entry is `tensor_crcs`,
    /// and its [`HEADER_CRC`] entry: the CRC32C of the header (length, JSON, padding)
    /// rlgrad writes for the same content without that entry. Leaving the entry out,
    /// rather than checksumming the bytes around it, works because the header is a
    /// function of the content (see [`Checkpoint::header`]): a reader rebuilds it.
    fn sealed_header(&self, tensor_crcs: String) -> (Vec<u8>, String) {
        let mut metadata = self.metadata.clone();
        metadata.insert(TENSOR_CRCS.to_owned(), tensor_crcs);
        let header_crc = hex(crc32c::crc32c(&self.header(&metadata)));
        metadata.insert(HEADER_CRC.to_owned(), header_crc.clone());
        (self.header(&metadata), header_crc)
    }

    /// The header of a file of these tensors with `metadata`: the 8-byte length, then
    /// compact JSON (`__metadata__` sorted by key, then the tensors in file order) padded
    /// with spaces to a multiple of 8 bytes. Written here, not by
    /// `safetensors::serialize`, which orders the metadata differently in every process,
    /// so that verification can rebuild a header byte for byte.
    fn header(&self, metadata: &BTreeMap<String, String>) -> Vec<u8> {
        let quoted = |s: &str| serde_json::to_string(s).expect("strings serialize");
        let entries: Vec<String> = metadata
            .iter()
            .map(|(key, value)| format!("{}:{}", quoted(key), quoted(value)))
            .collect();
        let mut json = format!("{{\"{SAFETENSORS_METADATA}\":{{{}}}", entries.join(","));
        let mut offset = 0;
        for (name, stored) in self.file_order() {
            let end = offset + stored.bytes.len();
            let shape: Vec<String> = stored.info.shape.iter().map(usize::to_string).collect();
            write!(
                json,
                ",{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
                quoted(name),
                stored.info.dtype,
                shape.join(",")
            )
            .expect("writing to a String cannot fail");
            offset = end;
        }
        json.push('}');
        let padded_len = json.len().next_multiple_of(HEADER_LEN_BYTES);
        let mut header = (padded_len as u64).to_le_bytes().to_vec();
        header.extend_from_slice(json.as_bytes());
        header.resize(HEADER_LEN_BYTES + padded_len, b' ');
        header
    }

    /// Decodes a safetensors file's bytes (written by rlgrad, NumPy, PyTorch...). An error,
    /// never a panic, for bytes that are not a complete, consistent safetensors file, that
    /// hold an element type without a [`Dtype`], or that fail rlgrad's checksums (see
    /// [`Checkpoint::is_verified`]; the error names the tensor, or the header, at fault).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::decode(bytes)
            .map_err(|why| Error::value("Checkpoint::from_bytes", "bytes", INTACT_FILE, why))
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        // `read_metadata` checks the header: JSON, dtypes, shapes without overflow, data
        // offsets contiguous from 0 and ending exactly at the end of `bytes`.
        let (header_len, header) =
            safetensors::SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
        let outside = || "data offsets outside the file".to_owned();
        let (file_header, data) = HEADER_LEN_BYTES
            .checked_add(header_len)
            .and_then(|end| bytes.split_at_checked(end))
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
        checkpoint.verify(file_header)?;
        Ok(checkpoint)
    }

    /// Checks a decoded file against rlgrad's checksums, which it takes out of the
    /// metadata, and records that it did; a file without them stays unverified.
    ///
    /// The header must be byte for byte the one rlgrad writes for its content, and that
    /// content must have the stored header CRC: a change of content (a name, a shape, a
    /// metadata value, a checksum) fails the CRC, and a change that keeps the content
    /// (spacing, padding, an escape) fails the comparison. Then each tensor's bytes must
    /// have their CRC. A file with one of the two entries but not the other is corrupted:
    /// a byte flipped in an entry's key must not turn a checked file into an unchecked one.
    fn verify(&mut self, file_header: &[u8]) -> std::result::Result<(), String> {
        let corrupted = |what: String| format!("{what}: the file is corrupted");
        let stored = (
            self.metadata.remove(HEADER_CRC),
            self.metadata.remove(TENSOR_CRCS),
        );
        let (header_crc, tensor_crcs) = match stored {
            (None, None) => return Ok(()),
            (Some(header_crc), Some(tensor_crcs)) => (header_crc, tensor_crcs),
            (header_crc, _) => {
                let (has, lacks) = match header_crc {
                    Some(_) => (HEADER_CRC, TENSOR_CRCS),
                    None => (TENSOR_CRCS, HEADER_CRC),
                };
                return Err(corrupted(format!(
                    "the metadata has `{has}` but not `{lacks}`"
                )));
            }
        };
        let (header, computed) = self.sealed_header(tensor_crcs.clone());
        if header_crc != computed {
            return Err(corrupted(format!(
                "the header: CRC32C 0x{header_crc} expected (stored in the header), 0x{computed} computed"
            )));
        }
        if header != file_header {
            return Err(corrupted(
                "the header: its bytes differ from those rlgrad writes for its content (or \
                 another tool rewrote it, keeping rlgrad's checksums)"
                    .to_owned(),
            ));
        }
        // Past the header CRC, the entry is the one rlgrad wrote, unless it was forged.
        let crcs: BTreeMap<String, String> = serde_json::from_str(&tensor_crcs)
            .map_err(|e| corrupted(format!("`{TENSOR_CRCS}` is not a map of checksums: {e}")))?;
        if !crcs.keys().eq(self.tensors.keys()) {
            return Err(corrupted(format!(
                "`{TENSOR_CRCS}` does not list exactly the stored tensors"
            )));
        }
        for ((name, stored), expected) in self.tensors.iter().zip(crcs.values()) {
            let computed = stored.crc();
            if *expected != computed {
                return Err(corrupted(format!(
                    "tensor `{name}`: CRC32C 0x{expected} expected (stored in the header), 0x{computed} computed"
                )));
            }
        }
        self.verified = true;
        Ok(())
    }

    /// Whether this checkpoint was read from a file whose rlgrad checksums all matched,
    /// as every file rlgrad writes has them. `false` for a file without checksums
    /// (written by Python's `safetensors` or an older rlgrad), whose content nothing
    /// vouches for, and for a checkpoint built in memory.
    pub fn is_verified(&self) -> bool {
        self.verified
    }

    /// Writes the checkpoint to `path` atomically: a temporary file in the same directory
    /// is written, synced to disk and renamed over `path`, then the directory is synced.
    /// A crash at any point leaves `path` with its previous content or the new one, never
    /// a mix. On an error no temporary file stays and `path` is untouched, unless only
    /// the final directory sync failed (the error says so; the new content is in place).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        atomic::write("Checkpoint::save", path.as_ref(), &self.to_bytes()?)
    }

    /// Reads a safetensors file and checks it as [`Checkpoint::from_bytes`] does. An error
    /// naming the file when it is missing, unreadable or not intact (then also naming the
    /// tensor, or the header, whose checksum failed).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes =
            std::fs::read(path).map_err(|e| Error::io("Checkpoint::load", "read", path, e))?;
        Self::decode(&bytes).map_err(|why| {
            Error::value(
                "Checkpoint::load",
                "path",
                INTACT_FILE,
                format_args!("`{}`: {why}", path.display()),
            )
        })
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

    /// The message of `Checkpoint::from_bytes(bytes)`'s error.
    fn refusal(bytes: &[u8]) -> String {
        Checkpoint::from_bytes(bytes).unwrap_err().to_string()
    }

    /// `bytes` with the first occurrence of `from` replaced by `to` (of the same length).
    fn replaced(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
        let at = bytes
            .windows(from.len())
            .position(|w| w == from.as_bytes())
            .unwrap();
        let mut out = bytes.to_vec();
        out[at..at + to.len()].copy_from_slice(to.as_bytes());
        out
    }

    #[test]
    fn bytes_round_trip_is_bit_identical() {
        let c = sample();
        let bytes = c.to_bytes().unwrap();
        let back = Checkpoint::from_bytes(&bytes).unwrap();
        assert!(back.is_verified() && !c.is_verified());
        // One encoding per checkpoint, which a verified file already is.
        assert_eq!(back.to_bytes().unwrap(), bytes);
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
    fn header_changes_are_refused_whether_or_not_they_change_its_content() {
        let bytes = sample().to_bytes().unwrap();
        let e = refusal(&replaced(&bytes, r#""1000""#, r#""1001""#));
        assert!(e.contains("got the header: CRC32C 0x"), "{e}");
        assert!(e.ends_with(" computed: the file is corrupted"), "{e}");
        // JSON that parses to the same content, but not the bytes rlgrad writes.
        let header_end = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(
            bytes[header_end - 1],
            b' ',
            "the sample's header needs padding"
        );
        let mut tab = bytes.clone();
        tab[header_end - 1] = b'\t';
        assert!(
            refusal(&tab).ends_with(
                "got the header: its bytes differ from those rlgrad writes for its content (or another tool rewrote it, keeping rlgrad's checksums): the file is corrupted"
            ),
            "{}",
            refusal(&tab)
        );
    }

    #[test]
    fn a_checksum_entry_without_the_other_is_corruption() {
        let bytes = sample().to_bytes().unwrap();
        let e = refusal(&replaced(
            &bytes,
            "rlgrad.header_crc32c",
            "rlgrad.header_crc32x",
        ));
        assert!(
            e.ends_with("the metadata has `rlgrad.tensor_crc32c` but not `rlgrad.header_crc32c`: the file is corrupted"),
            "{e}"
        );
        let e = refusal(&replaced(
            &bytes,
            "rlgrad.tensor_crc32c",
            "rlgrad.tensor_crc32x",
        ));
        assert!(
            e.ends_with(
                "has `rlgrad.header_crc32c` but not `rlgrad.tensor_crc32c`: the file is corrupted"
            ),
            "{e}"
        );
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
