//! A save into a directory that cannot be written is an error and leaves the previous
//! checkpoint intact, with no temporary file behind.
#![cfg(unix)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rlgrad_checkpoint::{Checkpoint, CheckpointManager};

fn checkpoint(value: f32) -> Checkpoint {
    let mut c = Checkpoint::new();
    c.put("w", &[3], &[value; 3]).unwrap();
    c
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join("probe");
    let created = fs::write(&probe, b"").is_ok();
    let _ = fs::remove_file(&probe);
    created
}

/// Makes `dir` unwritable while alive: read-only permissions, and for a process that
/// ignores permissions (root, as CI runs) the immutable attribute as well.
struct Unwritable {
    dir: PathBuf,
    immutable: bool,
}

impl Unwritable {
    fn new(dir: &Path) -> Option<Self> {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
        let mut guard = Self {
            dir: dir.to_path_buf(),
            immutable: false,
        };
        if writable(dir) {
            guard.immutable = Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success());
        }
        (!writable(dir)).then_some(guard)
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if self.immutable {
            let _ = Command::new("chattr").arg("-i").arg(&self.dir).status();
        }
        let _ = fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o755));
    }
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn a_save_into_an_unwritable_directory_keeps_the_previous_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let manager = CheckpointManager::new(dir.path(), Some(1)).unwrap();
    manager.save(1, &checkpoint(1.0)).unwrap();
    let single = dir.path().join("single.safetensors");
    checkpoint(1.0).save(&single).unwrap();
    let before = file_names(dir.path());

    let Some(guard) = Unwritable::new(dir.path()) else {
        eprintln!(
            "skipped: this process can write a read-only directory and `chattr +i` is not \
             available here"
        );
        return;
    };
    let e = manager.save(2, &checkpoint(2.0)).unwrap_err().to_string();
    assert!(
        e.starts_with("CheckpointManager::save: cannot create"),
        "{e}"
    );
    let e = checkpoint(2.0).save(&single).unwrap_err().to_string();
    assert!(e.starts_with("Checkpoint::save: cannot create"), "{e}");
    drop(guard);

    assert_eq!(file_names(dir.path()), before);
    let (number, latest) = manager.load_latest().unwrap().unwrap();
    assert_eq!(number, 1);
    assert_eq!(latest.read::<f32>("w", &[3]).unwrap(), [1.0; 3]);
    assert_eq!(
        Checkpoint::load(&single)
            .unwrap()
            .read::<f32>("w", &[3])
            .unwrap(),
        [1.0; 3]
    );
}

#[test]
fn a_directory_that_is_a_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, b"not a directory").unwrap();
    let e = CheckpointManager::new(file.join("run"), None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("CheckpointManager::new: cannot create"),
        "{e}"
    );
    let e = checkpoint(1.0)
        .save(file.join("c.safetensors"))
        .unwrap_err();
    assert!(
        e.to_string().starts_with("Checkpoint::save: cannot create"),
        "{e}"
    );
    assert_eq!(fs::read(&file).unwrap(), b"not a directory");
}
