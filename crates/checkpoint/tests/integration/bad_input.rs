//! Truncated, corrupted and foreign files, wrong dtypes and shapes: always an `Err`,
//! never a panic, and a failed restore writes nothing. Files rlgrad writes are checksummed:
//! any byte changed in one is refused when it is loaded, naming the file.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use rlgrad_checkpoint::{Checkpoint, CheckpointManager, Restore};
use rlgrad_core::Rng;
use rlgrad_optim::{Adam, Optimizer, Param};
use rlgrad_testkit::strategies::config;

fn adam() -> Optimizer<f32> {
    Optimizer::new(Adam::torch(), 1e-3).unwrap()
}

/// A checkpoint with every kind of entry: tensors of several dtypes, an optimizer, an
/// RNG position, metadata.
fn valid_bytes() -> Vec<u8> {
    let mut optimizer = adam();
    let mut w = vec![0.5f32; 6];
    optimizer
        .step(&mut [Param {
            name: "actor/w",
            value: &mut w,
            grad: &[0.1; 6],
        }])
        .unwrap();
    let mut c = Checkpoint::new();
    c.put("actor/w", &[2, 3], &w).unwrap();
    c.put("actor/b", &[3], &[1.0f64, 2.0, 3.0]).unwrap();
    c.put("mask", &[4], &[1u8, 0, 1, 1]).unwrap();
    c.put_scalar("step", 7u64).unwrap();
    c.put_rng("rng", &Rng::new(1, "explore")).unwrap();
    c.put_optimizer("optim", &optimizer).unwrap();
    c.set_metadata("config", r#"{"lr":0.001}"#).unwrap();
    c.to_bytes().unwrap()
}

/// `bytes` rewritten by the safetensors crate without rlgrad's checksum entries, as Python
/// or an older rlgrad writes a file.
fn without_checksums(bytes: &[u8]) -> Vec<u8> {
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let metadata = header.metadata().clone().map(|entries| {
        entries
            .into_iter()
            .filter(|(key, _)| {
                !["rlgrad.header_crc32c", "rlgrad.tensor_crc32c"].contains(&key.as_str())
            })
            .collect()
    });
    let tensors = safetensors::SafeTensors::deserialize(bytes)
        .unwrap()
        .tensors();
    safetensors::serialize(tensors.iter().map(|(name, view)| (name, view)), metadata).unwrap()
}

/// Flips one bit of the first data byte of tensor `name` in the file at `path`.
fn corrupt_tensor(path: &Path, name: &str) {
    let mut bytes = fs::read(path).unwrap();
    let (header_len, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let at = 8 + header_len + header.info(name).unwrap().data_offsets.0;
    bytes[at] ^= 0x10;
    fs::write(path, bytes).unwrap();
}

/// Restores a decoded checkpoint into targets shaped like `valid_bytes`'s; returns whether
/// it succeeded, and checks that a failure wrote nothing.
fn restore_all(c: &Checkpoint) -> bool {
    let (mut w, mut b, mut mask, mut step) = ([9.0f32; 6], [9.0f64; 3], [9u8; 4], 9u64);
    let mut rng = Rng::new(9, "untouched");
    let mut optimizer = adam();
    let mut plan = Restore::new();
    plan.slice("actor/w", &[2, 3], &mut w)
        .slice("actor/b", &[3], &mut b)
        .slice("mask", &[4], &mut mask)
        .scalar("step", &mut step)
        .rng("rng", &mut rng)
        .optimizer("optim", &mut optimizer);
    let ok = c.restore(plan).is_ok();
    if !ok {
        assert_eq!((w, b, mask, step), ([9.0; 6], [9.0; 3], [9; 4], 9));
        assert_eq!(rng.next_u64(), Rng::new(9, "untouched").next_u64());
        assert!(optimizer.state().unwrap().params.is_empty());
    }
    ok
}

#[test]
fn the_valid_file_restores() {
    let verified = Checkpoint::from_bytes(&valid_bytes()).unwrap();
    assert!(verified.is_verified());
    assert!(restore_all(&verified));
}

#[test]
fn a_flipped_data_byte_names_the_tensor_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.safetensors");
    fs::write(&path, valid_bytes()).unwrap();
    corrupt_tensor(&path, "actor/b");
    let e = Checkpoint::load(&path).unwrap_err().to_string();
    let file_and_tensor = format!(
        "Checkpoint::load: argument `path` is invalid: expected an intact safetensors file, got `{}`: tensor `actor/b`: CRC32C 0x",
        path.display()
    );
    assert!(e.starts_with(&file_and_tensor), "{e}");
    assert!(
        e.ends_with(" computed: the file is corrupted") && e.contains("(stored in the header)"),
        "{e}"
    );
}

#[test]
fn every_bit_of_every_byte_flipped_is_refused() {
    let bytes = valid_bytes();
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut damaged = bytes.clone();
            damaged[i] ^= 1 << bit;
            assert!(
                Checkpoint::from_bytes(&damaged).is_err(),
                "byte {i} bit {bit}"
            );
        }
    }
}

#[test]
fn a_file_without_checksums_loads_unverified() {
    let bytes = without_checksums(&valid_bytes());
    let unverified = Checkpoint::from_bytes(&bytes).unwrap();
    assert!(!unverified.is_verified());
    assert_eq!(unverified, Checkpoint::from_bytes(&valid_bytes()).unwrap());
    assert!(restore_all(&unverified));
    // Nothing vouches for its content: a flipped data byte goes unnoticed.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("python.safetensors");
    fs::write(&path, &bytes).unwrap();
    corrupt_tensor(&path, "actor/b");
    assert!(!Checkpoint::load(&path).unwrap().is_verified());
}

#[test]
fn restore_latest_names_a_corrupted_latest_file_and_does_not_fall_back() {
    let dir = tempfile::tempdir().unwrap();
    let manager = CheckpointManager::new(dir.path(), None).unwrap();
    for step in [1u64, 2] {
        let mut c = Checkpoint::new();
        c.put("w", &[2], &[step as f32; 2]).unwrap();
        manager.save(step, &c).unwrap();
    }
    let latest = manager.path_of(2);
    corrupt_tensor(&latest, "w");
    let mut w = [9.0f32; 2];
    let mut plan = Restore::new();
    plan.slice("w", &[2], &mut w);
    let e = manager.restore_latest(plan).unwrap_err().to_string();
    assert!(
        e.contains(&format!("`{}`: tensor `w`: CRC32C", latest.display())),
        "{e}"
    );
    assert_eq!(w, [9.0; 2]);
    // Going back to an older checkpoint is the caller's decision.
    let older = &manager.checkpoints().unwrap()[0];
    assert_eq!(
        Checkpoint::load(&older.path)
            .unwrap()
            .read::<f32>("w", &[2])
            .unwrap(),
        [1.0; 2]
    );
}

#[derive(Debug, Clone)]
enum Damage {
    Flip { at: prop::sample::Index, xor: u8 },
    Truncate(prop::sample::Index),
    Append(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(at, xor)| Damage::Flip { at, xor }),
        2 => any::<prop::sample::Index>().prop_map(Damage::Truncate),
        1 => prop::collection::vec(any::<u8>(), 1..16).prop_map(Damage::Append),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn prop_damaged_files_give_err_or_a_checked_checkpoint(
        damages in prop::collection::vec(damage(), 1..4),
        checksummed in any::<bool>(),
    ) {
        // Without checksums more damage decodes, for the restore checks to refuse.
        let mut bytes = valid_bytes();
        if !checksummed {
            bytes = without_checksums(&bytes);
        }
        for d in &damages {
            match d {
                Damage::Flip { at, xor } if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes[i] ^= xor;
                }
                Damage::Flip { .. } => {}
                Damage::Truncate(at) => bytes.truncate(at.index(bytes.len() + 1)),
                Damage::Append(extra) => bytes.extend_from_slice(extra),
            }
        }
        // Whatever decodes has passed safetensors' checks; restoring it is checked again.
        if let Ok(c) = Checkpoint::from_bytes(&bytes) {
            restore_all(&c);
            let _ = c.optimizer_state::<f32>("optim");
        }
    }

    #[test]
    fn prop_arbitrary_bytes_give_err_not_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(c) = Checkpoint::from_bytes(&bytes) {
            restore_all(&c);
        }
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// One byte changed anywhere in a file rlgrad saved (the header's length, its JSON and
    /// padding, user metadata, the checksums, tensor data) and the file no longer loads,
    /// so nothing is ever restored from it.
    #[test]
    fn prop_a_saved_file_with_any_byte_flipped_is_refused_at_load(
        weight in prop::collection::vec(any::<f32>(), 0..7),
        bias in prop::collection::vec(any::<f64>(), 1..4),
        ids in prop::collection::vec(any::<i16>(), 0..5),
        mask in prop::collection::vec(any::<u8>(), 0..6),
        step in any::<u64>(),
        note in any::<String>(),
        seed in any::<u64>(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let mut c = Checkpoint::new();
        c.put("actor/w", &[weight.len()], &weight).unwrap();
        c.put("actor/b", &[bias.len()], &bias).unwrap();
        c.put("buffer/ids", &[ids.len()], &ids).unwrap();
        c.put("buffer/mask", &[mask.len()], &mask).unwrap();
        c.put_scalar("progress/step", step).unwrap();
        let mut rng = Rng::new(seed, "explore");
        rng.normal_f64();
        c.put_rng("rng/explore", &rng).unwrap();
        c.put_optimizer("optim", &adam()).unwrap();
        c.set_metadata("note", note).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt.safetensors");
        c.save(&path).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let intact = Checkpoint::load(&path).unwrap();
        prop_assert!(intact.is_verified() && intact == c);
        prop_assert_eq!(&intact.to_bytes().unwrap(), &bytes);

        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        fs::write(&path, &bytes).unwrap();
        match Checkpoint::load(&path) {
            Err(e) => prop_assert!(e.to_string().contains(&format!("`{}`", path.display())), "{}", e),
            Ok(damaged) => prop_assert!(
                false,
                "byte {} ^ {:#04x} loaded (verified: {})",
                i,
                xor,
                damaged.is_verified()
            ),
        }
    }
}

#[test]
fn truncation_is_an_error_at_every_length() {
    let bytes = valid_bytes();
    for len in 0..bytes.len() {
        assert!(
            Checkpoint::from_bytes(&bytes[..len]).is_err(),
            "length {len}"
        );
    }
}

/// A safetensors file with `header` as its JSON header and `data` after it.
fn safetensors_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header.as_bytes().to_vec();
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn foreign_files_are_errors() {
    let foreign: [&[u8]; 7] = [
        b"",
        b"hello",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        b"PK\x03\x04 a zip archive",
        br#"{"actor/w": [1, 2, 3]}"#,
        &u64::MAX.to_le_bytes(),
        &[2, 0, 0, 0, 0, 0, 0, 0, b'[', b']'],
    ];
    for bytes in foreign {
        let e = Checkpoint::from_bytes(bytes).unwrap_err().to_string();
        assert!(
            e.starts_with("Checkpoint::from_bytes: argument `bytes` is invalid: expected an intact safetensors file"),
            "{e}"
        );
    }
    // The smallest valid file, `{}`, is an empty checkpoint, not an error.
    assert_eq!(
        Checkpoint::from_bytes(&safetensors_file("{}", &[])).unwrap(),
        Checkpoint::new()
    );
    let not_json = safetensors_file("{not json", &[]);
    assert!(Checkpoint::from_bytes(&not_json).is_err());
    let offsets_past_the_end = safetensors_file(
        r#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
        &[0; 8],
    );
    assert!(Checkpoint::from_bytes(&offsets_past_the_end).is_err());
    let overflowing_shape = safetensors_file(
        r#"{"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}"#,
        &[],
    );
    assert!(Checkpoint::from_bytes(&overflowing_shape).is_err());
}

#[test]
fn unsupported_dtypes_are_named() {
    let fp8 = safetensors_file(
        r#"{"x":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}"#,
        &[1, 2],
    );
    let e = Checkpoint::from_bytes(&fp8).unwrap_err().to_string();
    assert!(
        e.contains("tensor `x` has unsupported dtype F8_E4M3"),
        "{e}"
    );
}

#[test]
fn foreign_tensors_list_but_need_a_native_type_to_read() {
    let half = safetensors_file(
        r#"{"__metadata__":{"format":"pt"},"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}"#,
        &[0, 60, 0, 188],
    );
    let c = Checkpoint::from_bytes(&half).unwrap();
    assert!(!c.is_verified());
    assert_eq!(c.tensor_info("h").unwrap().to_string(), "F16 [2]");
    assert_eq!(c.metadata("format"), Some("pt"));
    let e = c.read::<f32>("h", &[2]).unwrap_err().to_string();
    assert!(e.ends_with("expected `h` as F32 [2], got F16 [2]"), "{e}");
}

#[test]
fn wrong_dtypes_and_shapes_are_all_reported_and_nothing_is_written() {
    let c = Checkpoint::from_bytes(&valid_bytes()).unwrap();
    let (mut w, mut b, mut step) = ([9.0f64; 6], [9.0f64; 2], 9u32);
    let mut rng = Rng::new(9, "untouched");
    let mut plan = Restore::new();
    plan.allow_extra(true)
        .slice("actor/w", &[2, 3], &mut w)
        .slice("actor/b", &[2], &mut b)
        .scalar("step", &mut step)
        .rng("mask", &mut rng);
    let e = c.restore(plan).unwrap_err().to_string();
    for expected in [
        "4 mismatches",
        "`actor/w`: expected F64 [2, 3], found F32 [2, 3]",
        "`actor/b`: expected F64 [2], found F64 [3]",
        "`step`: expected U32 [], found U64 []",
        "`mask`: expected U64 [5], found U8 [4]",
    ] {
        assert!(e.contains(expected), "{expected} not in {e}");
    }
    assert_eq!((w, b, step), ([9.0; 6], [9.0; 2], 9));
}
