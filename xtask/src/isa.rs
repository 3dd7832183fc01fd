//! `--isa` of `cargo xtask compare` and `examples-compare`: both sides capped to one vector
//! instruction set, so that an AVX-512 machine also measures what AVX2 and SSE users get.
//!
//! rlgrad's side gets `RLGRAD_MAX_ISA` (`rlgrad_core::cpu::simd`); which levels this CPU
//! has, and what a level's name means, rlgrad-core's `isa` example says. The peers get the
//! switches their libraries read: PyTorch's `ATEN_CPU_CAPABILITY`, XLA's
//! `--xla_cpu_max_isa`, oneDNN's `ONEDNN_MAX_CPU_ISA` (PyTorch's and TensorFlow's), MKL's
//! `MKL_ENABLE_INSTRUCTIONS` and NumPy's `NPY_DISABLE_CPU_FEATURES`. Two limits, recorded
//! in every sitting's JSON: the peers' wheels are built for x86-64-v2, so `sse2` caps them
//! at SSE4.2 (rlgrad runs plain SSE2: the comparison favours the peers), and TensorFlow's
//! Eigen kernels run the instruction set the wheel was compiled for whatever the cap.

use std::collections::BTreeMap;

use serde::Serialize;

/// The instruction set a sitting ran in, and how each side was told.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsaSetting {
    /// The widest level the CPU has (`avx512`, `avx2`, `sse2`, `neon`).
    pub cpu: String,
    /// The level both sides were capped to; the CPU's own when no `--isa` was given.
    pub level: String,
    /// Whether `--isa` capped it.
    pub capped: bool,
    /// rlgrad's environment (`RLGRAD_MAX_ISA`).
    pub rlgrad_env: BTreeMap<String, String>,
    /// The peers' environment.
    pub peer_env: BTreeMap<String, String>,
    /// What the cap cannot do, in words (empty when uncapped).
    pub limits: Vec<String>,
}

impl IsaSetting {
    /// The setting for `--isa VALUE` (`None`: the CPU's widest, uncapped). An error when
    /// the value names no level or one this CPU cannot run (rlgrad-core's `isa` example,
    /// built in release, says which).
    pub fn new(value: Option<&str>) -> Result<Self, String> {
        let mut args = vec![
            "run",
            "--release",
            "--quiet",
            "-p",
            "rlgrad-core",
            "--example",
            "isa",
        ];
        if let Some(value) = value {
            args.extend(["--", value]);
        }
        let output = crate::cargo_command(&args)
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        Self::from_probe(
            value,
            output.status.success(),
            &output.stdout,
            &output.stderr,
        )
    }

    /// The setting from what the `isa` example (asked for `value`) printed: its `cpu` and
    /// `level` lines, or, where it failed, the last line of its error output.
    fn from_probe(
        value: Option<&str>,
        succeeded: bool,
        stdout: &[u8],
        stderr: &[u8],
    ) -> Result<Self, String> {
        if !succeeded {
            let why = String::from_utf8_lossy(stderr);
            let why = why.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!("--isa: {why}"));
        }
        let probe = String::from_utf8_lossy(stdout);
        let field = |name: &str| {
            probe
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .map(str::to_owned)
                .ok_or_else(|| format!("rlgrad-core's isa example printed no `{name}`: {probe}"))
        };
        Ok(Self::from_levels(
            &field("cpu")?,
            value.map(|_| field("level")).transpose()?,
        ))
    }

    /// The setting for a CPU whose widest level is `cpu`, capped to `level` (a level's
    /// name as rlgrad-core gives it) or not capped.
    fn from_levels(cpu: &str, level: Option<String>) -> Self {
        let Some(level) = level else {
            return Self {
                cpu: cpu.to_owned(),
                level: cpu.to_owned(),
                capped: false,
                rlgrad_env: BTreeMap::new(),
                peer_env: BTreeMap::new(),
                limits: Vec::new(),
            };
        };
        let rlgrad_env = BTreeMap::from([("RLGRAD_MAX_ISA".to_owned(), level.clone())]);
        let (peer_env, limits) = peer_switches(&level);
        Self {
            cpu: cpu.to_owned(),
            level,
            capped: true,
            rlgrad_env,
            peer_env,
            limits,
        }
    }

    /// `ISA avx2 (capped; the CPU has avx512)` or `ISA avx512`, for the machine line.
    pub fn describe(&self) -> String {
        if self.capped && self.level != self.cpu {
            format!("ISA {} (capped; the CPU has {})", self.level, self.cpu)
        } else {
            format!("ISA {}", self.level)
        }
    }
}

/// The peers' environment for `level` (`avx512`, `avx2`, or the baseline's name), and
/// what it cannot cap.
fn peer_switches(level: &str) -> (BTreeMap<String, String>, Vec<String>) {
    if !cfg!(target_arch = "x86_64") {
        return (
            BTreeMap::new(),
            vec!["the peers' libraries have no ISA switch on this architecture".to_owned()],
        );
    }
    // (PyTorch, XLA, oneDNN, MKL, NumPy's dispatch groups above the level)
    let (aten, xla, onednn, mkl, numpy_off) = match level {
        "avx512" => (
            "avx512",
            "AVX512",
            "AVX512_CORE",
            "AVX512",
            "AVX512_ICL AVX512_SPR",
        ),
        "avx2" => (
            "avx2",
            "AVX2",
            "AVX2",
            "AVX2",
            "X86_V4 AVX512_ICL AVX512_SPR",
        ),
        _ => (
            "default",
            "SSE4_2",
            "SSE41",
            "SSE4_2",
            "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
        ),
    };
    let xla_flags = std::env::var("XLA_FLAGS").unwrap_or_default();
    let env = BTreeMap::from(
        [
            ("ATEN_CPU_CAPABILITY", aten.to_owned()),
            (
                "XLA_FLAGS",
                format!("{xla_flags} --xla_cpu_max_isa={xla}")
                    .trim()
                    .to_owned(),
            ),
            ("ONEDNN_MAX_CPU_ISA", onednn.to_owned()),
            ("MKL_ENABLE_INSTRUCTIONS", mkl.to_owned()),
            ("NPY_DISABLE_CPU_FEATURES", numpy_off.to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let mut limits = vec![
        "TensorFlow's Eigen kernels run the ISA its wheel was compiled for; only its oneDNN \
         ops obey ONEDNN_MAX_CPU_ISA"
            .to_owned(),
    ];
    if !matches!(level, "avx512" | "avx2") {
        limits.push(
            "the peers' wheels are built for x86-64-v2, so they run SSE4.2 where rlgrad runs \
             SSE2"
                .to_owned(),
        );
    }
    (env, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_cap_is_the_cpu_uncapped() {
        let setting = IsaSetting::from_levels("avx512", None);
        assert!(!setting.capped && setting.rlgrad_env.is_empty() && setting.peer_env.is_empty());
        assert_eq!(setting.level, "avx512");
        assert_eq!(setting.describe(), "ISA avx512");
    }

    #[test]
    fn the_isa_examples_lines_or_its_last_error_line_decide() {
        let refused = IsaSetting::from_probe(
            Some("avx3"),
            false,
            b"",
            b"   Compiling rlgrad-core\nIsa::from_str: argument `s` is invalid: expected one of \
              sse2, avx2, avx512 or baseline, got `avx3`\n\n",
        );
        assert_eq!(
            refused.unwrap_err(),
            "--isa: Isa::from_str: argument `s` is invalid: expected one of sse2, avx2, avx512 or \
             baseline, got `avx3`"
        );
        let capped =
            IsaSetting::from_probe(Some("avx2"), true, b"cpu avx512\nlevel avx2\n", b"").unwrap();
        assert!(capped.capped);
        assert_eq!(
            (capped.cpu.as_str(), capped.level.as_str()),
            ("avx512", "avx2")
        );
        assert_eq!(capped.rlgrad_env["RLGRAD_MAX_ISA"], "avx2");
        let uncapped = IsaSetting::from_probe(None, true, b"cpu neon\nlevel neon\n", b"").unwrap();
        assert_eq!((uncapped.level.as_str(), uncapped.capped), ("neon", false));
        let silent = IsaSetting::from_probe(Some("avx2"), true, b"cpu avx512\n", b"");
        assert!(silent.unwrap_err().contains("no `level`"));
    }

    #[test]
    fn a_cap_tells_both_sides() {
        let setting = IsaSetting::from_levels("avx512", Some("sse2".to_owned()));
        assert_eq!(setting.rlgrad_env["RLGRAD_MAX_ISA"], "sse2");
        assert!(setting.capped);
        assert_eq!(setting.describe(), "ISA sse2 (capped; the CPU has avx512)");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(setting.peer_env["ATEN_CPU_CAPABILITY"], "default");
            assert!(setting.peer_env["XLA_FLAGS"].ends_with("--xla_cpu_max_isa=SSE4_2"));
            assert!(setting.limits.iter().any(|l| l.contains("SSE4.2")));
            let avx2 = IsaSetting::from_levels("avx512", Some("avx2".to_owned()));
            assert_eq!(avx2.peer_env["ONEDNN_MAX_CPU_ISA"], "AVX2");
            assert!(!avx2.limits.iter().any(|l| l.contains("SSE4.2")));
        }
    }
}
