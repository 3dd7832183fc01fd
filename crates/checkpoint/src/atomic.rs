//! Crash-safe file replacement: write a temporary file in the target's directory, flush
//! it to disk, rename it over the target, and flush the directory entry.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rlgrad_core::{Error, Result};

/// The marker in every temporary file's name: `.NAME.tmp-PID-N`.
pub(crate) const TEMP_MARKER: &str = ".tmp-";

/// Distinguishes the temporary files of concurrent saves within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` by `bytes` so that at every instant, crash or not, `path` holds either
/// its previous content or all of `bytes`.
///
/// Order: create `.NAME.tmp-PID-N` beside `path` (never an existing file), write, fsync
/// the file, rename it onto `path` (atomic within one file system), fsync the directory
/// so that the rename itself survives a power loss. An error before the rename removes
/// the temporary file and leaves `path` untouched; an error syncing the directory after it
/// is reported with the new content in place. A process killed mid-way leaves at most the
/// temporary file behind, which [`temp_file_target`] recognizes.
pub(crate) fn write(function: &'static str, path: &Path, bytes: &[u8]) -> Result<()> {
    let file_name = path.file_name().ok_or_else(|| {
        Error::value(
            function,
            "path",
            "a path ending in a file name",
            path.display(),
        )
    })?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(temp_name(&file_name.to_string_lossy()));
    let written = write_and_sync(function, &temp, bytes).and_then(|()| {
        fs::rename(&temp, path).map_err(|e| Error::io(function, "rename", &temp, e))
    });
    if let Err(error) = written {
        // The temporary file may not exist (creation failed); either way it must not stay.
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    sync_dir(function, &dir)
}

/// A fresh temporary name for `file_name`: `.NAME.tmp-PID-N`.
fn temp_name(file_name: &str) -> String {
    format!(
        ".{file_name}{TEMP_MARKER}{}-{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn write_and_sync(function: &'static str, temp: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| Error::io(function, "create", temp, e))?;
    file.write_all(bytes)
        .map_err(|e| Error::io(function, "write", temp, e))?;
    file.sync_all()
        .map_err(|e| Error::io(function, "sync", temp, e))
}

/// Makes a rename or removal in `dir` durable. Windows has no directory handles to sync;
/// its renames are durable once `MoveFileEx` returns.
pub(crate) fn sync_dir(function: &'static str, dir: &Path) -> Result<()> {
    if cfg!(unix) {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(function, "sync", dir, e))?;
    }
    Ok(())
}

/// The name of the file that `name` was a temporary file for, if [`write`] made it.
pub(crate) fn temp_file_target(name: &str) -> Option<&str> {
    let rest = name.strip_prefix('.')?;
    let (target, suffix) = rest.rsplit_once(TEMP_MARKER)?;
    let (pid, counter) = suffix.split_once('-')?;
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (!target.is_empty() && all_digits(pid) && all_digits(counter)).then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        write("test", &path, b"first").unwrap();
        write("test", &path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.bin"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("a.bin");
        let err = write("Checkpoint::save", &path, b"x").unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("Checkpoint::save: cannot create"),
            "{message}"
        );
        assert!(message.contains(".a.bin.tmp-"), "{message}");
    }

    #[test]
    fn recognizes_only_its_own_temporary_files() {
        assert_eq!(
            temp_file_target(".ckpt-3.safetensors.tmp-12-0"),
            Some("ckpt-3.safetensors")
        );
        for other in [
            "ckpt-3.safetensors",
            ".ckpt-3.safetensors",
            ".ckpt-3.safetensors.tmp-",
            ".ckpt-3.safetensors.tmp-12",
            ".ckpt-3.safetensors.tmp-a-1",
            "..tmp-1-2",
        ] {
            assert_eq!(temp_file_target(other), None, "{other}");
        }
    }

    #[test]
    fn temporary_names_are_fresh_and_recognized() {
        let first = temp_name("x.tmp-1-2.safetensors");
        assert_ne!(first, temp_name("x.tmp-1-2.safetensors"));
        assert_eq!(temp_file_target(&first), Some("x.tmp-1-2.safetensors"));
    }
}
