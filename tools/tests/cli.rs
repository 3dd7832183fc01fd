//! `rlgrad-tools` as xtask calls it: the parity runner's closing line and exit status on a
//! directory of cases, and refusals that say what was wrong.

use std::path::Path;
use std::process::{Command, Output};

fn tools(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlgrad-tools"))
        .args(args)
        .output()
        .expect("rlgrad-tools runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn parity_on_a_directory_of_cases_ends_with_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let vendored = Path::new(env!("CARGO_MANIFEST_DIR")).join("../parity");
    for case in [
        "adam_keras_amsgrad.json",
        "discounted_cumsum_single_step_nan.json",
    ] {
        std::fs::copy(vendored.join(case), dir.path().join(case)).unwrap();
    }
    let output = tools(&["parity", dir.path().to_str().unwrap()]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.lines().any(|l| l == "2 passed, 0 failed"), "{said}");
}

#[test]
fn a_failing_case_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let vendored = Path::new(env!("CARGO_MANIFEST_DIR")).join("../parity");
    let case = std::fs::read_to_string(vendored.join("adam_keras_amsgrad.json")).unwrap();
    let mut case: serde_json::Value = serde_json::from_str(&case).unwrap();
    case["op"] = "no_such_op".into();
    std::fs::write(dir.path().join("bad.json"), case.to_string()).unwrap();
    let output = tools(&["parity", dir.path().to_str().unwrap()]);
    let said = text(&output);
    assert!(!output.status.success(), "{said}");
    assert!(said.contains("unknown op `no_such_op`"), "{said}");
}

#[test]
fn unknown_commands_and_options_are_refused_by_name() {
    let output = tools(&["parityy"]);
    assert!(!output.status.success());
    assert!(text(&output).contains("unknown command `parityy`"));
    let output = tools(&["parity", "--devise", "cuda"]);
    assert!(!output.status.success());
    assert!(text(&output).contains("unknown option `--devise`"));
    let output = tools(&["converge", "--fast"]);
    assert!(text(&output).contains("converge takes no options, got `--fast`"));
    let output = tools(&["parity-outputs"]);
    assert!(text(&output).contains("usage: rlgrad-tools parity-outputs OUT --suite S"));
}
