//! A process killed while it saves checkpoints leaves a loadable latest checkpoint, and
//! the next process resumes from it.
//!
//! This test is its own child: run with `--save-forever DIR` it saves ever larger
//! numbered checkpoints into DIR, printing `saving N` as each save begins and `saved N`
//! once it is done. The parent times one save, kills the child (SIGKILL on Unix) at a
//! different point of a later save each round, and checks the directory: the latest
//! checkpoint loads and is whole (every value equals its number). Rounds continue until
//! kills have been seen to leave a temporary file behind (saves cut short), up to a bound.
//! The kill is timed from the save's start, not from the previous save's end, so that
//! the rest of the child's cycle (making the next checkpoint, which is slower in an
//! unoptimized build) does not catch the kills.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rlgrad_checkpoint::{Checkpoint, CheckpointManager};

const NAME: &str = "killed_during_save";
/// 4 MiB of values: a save takes long enough to be killed in the middle.
const VALUES: usize = 1 << 20;
const MAX_ROUNDS: usize = 40;
/// Rounds that must catch a save cut short.
const CUT_SHORT: usize = 2;

fn checkpoint(number: u64) -> Checkpoint {
    let mut c = Checkpoint::new();
    c.put("w", &[VALUES], &vec![number as f32; VALUES]).unwrap();
    c.put_scalar("number", number).unwrap();
    c
}

/// The child: resume numbering after the latest checkpoint and save forever (bounded in
/// time, should the parent die first).
fn save_forever(dir: &Path) {
    let manager = CheckpointManager::new(dir, Some(2)).unwrap();
    let first = manager.latest().unwrap().map_or(0, |s| s.number + 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stdout = std::io::stdout();
    for number in first.. {
        if Instant::now() > deadline {
            return;
        }
        let checkpoint = checkpoint(number);
        writeln!(stdout, "saving {number}").unwrap();
        stdout.flush().unwrap();
        manager.save(number, &checkpoint).unwrap();
        writeln!(stdout, "saved {number}").unwrap();
        stdout.flush().unwrap();
    }
}

fn temp_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().contains(".tmp-")
        })
        .count()
}

fn kill_during_saves() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let (mut rounds, mut cut_short, mut last_number) = (0, 0, None);
    while cut_short < CUT_SHORT && rounds < MAX_ROUNDS {
        rounds += 1;
        let mut child = Command::new(&exe)
            .arg("--save-forever")
            .arg(dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut expect = |event: &str| -> u64 {
            let line = lines.next().unwrap().unwrap();
            let number = line.strip_prefix(event).and_then(|n| n.strip_prefix(' '));
            number
                .unwrap_or_else(|| panic!("`{line}` is not `{event} N`"))
                .parse()
                .unwrap()
        };
        let first = expect("saving");
        let began = Instant::now();
        // Numbering resumed after the checkpoint the previous child left.
        assert_eq!(Some(first), last_number.map(|n: u64| n + 1).or(Some(0)));
        assert_eq!(expect("saved"), first);
        let save = began.elapsed();
        assert_eq!(expect("saving"), first + 1);
        // A different point of the save each round (golden-ratio steps).
        let fraction = (rounds as f64 * 0.618_033_988_7).fract();
        std::thread::sleep(save.mul_f64(fraction));
        child.kill().unwrap();
        child.wait().unwrap();
        if temp_files(dir.path()) > 0 {
            cut_short += 1;
        }
        let manager = CheckpointManager::new(dir.path(), Some(2)).unwrap();
        assert_eq!(
            temp_files(dir.path()),
            0,
            "new() removes what the kill left"
        );
        let (number, latest) = manager.load_latest().unwrap().unwrap();
        assert!(number >= first, "{number} < {first}");
        assert_eq!(latest.read_scalar::<u64>("number").unwrap(), number);
        let w: Vec<f32> = latest.read("w", &[VALUES]).unwrap();
        assert!(
            w.iter().all(|&v| v == number as f32),
            "checkpoint {number} is torn"
        );
        last_number = Some(number);
    }
    assert!(
        cut_short >= CUT_SHORT,
        "only {cut_short} of {rounds} kills landed during a save"
    );
    println!("{NAME}: {rounds} rounds, {cut_short} saves cut short, all resumed: ok");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, dir] = args.as_slice()
        && flag == "--save-forever"
    {
        save_forever(Path::new(dir));
        return;
    }
    // `cargo test FILTER` passes the filter on: run only when it selects this test.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if filters.is_empty() || filters.iter().any(|f| NAME.contains(f.as_str())) {
        kill_during_saves();
    }
}
