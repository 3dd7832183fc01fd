//! `cargo xtask package [--verify]`: what crates.io would refuse or show broken, checked
//! before anyone publishes.
//!
//! For every publishable crate of the workspace (`publish` not `false`): `cargo package`
//! of them all (without its verification build unless `--verify`), and then, from the
//! package's file list and manifest, that the crate ships both license texts, that its
//! keywords are ones crates.io takes (at most 5, each at most 20 characters, ASCII letters,
//! digits, `-` and `_`, starting with a letter), that it has a description and a
//! documentation link, and that its README links nowhere outside the package (a relative
//! link that leaves the crate's folder breaks on crates.io). `--verify` is the deep run:
//! the verification build of every package, and every publishable crate linted and
//! documented alone with no features, each feature, and all of them (`cargo clippy -p
//! CRATE`, so without dev-dependencies: the build a user's project makes).
//!
//! `cargo xtask msrv`: every publishable crate, with every feature, checked by the Rust
//! toolchain its `rust-version` names (installed with `rustup toolchain install` when it is
//! missing), in `target/msrv`. Clippy's `incompatible_msrv` lint catches newer standard
//! library APIs; only the old compiler catches newer language features and dependencies
//! whose own MSRV moved past ours.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The files every published package must carry.
const LICENSE_FILES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

/// What `cargo ARGS` writes to its standard output, or an error with what it said.
fn cargo_stdout(args: &[&str]) -> Result<Vec<u8>, String> {
    let output = crate::cargo_command(args)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(format!(
            "`cargo {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A publishable package, as `cargo metadata` describes it.
struct Package {
    name: String,
    dir: PathBuf,
    manifest: Value,
}

pub fn run(args: &[String]) -> Result<(), String> {
    let verify = match args {
        [] => false,
        [flag] if flag == "--verify" => true,
        _ => {
            return Err(format!(
                "usage: cargo xtask package [--verify], got {args:?}"
            ));
        }
    };
    let packages = publishable()?;
    let mut package = vec!["package", "--allow-dirty"];
    for p in &packages {
        package.extend(["-p", p.name.as_str()]);
    }
    if !verify {
        package.push("--no-verify");
    }
    crate::cargo(&package, &[])?;
    let mut problems = Vec::new();
    for package in &packages {
        let files = package_files(&package.name)?;
        problems.extend(check_package(package, &files));
    }
    if verify {
        let mpi = crate::mpi_missing();
        for package in &packages {
            check_features_alone(package, &mpi)?;
        }
    }
    if problems.is_empty() {
        println!(
            "package: {} publishable crates packaged; license files, keywords, \
             descriptions, documentation links and README links as crates.io needs them",
            packages.len()
        );
        Ok(())
    } else {
        Err(format!(
            "{} problems crates.io would have:\n  {}",
            problems.len(),
            problems.join("\n  ")
        ))
    }
}

pub fn msrv(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!("usage: cargo xtask msrv, got {args:?}"));
    }
    let packages = publishable()?;
    let mpi = crate::mpi_missing();
    let mut by_version: Vec<(&str, Vec<&Package>)> = Vec::new();
    for package in &packages {
        let version = package.manifest["rust_version"]
            .as_str()
            .ok_or_else(|| format!("{}: no `rust-version` in its manifest", package.name))?;
        match by_version.iter_mut().find(|(v, _)| *v == version) {
            Some((_, members)) => members.push(package),
            None => by_version.push((version, vec![package])),
        }
    }
    for (version, members) in &by_version {
        install_toolchain(version)?;
        let mut check = vec![
            "run".to_owned(),
            (*version).to_owned(),
            "cargo".to_owned(),
            "check".to_owned(),
            "--target-dir".to_owned(),
            "target/msrv".to_owned(),
        ];
        let mut features = Vec::new();
        for package in members {
            check.extend(["-p".to_owned(), package.name.clone()]);
            for feature in optional_features(package) {
                if package.name == "rlgrad-dist" && feature == "mpi" && mpi.is_some() {
                    println!("msrv: {} without `mpi`: MPI is missing here", package.name);
                } else {
                    features.push(format!("{}/{feature}", package.name));
                }
            }
        }
        if !features.is_empty() {
            check.extend(["--features".to_owned(), features.join(",")]);
        }
        rustup(&check, &[("RUSTFLAGS", "-D warnings")])?;
        println!(
            "msrv: {} publishable crates build with Rust {version} and every feature",
            members.len()
        );
    }
    Ok(())
}

/// Installs Rust `version` (minimal profile) unless rustup already has it.
fn install_toolchain(version: &str) -> Result<(), String> {
    let present = std::process::Command::new("rustup")
        .args(["run", version, "cargo", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return Ok(());
    }
    println!("msrv: installing Rust {version} with rustup");
    rustup(
        &[
            "toolchain".to_owned(),
            "install".to_owned(),
            version.to_owned(),
            "--profile".to_owned(),
            "minimal".to_owned(),
        ],
        &[],
    )
}

/// Runs `rustup ARGS` in the workspace root, with `envs` set.
fn rustup(args: &[String], envs: &[(&str, &str)]) -> Result<(), String> {
    eprintln!("xtask: rustup {}", args.join(" "));
    let status = std::process::Command::new("rustup")
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(crate::root())
        .status()
        .map_err(|e| format!("cannot run rustup (the MSRV check needs it): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`rustup {}` failed ({status})", args.join(" ")))
    }
}

/// The package's features, `default` left out.
fn optional_features(package: &Package) -> Vec<&str> {
    package.manifest["features"]
        .as_object()
        .map(|f| {
            f.keys()
                .map(String::as_str)
                .filter(|f| *f != "default")
                .collect()
        })
        .unwrap_or_default()
}

/// The workspace's packages whose `publish` is not `false`.
fn publishable() -> Result<Vec<Package>, String> {
    let output = cargo_stdout(&["metadata", "--no-deps", "--format-version", "1"])?;
    let metadata: Value =
        serde_json::from_slice(&output).map_err(|e| format!("cargo metadata's JSON: {e}"))?;
    let packages = metadata["packages"].as_array().ok_or("no packages")?;
    Ok(packages
        .iter()
        .filter(|p| {
            p["publish"]
                .as_array()
                .is_none_or(|registries| !registries.is_empty())
        })
        .filter_map(|p| {
            let manifest = Path::new(p["manifest_path"].as_str()?);
            Some(Package {
                name: p["name"].as_str()?.to_owned(),
                dir: manifest.parent()?.to_path_buf(),
                manifest: p.clone(),
            })
        })
        .collect())
}

/// The files `cargo package --list` says the package holds.
fn package_files(name: &str) -> Result<Vec<String>, String> {
    let output = cargo_stdout(&["package", "--list", "--allow-dirty", "-p", name])?;
    Ok(String::from_utf8_lossy(&output)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// What crates.io would refuse or show broken in `package`, one line each.
fn check_package(package: &Package, files: &[String]) -> Vec<String> {
    let name = &package.name;
    let mut problems = Vec::new();
    for license in LICENSE_FILES {
        if !files.iter().any(|f| f == license) {
            problems.push(format!("{name}: the package lacks {license}"));
        }
    }
    let keywords: Vec<&str> = package.manifest["keywords"]
        .as_array()
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    problems.extend(
        keyword_problems(&keywords)
            .into_iter()
            .map(|p| format!("{name}: {p}")),
    );
    for field in ["description", "documentation", "license"] {
        if package.manifest[field].as_str().is_none_or(str::is_empty) {
            problems.push(format!("{name}: no `{field}` in its manifest"));
        }
    }
    match package.manifest["readme"].as_str() {
        None => problems.push(format!("{name}: no `readme` in its manifest")),
        Some(readme) => match std::fs::read_to_string(package.dir.join(readme)) {
            Ok(text) => problems.extend(
                link_problems(&text, files)
                    .into_iter()
                    .map(|p| format!("{name}: {readme}: {p}")),
            ),
            Err(e) => problems.push(format!("{name}: cannot read {readme}: {e}")),
        },
    }
    problems
}

/// Why crates.io would refuse `keywords`, if it would.
fn keyword_problems(keywords: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    if keywords.len() > 5 {
        problems.push(format!("{} keywords, crates.io takes 5", keywords.len()));
    }
    for keyword in keywords {
        let well_formed = keyword.starts_with(|c: char| c.is_ascii_alphabetic())
            && keyword
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if keyword.len() > 20 || !well_formed {
            problems.push(format!(
                "keyword `{keyword}`: crates.io takes at most 20 ASCII letters, digits, `-` \
                 and `_`, starting with a letter"
            ));
        }
    }
    problems
}

/// The Markdown links of `text` that break once the README is shown on crates.io: a
/// relative link that leaves the package or names a file it does not ship. Absolute
/// links (docs.rs, a format's specification) and anchors work there.
fn link_problems(text: &str, files: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("](") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        rest = &rest[end..];
        if target.is_empty() || target.starts_with('#') || target.contains("://") {
            continue;
        }
        let path = target
            .split('#')
            .next()
            .unwrap_or(target)
            .trim_end_matches('/');
        let shipped = !path.split('/').any(|part| part == "..")
            && files
                .iter()
                .any(|f| f == path || f.starts_with(&format!("{path}/")));
        if !shipped {
            problems.push(format!("the link `{target}` leads outside the package"));
        }
    }
    problems
}

/// `cargo clippy -p CRATE -- -D warnings` and warning-free docs with no features, each
/// feature alone and all of them: what a user's project builds, without this workspace's
/// dev-dependencies and their features (dead code that only a test or another feature
/// uses, or a doc link to an item behind another feature, shows here).
fn check_features_alone(package: &Package, mpi_missing: &Option<String>) -> Result<(), String> {
    let features = optional_features(package);
    let needs_mpi = |feature: &str| package.name == "rlgrad-dist" && feature == "mpi";
    let mut runs: Vec<Vec<String>> = vec![vec!["--no-default-features".to_owned()]];
    for feature in &features {
        if needs_mpi(feature) && mpi_missing.is_some() {
            println!(
                "package: {} without `{feature}`: MPI is missing here",
                package.name
            );
            continue;
        }
        runs.push(vec![
            "--no-default-features".to_owned(),
            "--features".to_owned(),
            (*feature).to_owned(),
        ]);
    }
    if features.len() > 1 && (mpi_missing.is_none() || !features.iter().any(|f| needs_mpi(f))) {
        runs.push(vec!["--all-features".to_owned()]);
    }
    for run in runs {
        let mut clippy = vec!["clippy", "-p", package.name.as_str()];
        clippy.extend(run.iter().map(String::as_str));
        clippy.extend(["--", "-D", "warnings"]);
        crate::cargo(&clippy, &[])?;
        // A link to an item behind another feature breaks the docs of this feature set.
        let mut doc = vec!["doc", "--no-deps", "-p", package.name.as_str()];
        doc.extend(run.iter().map(String::as_str));
        crate::cargo(&doc, &[("RUSTDOCFLAGS", "-D warnings")])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_crates_io_refuses_are_named() {
        assert!(keyword_problems(&["rl", "gae", "deterministic"]).is_empty());
        let problems = keyword_problems(&["reinforcement-learning", "2d", "a b"]);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("`reinforcement-learning`"));
        assert_eq!(keyword_problems(&["a", "b", "c", "d", "e", "f"]).len(), 1);
    }

    #[test]
    fn links_that_leave_the_package_are_named() {
        let files = ["README.md".to_owned(), "src/lib.rs".to_owned()];
        let text = "[ok](src/lib.rs) [docs](https://docs.rs/x) [anchor](#usage) \
                    [dir](src/) [out](../../benches/README.md) [missing](NOTES.md)";
        let problems = link_problems(text, &files);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("../../benches/README.md"));
        assert!(problems[1].contains("NOTES.md"));
    }
}
