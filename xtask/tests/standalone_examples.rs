//! `rlgrad-returns`, `rlgrad-mask` and `rlgrad-optim` are each a complete dependency: the
//! Rust examples of their READMEs and doc comments (all run as doctests) name no other
//! rlgrad crate, so they compile for a user who depends on that one crate alone. The
//! doctests themselves could not show it: they may use any dependency of the crate.

use std::path::{Path, PathBuf};

/// The crates a user may add alone, by directory and crate name.
const STANDALONE: [(&str, &str); 3] = [
    ("returns", "rlgrad_returns"),
    ("mask", "rlgrad_mask"),
    ("optim", "rlgrad_optim"),
];

/// The lines of Rust code blocks in `text` with their line numbers: fenced blocks of a
/// Markdown file, or of the `///` and `//!` comments of a Rust file.
fn example_lines(text: &str, rust_source: bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (number, line) in text.lines().enumerate() {
        let content = if rust_source {
            let trimmed = line.trim_start();
            match trimmed
                .strip_prefix("///")
                .or_else(|| trimmed.strip_prefix("//!"))
            {
                Some(doc) => doc.trim_start(),
                None => {
                    in_block = false;
                    continue;
                }
            }
        } else {
            line.trim_start()
        };
        if let Some(fence) = content.strip_prefix("```") {
            // Doc comments default to Rust; Markdown blocks must say so.
            let lang = fence.trim();
            in_block = !in_block && (lang.starts_with("rust") || (rust_source && lang.is_empty()));
            continue;
        }
        if in_block {
            out.push((number + 1, content.to_owned()));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the crate's source directory is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn examples_of_standalone_crates_use_only_their_crate() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut offenders = Vec::new();
    for (dir, name) in STANDALONE {
        let root = crates.join(dir);
        let mut files = vec![(root.join("README.md"), false)];
        let mut sources = Vec::new();
        rust_files(&root.join("src"), &mut sources);
        files.extend(sources.into_iter().map(|p| (p, true)));
        let mut examples = 0;
        for (path, rust_source) in files {
            let text = std::fs::read_to_string(&path).expect("a readable file");
            for (number, line) in example_lines(&text, rust_source) {
                examples += 1;
                let foreign = line
                    .match_indices("rlgrad_")
                    .any(|(at, _)| !line[at..].starts_with(name));
                if foreign {
                    offenders.push(format!("{}:{number}: {line}", path.display()));
                }
            }
        }
        assert!(
            examples > 50,
            "found only {examples} example lines in {dir}"
        );
    }
    assert!(
        offenders.is_empty(),
        "examples that need another rlgrad crate:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn code_blocks_are_found_in_both_kinds_of_file() {
    let markdown = "text\n```rust\nuse a::b;\n```\n```text\nno\n```\n";
    assert_eq!(
        example_lines(markdown, false),
        [(3, "use a::b;".to_owned())]
    );
    let source = "/// Docs.\n///\n/// ```\n/// let x = 1;\n/// ```\nfn f() {}\n//! ```ignore\n";
    assert_eq!(example_lines(source, true), [(4, "let x = 1;".to_owned())]);
}
