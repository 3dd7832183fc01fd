//! [`CheckpointManager`]: numbered checkpoints in one directory, the newest `max_to_keep`
//! kept, resume from the latest.

use std::fs;
use std::path::{Path, PathBuf};

use rlgrad_core::{Error, Result};

use crate::atomic;
use crate::checkpoint::Checkpoint;
use crate::restore::Restore;

const STEM: &str = "ckpt-";
const EXTENSION: &str = ".safetensors";

/// A checkpoint file the manager found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// Its number (usually the training step it was saved at).
    pub number: u64,
    /// Its path, `DIR/ckpt-NUMBER.safetensors`.
    pub path: PathBuf,
}

/// Numbered checkpoints `ckpt-N.safetensors` in one directory, as TensorFlow's
/// `tf.train.CheckpointManager` keeps them.
///
/// - [`save`](CheckpointManager::save) writes atomically (see [`Checkpoint::save`]), then
///   deletes the oldest checkpoints beyond `max_to_keep`;
/// - [`latest`](CheckpointManager::latest) is the highest-numbered complete file: a save
///   that crashed left only a temporary file (`.ckpt-N.safetensors.tmp-...`), which is never
///   taken for a checkpoint and which [`CheckpointManager::new`] removes;
/// - [`restore_latest`](CheckpointManager::restore_latest) resumes a run, or says there is
///   nothing to resume.
///
/// One process writes a directory at a time: a second writer's temporary files could be
/// removed by the first one's `new`.
///
/// ```
/// use rlgrad_checkpoint::{Checkpoint, CheckpointManager, Restore};
///
/// let dir = tempfile::tempdir().unwrap();
/// let manager = CheckpointManager::new(dir.path(), Some(2))?;
/// let mut weight = vec![0.0f32; 3];
/// for step in [100u64, 200, 300] {
///     weight.iter_mut().for_each(|w| *w += 1.0);
///     let mut checkpoint = Checkpoint::new();
///     checkpoint.put("w", &[3], &weight)?;
///     checkpoint.put_scalar("step", step)?;
///     manager.save(step, &checkpoint)?;
/// }
/// let kept: Vec<u64> = manager.checkpoints()?.iter().map(|s| s.number).collect();
/// assert_eq!(kept, [200, 300]);
///
/// // A new process resumes from the latest checkpoint.
/// let (mut weight, mut step) = (vec![0.0f32; 3], 0u64);
/// let mut plan = Restore::new();
/// plan.slice("w", &[3], &mut weight).scalar("step", &mut step);
/// assert_eq!(CheckpointManager::new(dir.path(), Some(2))?.restore_latest(plan)?, Some(300));
/// assert_eq!((weight, step), (vec![3.0; 3], 300));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointManager {
    dir: PathBuf,
    max_to_keep: Option<usize>,
}

impl CheckpointManager {
    /// A manager of `dir` (created if missing) that keeps the newest `max_to_keep`
    /// checkpoints (`None`: all). Removes temporary files that crashed saves left behind.
    /// An error for `Some(0)` and when `dir` cannot be created or listed.
    pub fn new(dir: impl Into<PathBuf>, max_to_keep: Option<usize>) -> Result<Self> {
        const FUNCTION: &str = "CheckpointManager::new";
        if max_to_keep == Some(0) {
            return Err(Error::value(
                FUNCTION,
                "max_to_keep",
                "None or at least 1",
                "Some(0)",
            ));
        }
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| Error::io(FUNCTION, "create", &dir, e))?;
        for name in file_names(FUNCTION, &dir)? {
            if atomic::temp_file_target(&name).is_some_and(|target| number_of(target).is_some()) {
                let path = dir.join(&name);
                fs::remove_file(&path).map_err(|e| Error::io(FUNCTION, "remove", &path, e))?;
            }
        }
        Ok(Self { dir, max_to_keep })
    }

    /// The managed directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of checkpoint `number`.
    pub fn path_of(&self, number: u64) -> PathBuf {
        self.dir.join(format!("{STEM}{number}{EXTENSION}"))
    }

    /// The complete checkpoints in the directory, oldest (lowest number) first.
    pub fn checkpoints(&self) -> Result<Vec<Saved>> {
        let mut saved: Vec<Saved> = file_names("CheckpointManager::checkpoints", &self.dir)?
            .iter()
            .filter_map(|name| number_of(name))
            .map(|number| Saved {
                number,
                path: self.path_of(number),
            })
            .collect();
        saved.sort_by_key(|s| s.number);
        Ok(saved)
    }

    /// The highest-numbered complete checkpoint, if any.
    pub fn latest(&self) -> Result<Option<Saved>> {
        Ok(self.checkpoints()?.pop())
    }

    /// Saves `checkpoint` as number `number` (atomically; an existing `number` is
    /// replaced), then deletes the oldest checkpoints beyond `max_to_keep`. Returns the
    /// path written. An error, with every existing checkpoint untouched, when `number` is
    /// below the latest one or the directory cannot be written; an error deleting an old
    /// checkpoint comes after the new one is saved.
    pub fn save(&self, number: u64, checkpoint: &Checkpoint) -> Result<PathBuf> {
        const FUNCTION: &str = "CheckpointManager::save";
        if let Some(latest) = self.latest()?
            && number < latest.number
        {
            return Err(Error::value(
                FUNCTION,
                "number",
                format_args!("a number >= the latest checkpoint's, {}", latest.number),
                number,
            ));
        }
        let path = self.path_of(number);
        atomic::write(FUNCTION, &path, &checkpoint.to_bytes()?)?;
        if let Some(keep) = self.max_to_keep {
            let saved = self.checkpoints()?;
            let excess = saved.len().saturating_sub(keep);
            for old in &saved[..excess] {
                fs::remove_file(&old.path)
                    .map_err(|e| Error::io(FUNCTION, "remove", &old.path, e))?;
            }
            if excess > 0 {
                atomic::sync_dir(FUNCTION, &self.dir)?;
            }
        }
        Ok(path)
    }

    /// The latest checkpoint and its number; `None` when there is none. An error naming
    /// the file when it cannot be read or is not an intact checkpoint (see
    /// [`Checkpoint::load`]). There is no fallback to an older checkpoint, which would
    /// resume a run from an earlier step without a word: [`CheckpointManager::checkpoints`]
    /// lists them for a caller who decides to.
    pub fn load_latest(&self) -> Result<Option<(u64, Checkpoint)>> {
        self.latest()?
            .map(|saved| Ok((saved.number, Checkpoint::load(&saved.path)?)))
            .transpose()
    }

    /// Restores `plan` from the latest checkpoint (see [`Checkpoint::restore`]) and
    /// returns its number; `Ok(None)`, with nothing written, when there is no checkpoint
    /// yet (a fresh start). A latest checkpoint that cannot be loaded (see
    /// [`CheckpointManager::load_latest`]) is an error naming it, with nothing written,
    /// never a silent resume from an older one.
    pub fn restore_latest(&self, plan: Restore<'_>) -> Result<Option<u64>> {
        match self.load_latest()? {
            Some((number, checkpoint)) => {
                checkpoint.restore(plan)?;
                Ok(Some(number))
            }
            None => Ok(None),
        }
    }
}

/// The names of the files in `dir` (names that are not UTF-8 are nobody's checkpoint).
fn file_names(function: &'static str, dir: &Path) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io(function, "list", dir, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(function, "list", dir, e))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

/// The number `N` of a file named `ckpt-N.safetensors` (`N` in canonical decimal).
fn number_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(STEM)?.strip_suffix(EXTENSION)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint(value: f32) -> Checkpoint {
        let mut c = Checkpoint::new();
        c.put("w", &[2], &[value, value]).unwrap();
        c
    }

    #[test]
    fn numbers_parse_only_in_canonical_form() {
        assert_eq!(number_of("ckpt-0.safetensors"), Some(0));
        assert_eq!(number_of("ckpt-120.safetensors"), Some(120));
        for other in [
            "ckpt-.safetensors",
            "ckpt-012.safetensors",
            "ckpt-1.safetensors.tmp-1-1",
            "ckpt-+1.safetensors",
            "ckpt-99999999999999999999.safetensors",
            "model-1.safetensors",
        ] {
            assert_eq!(number_of(other), None, "{other}");
        }
    }

    #[test]
    fn keeps_the_newest_and_refuses_going_back() {
        let dir = tempfile::tempdir().unwrap();
        let manager = CheckpointManager::new(dir.path(), Some(2)).unwrap();
        assert_eq!(manager.latest().unwrap(), None);
        for n in [1, 2, 5, 5] {
            manager.save(n, &checkpoint(n as f32)).unwrap();
        }
        let numbers: Vec<u64> = manager
            .checkpoints()
            .unwrap()
            .iter()
            .map(|s| s.number)
            .collect();
        assert_eq!(numbers, [2, 5]);
        let e = manager.save(3, &checkpoint(3.0)).unwrap_err();
        assert!(e.to_string().contains("the latest checkpoint's, 5"), "{e}");
        let (number, latest) = manager.load_latest().unwrap().unwrap();
        assert_eq!(
            (number, latest.read::<f32>("w", &[2]).unwrap()),
            (5, vec![5.0, 5.0])
        );
        assert!(CheckpointManager::new(dir.path(), Some(0)).is_err());
    }

    #[test]
    fn new_removes_what_a_crashed_save_left_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let manager = CheckpointManager::new(dir.path(), None).unwrap();
        manager.save(7, &checkpoint(7.0)).unwrap();
        let stale = dir.path().join(".ckpt-8.safetensors.tmp-999-0");
        let foreign = dir.path().join(".notes.txt.tmp-999-0");
        fs::write(&stale, b"half a checkpoint").unwrap();
        fs::write(&foreign, b"someone else's").unwrap();
        assert_eq!(manager.latest().unwrap().unwrap().number, 7);
        CheckpointManager::new(dir.path(), None).unwrap();
        assert!(!stale.exists());
        assert!(foreign.exists());
        assert!(manager.path_of(7).exists());
    }

    #[test]
    fn restore_latest_without_checkpoints_is_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let manager = CheckpointManager::new(dir.path().join("run"), Some(3)).unwrap();
        let mut w = [1.0f32; 2];
        let mut plan = Restore::new();
        plan.slice("w", &[2], &mut w);
        assert_eq!(manager.restore_latest(plan).unwrap(), None);
        assert_eq!(w, [1.0; 2]);
    }
}
