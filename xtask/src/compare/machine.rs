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
        Self::parse(&cpuinfo, &meminfo, || {
            Command::new("lscpu")
                .env("LC_ALL", "C")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        })
    }

    /// The machine from `/proc/cpuinfo` and `/proc/meminfo`; `lscpu` gives `lscpu`'s
    /// output where `cpuinfo` names no model (aarch64).
    fn parse(cpuinfo: &str, meminfo: &str, lscpu: impl FnOnce() -> String) -> Self {
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (key, value) = l.split_once(':')?;
                (key.trim() == name).then(|| value.trim().to_owned())
            })
        };
        // x86 names its model; aarch64 kernels give only the implementer and part
        // numbers, which lscpu's tables name (`ARM Neoverse-N1`).
        let cpu_model = field("model name")
            .or_else(|| field("Hardware"))
            .or_else(|| lscpu_model(&lscpu()))
            .or_else(|| {
                let (implementer, part) = (field("CPU implementer")?, field("CPU part")?);
                Some(format!("CPU implementer {implementer} part {part}"))
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
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

/// The CPU `lscpu` names: its vendor and each model name (one per core type of a
/// big.LITTLE chip), `None` where it names no model.
fn lscpu_model(lscpu: &str) -> Option<String> {
    let values = |name: &'static str| {
        lscpu
            .lines()
            .filter_map(move |l| {
                let (key, value) = l.split_once(':')?;
                (key.trim() == name).then(|| value.trim())
            })
            .filter(|v| !v.is_empty() && *v != "-")
    };
    let models: Vec<&str> = values("Model name").collect();
    if models.is_empty() {
        return None;
    }
    let models = models.join(" + ");
    Some(match values("Vendor ID").next() {
        Some(vendor) if !models.starts_with(vendor) => format!("{vendor} {models}"),
        _ => models,
    })
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
        let no_lscpu = || panic!("lscpu is not needed where cpuinfo names the model");
        assert_eq!(
            Machine::parse(cpuinfo, meminfo, no_lscpu),
            Machine {
                cpu_model: "AMD EPYC 9R14".to_owned(),
                cpus: 2,
                memory_gib: Some(23.5),
            }
        );
        assert_eq!(Machine::parse("", "", String::new).cpu_model, "unknown CPU");
    }

    /// An AWS Graviton2 (Linux arm64): no model name in cpuinfo, lscpu names the core.
    const GRAVITON2_CPUINFO: &str = "processor\t: 0\nBogoMIPS\t: 243.75\n\
        Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid\n\
        CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\n\
        CPU part\t: 0xd0c\nCPU revision\t: 1\n\nprocessor\t: 1\nBogoMIPS\t: 243.75\n\
        CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";

    #[test]
    fn names_an_arm_cpu_from_lscpu_or_its_part_number() {
        let lscpu = "Architecture:                    aarch64\n\
                     CPU op-mode(s):                  32-bit, 64-bit\n\
                     CPU(s):                          2\n\
                     Vendor ID:                       ARM\n\
                     Model:                           1\n\
                     Model name:                      Neoverse-N1\n\
                     Stepping:                        r3p1\n";
        let machine = Machine::parse(GRAVITON2_CPUINFO, "", || lscpu.to_owned());
        assert_eq!(machine.cpu_model, "ARM Neoverse-N1");
        assert_eq!(machine.cpus, 2);
        // big.LITTLE: one model name per core type.
        let lscpu = "Vendor ID:               ARM\n  Model name:            Cortex-A55\n\
                     \x20   Model:               0\n  Model name:            Cortex-A76\n";
        assert_eq!(
            Machine::parse(GRAVITON2_CPUINFO, "", || lscpu.to_owned()).cpu_model,
            "ARM Cortex-A55 + Cortex-A76"
        );
        // Without lscpu (or a model it cannot name): the numbers cpuinfo gives.
        for lscpu in ["", "Vendor ID: ARM\nModel name: -\n"] {
            assert_eq!(
                Machine::parse(GRAVITON2_CPUINFO, "", || lscpu.to_owned()).cpu_model,
                "CPU implementer 0x41 part 0xd0c"
            );
        }
        // 32-bit ARM boards name their hardware.
        let board = "processor\t: 0\nHardware\t: BCM2835\n";
        assert_eq!(Machine::parse(board, "", String::new).cpu_model, "BCM2835");
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
