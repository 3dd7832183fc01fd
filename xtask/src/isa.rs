//! `--isa` of `cargo xtask compare` and `examples-compare`: both sides capped to one vector
//! instruction set, so that an AVX-512 machine also measures what AVX2 and SSE users get.
//!
//! rlgrad's side gets `RLGRAD_MAX_ISA` ([`rlgrad_core::simd`]). The peers get the switches
//! their libraries read: PyTorch's `ATEN_CPU_CAPABILITY`, XLA's `--xla_cpu_max_isa`,
//! oneDNN's `ONEDNN_MAX_CPU_ISA` (PyTorch's and TensorFlow's), MKL's
//! `MKL_ENABLE_INSTRUCTIONS` and NumPy's `NPY_DISABLE_CPU_FEATURES`. Two limits, recorded
//! in every sitting's JSON: the peers' wheels are built for x86-64-v2, so `sse2` caps them
//! at SSE4.2 (rlgrad runs plain SSE2: the comparison favours the peers), and TensorFlow's
//! Eigen kernels run the instruction set the wheel was compiled for whatever the cap.

use std::collections::BTreeMap;

use rlgrad_core::simd::{self, Isa};
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
    /// the value names no level or one this CPU cannot run.
    pub fn new(value: Option<&str>) -> Result<Self, String> {
        let cpu = simd::detected();
        let Some(value) = value else {
            return Ok(Self {
                cpu: cpu.name().to_owned(),
                level: cpu.name().to_owned(),
                capped: false,
                rlgrad_env: BTreeMap::new(),
                peer_env: BTreeMap::new(),
                limits: Vec::new(),
            });
        };
        let level: Isa = value.parse().map_err(|e| format!("--isa: {e}"))?;
        if !level.is_supported() {
            return Err(format!(
                "--isa {level}: this CPU's widest level is {cpu}; measure {level} on a CPU \
                 that has it"
            ));
        }
        let rlgrad_env = BTreeMap::from([("RLGRAD_MAX_ISA".to_owned(), level.name().to_owned())]);
        let (peer_env, limits) = peer_switches(level);
        Ok(Self {
            cpu: cpu.name().to_owned(),
            level: level.name().to_owned(),
            capped: true,
            rlgrad_env,
            peer_env,
            limits,
        })
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

/// The peers' environment for `level`, and what it cannot cap.
fn peer_switches(level: Isa) -> (BTreeMap<String, String>, Vec<String>) {
    if !cfg!(target_arch = "x86_64") {
        return (
            BTreeMap::new(),
            vec!["the peers' libraries have no ISA switch on this architecture".to_owned()],
        );
    }
    // (PyTorch, XLA, oneDNN, MKL, NumPy's dispatch groups above the level)
    let (aten, xla, onednn, mkl, numpy_off) = match level {
        Isa::Avx512 => (
            "avx512",
            "AVX512",
            "AVX512_CORE",
            "AVX512",
            "AVX512_ICL AVX512_SPR",
        ),
        Isa::Avx2 => (
            "avx2",
            "AVX2",
            "AVX2",
            "AVX2",
            "X86_V4 AVX512_ICL AVX512_SPR",
        ),
        Isa::Baseline => (
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
    if level == Isa::Baseline {
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
    fn no_flag_is_the_cpu_uncapped() {
        let setting = IsaSetting::new(None).unwrap();
        assert!(!setting.capped && setting.rlgrad_env.is_empty() && setting.peer_env.is_empty());
        assert_eq!(setting.level, simd::detected().name());
    }

    #[test]
    fn a_cap_tells_both_sides() {
        let setting = IsaSetting::new(Some("baseline")).unwrap();
        assert_eq!(setting.rlgrad_env["RLGRAD_MAX_ISA"], Isa::Baseline.name());
        assert!(setting.capped);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(setting.peer_env["ATEN_CPU_CAPABILITY"], "default");
            assert!(setting.peer_env["XLA_FLAGS"].ends_with("--xla_cpu_max_isa=SSE4_2"));
            assert!(setting.limits.iter().any(|l| l.contains("SSE4.2")));
        }
    }

    #[test]
    fn bad_or_unsupported_levels_are_errors() {
        let error = IsaSetting::new(Some("avx3")).unwrap_err();
        assert!(
            error.contains("--isa") && error.contains("`avx3`"),
            "{error}"
        );
        if simd::detected() < Isa::Avx512 {
            let error = IsaSetting::new(Some("avx512")).unwrap_err();
            assert!(error.contains("widest level"), "{error}");
        }
    }
}
