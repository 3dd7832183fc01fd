//! Which vector instruction set the CPU kernels run in, and a cap on it.
//!
//! Every hot CPU kernel is compiled once per instruction set ([`Isa`]: the target's
//! baseline, AVX2 + FMA, AVX-512F + FMA on x86-64) and runs in the widest version the CPU
//! has, down to a cap: [`set_max_isa`], or the environment variable `RLGRAD_MAX_ISA`
//! (`avx512`, `avx2`, `sse2`/`baseline`; `neon` on aarch64), read once. The cap exists to
//! measure and test the narrower versions on a wide machine (`cargo xtask compare --isa
//! avx2`, the cross-ISA golden tests): **results never depend on it**. The canonical orders
//! fix the lanes and accumulators independently of the vector width, and Rust never
//! contracts a multiply and an add into an FMA, so every version gives the same bits.
//!
//! ```
//! use rlgrad_core::cpu::simd::{self, Isa};
//! let widest = simd::detected();
//! simd::set_max_isa(Some(Isa::Baseline));
//! assert_eq!(simd::isa(), Isa::Baseline);
//! simd::set_max_isa(None);
//! let cap = simd::env_cap()?.unwrap_or(widest);
//! assert_eq!(simd::isa(), widest.min(cap));
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::{Error, Result};

/// An instruction set the CPU kernels have a version for, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Isa {
    /// What every CPU of the target has: SSE2 on x86-64, NEON on aarch64.
    Baseline,
    /// AVX2 with FMA (x86-64: Haswell, Zen and later).
    Avx2,
    /// AVX-512F with AVX2 and FMA (x86-64: Skylake-SP, Zen 4 and later).
    Avx512,
}

impl Isa {
    /// Every level, narrowest first.
    pub const ALL: [Isa; 3] = [Isa::Baseline, Isa::Avx2, Isa::Avx512];

    /// The name `RLGRAD_MAX_ISA` and `cargo xtask compare --isa` take: `sse2` (or `neon`,
    /// or `baseline` on other targets), `avx2`, `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Baseline if cfg!(target_arch = "x86_64") => "sse2",
            Isa::Baseline if cfg!(target_arch = "aarch64") => "neon",
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether this CPU can run this level.
    pub fn is_supported(self) -> bool {
        self <= detected()
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Isa {
    type Err = Error;

    /// `avx512`, `avx2`, `baseline`, and the baseline's own name (`sse2` on x86-64, `neon`
    /// on aarch64); any case.
    fn from_str(s: &str) -> Result<Self> {
        let wanted = s.trim().to_ascii_lowercase();
        if wanted == "baseline" {
            return Ok(Isa::Baseline);
        }
        Isa::ALL
            .into_iter()
            .find(|isa| isa.name() == wanted)
            .ok_or_else(|| {
                let names: Vec<_> = Isa::ALL.iter().map(|isa| isa.name()).collect();
                Error::value(
                    "Isa::from_str",
                    "s",
                    format!("one of {} or baseline", names.join(", ")),
                    format!("`{s}`"),
                )
            })
    }
}

/// The widest level this CPU supports.
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            return if has!("avx512f") {
                Isa::Avx512
            } else {
                Isa::Avx2
            };
        }
    }
    Isa::Baseline
}

/// The cap set by `RLGRAD_MAX_ISA` when the process started using kernels: `Ok(None)`
/// when unset, an error naming the value when it is not a level's name.
pub fn env_cap() -> Result<Option<Isa>> {
    match std::env::var("RLGRAD_MAX_ISA") {
        Ok(value) if value.trim().is_empty() => Ok(None),
        Ok(value) => value.parse().map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(value)) => Err(Error::value(
            "simd::env_cap",
            "RLGRAD_MAX_ISA",
            "an instruction set's name",
            format!("{value:?}"),
        )),
    }
}

/// `RLGRAD_MAX_ISA`, read once. A value that names no level is reported on stderr once
/// and ignored: kernels cannot return the error, and the cap never changes results.
fn env_cap_once() -> Option<Isa> {
    static CAP: OnceLock<Option<Isa>> = OnceLock::new();
    *CAP.get_or_init(|| {
        env_cap().unwrap_or_else(|e| {
            eprintln!("rlgrad: ignoring RLGRAD_MAX_ISA: {e}");
            None
        })
    })
}

/// [`set_max_isa`]'s cap: 0 when none was set (the environment's applies), else the
/// level's index in [`Isa::ALL`] plus one.
static SET_CAP: AtomicU8 = AtomicU8::new(0);

/// Caps the level the CPU kernels use from now on, in every thread (`None`: back to
/// `RLGRAD_MAX_ISA`, else the widest the CPU has). Results do not change; speed does.
pub fn set_max_isa(cap: Option<Isa>) {
    let encoded = cap.map_or(0, |isa| isa as u8 + 1);
    SET_CAP.store(encoded, Ordering::Relaxed);
}

/// The level the CPU kernels run in: the widest the CPU supports, at most the cap.
pub fn isa() -> Isa {
    let cap = match SET_CAP.load(Ordering::Relaxed) {
        0 => env_cap_once(),
        encoded => Some(Isa::ALL[usize::from(encoded - 1)]),
    };
    let widest = detected();
    cap.map_or(widest, |cap| cap.min(widest))
}

/// Whether kernels may use `level` now (the CPU has it and the cap allows it).
#[cfg(target_arch = "x86_64")]
pub(crate) fn enabled(level: Isa) -> bool {
    level <= isa()
}

/// A job whose body should be compiled for each instruction set. Implementations mark
/// `run` `#[inline(always)]` so that it is compiled inside the feature-enabled wrappers.
pub(crate) trait Vectorized {
    type Output;
    fn run(self) -> Self::Output;
}

/// Runs `job` in the version for [`isa`].
pub(crate) fn widest<K: Vectorized>(job: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` never exceeds what the CPU supports (`detected`).
        Isa::Avx512 => return unsafe { x86::avx512(job) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::avx2(job) },
        Isa::Baseline => {}
    }
    job.run()
}

/// The versions of a job, for tests that compare them: `(name, result)` for the baseline
/// and every extension this CPU has.
#[cfg(test)]
// (Elsewhere the baseline is the only version, with nothing pushed before it: on aarch64
// it is NEON.)
#[cfg_attr(
    not(target_arch = "x86_64"),
    allow(unused_mut, clippy::vec_init_then_push)
)]
pub(crate) fn every_version<K: Vectorized + Clone>(job: K) -> Vec<(&'static str, K::Output)> {
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if Isa::Avx512.is_supported() {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            out.push(("avx512f", unsafe { x86::avx512(job.clone()) }));
        }
        if Isa::Avx2.is_supported() {
            // SAFETY: the CPU supports AVX2, checked just above.
            out.push(("avx2", unsafe { x86::avx2(job.clone()) }));
        }
    }
    out.push(("baseline", job.run()));
    out
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Vectorized;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn avx2<K: Vectorized>(job: K) -> K::Output {
        job.run()
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) fn avx512<K: Vectorized>(job: K) -> K::Output {
        job.run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_say_what_is_accepted() {
        for isa in Isa::ALL {
            assert_eq!(isa.name().parse::<Isa>().unwrap(), isa);
            assert_eq!(isa.name().to_uppercase().parse::<Isa>().unwrap(), isa);
        }
        assert_eq!("baseline".parse::<Isa>().unwrap(), Isa::Baseline);
        let message = "avx3".parse::<Isa>().unwrap_err().to_string();
        assert!(message.contains("Isa::from_str") && message.contains("`avx3`"));
        assert!(message.contains("avx2"), "{message}");
    }

    #[test]
    fn the_cap_lowers_the_level_and_never_raises_it() {
        let widest = detected();
        set_max_isa(Some(Isa::Baseline));
        assert_eq!(isa(), Isa::Baseline);
        assert!(isa() < Isa::Avx2);
        set_max_isa(Some(Isa::Avx512));
        assert_eq!(isa(), widest, "a cap above the CPU's level changes nothing");
        set_max_isa(None);
        assert!(isa() <= widest);
    }
}
