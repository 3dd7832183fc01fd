//! The machine and the versions a sitting ran on, for its JSON and its `machine:` line.

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub cpu_model: String,
    /// Logical CPUs, as the peers' `os.cpu_count()` counts them.
    pub cpus: usize,
    pub memory_gib: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versions {
    pub rustc: String,
    /// `git describe`-like: the short commit, with `-dirty` when the tree has changes.
    pub rlgrad_commit: String,
    /// The peers' libraries, as their JSON reports them.
    pub peers: BTreeMap<String, String>,
}

impl Machine {
    pub fn this_one() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Self::parse(&cpuinfo, &meminfo)
    }

    fn parse(cpuinfo: &str, meminfo: &str) -> Self {
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
            .map_or_else(|| "unknown CPU".to_owned(), |(_, m)| m.trim().to_owned());
        let cpus = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count()
            .max(1);
        let memory_gib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kb| (kb / (1024.0 * 1024.0) * 10.0).round() / 10.0);
        Self {
            cpu_model,
            cpus,
            memory_gib,
        }
    }
}

impl Versions {
    pub fn of(root: &std::path::Path, peers: BTreeMap<String, String>) -> Self {
        let output = |program: &str, args: &[&str]| {
            Command::new(program)
                .args(args)
                .current_dir(root)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        };
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
        let commit = output("git", &["rev-parse", "--short=12", "HEAD"]);
        let dirty = output("git", &["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
        Self {
            rustc: output(&rustc, &["-V"]).unwrap_or_else(|| "unknown rustc".to_owned()),
            rlgrad_commit: match commit {
                Some(c) if dirty => format!("{c}-dirty"),
                Some(c) => c,
                None => "unknown commit".to_owned(),
            },
            peers,
        }
    }
}

/// The line a README cites with its figures: `machine: <CPU>, 2 CPUs, 23.5 GiB; rustc ...;
/// rlgrad <commit>; peers: jax 0.10.2, ...`.
pub fn line(machine: &Machine, versions: &Versions) -> String {
    let memory = machine
        .memory_gib
        .map_or_else(String::new, |gib| format!(", {gib} GiB"));
    let peers: Vec<String> = versions
        .peers
        .iter()
        .filter(|(name, _)| name.as_str() != "machine")
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    format!(
        "machine: {}, {} CPUs{memory}; {}; rlgrad {}; peers: {}",
        machine.cpu_model,
        machine.cpus,
        versions.rustc,
        versions.rlgrad_commit,
        if peers.is_empty() {
            "none ran".to_owned()
        } else {
            peers.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_model_the_cpu_count_and_the_memory() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 9R14\n\nprocessor\t: 1\n\
                       model name\t: AMD EPYC 9R14\n";
        let meminfo = "MemTotal:       24641536 kB\nMemFree:  1 kB\n";
        assert_eq!(
            Machine::parse(cpuinfo, meminfo),
            Machine {
                cpu_model: "AMD EPYC 9R14".to_owned(),
                cpus: 2,
                memory_gib: Some(23.5),
            }
        );
        assert_eq!(Machine::parse("", "").cpu_model, "unknown CPU");
    }

    #[test]
    fn the_machine_line_names_cpu_memory_and_versions() {
        let machine = Machine {
            cpu_model: "AMD EPYC".to_owned(),
            cpus: 2,
            memory_gib: Some(23.5),
        };
        let versions = Versions {
            rustc: "rustc 1.95.0".to_owned(),
            rlgrad_commit: "0123456789ab".to_owned(),
            peers: [
                ("jax", "0.10.2"),
                ("machine", "x86_64"),
                ("torch", "2.15.0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        };
        assert_eq!(
            line(&machine, &versions),
            "machine: AMD EPYC, 2 CPUs, 23.5 GiB; rustc 1.95.0; rlgrad 0123456789ab; \
             peers: jax 0.10.2, torch 2.15.0"
        );
    }
}
