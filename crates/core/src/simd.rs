//! Runtime dispatch to the widest vector unit of the CPU.
//!
//! A [`Vectorized`] job is compiled three times (baseline SSE2, AVX2, AVX-512F) and run in
//! the widest version the CPU supports. The canonical orders never depend on the vector
//! width: lanes and accumulators are fixed by the algorithms, and Rust never contracts a
//! multiply and an add into an FMA, so every version gives the same bits (tests compare
//! them).

/// A job whose body should be compiled for each instruction set. Implementations mark
/// `run` `#[inline(always)]` so that it is compiled inside the feature-enabled wrappers.
pub(crate) trait Vectorized {
    type Output;
    fn run(self) -> Self::Output;
}

/// Runs `job` in the widest version the CPU supports.
pub(crate) fn widest<K: Vectorized>(job: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { x86::avx512(job) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { x86::avx2(job) };
        }
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
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            out.push(("avx512f", unsafe { x86::avx512(job.clone()) }));
        }
        if std::arch::is_x86_feature_detected!("avx2") {
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

    #[target_feature(enable = "avx2")]
    pub(super) fn avx2<K: Vectorized>(job: K) -> K::Output {
        job.run()
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn avx512<K: Vectorized>(job: K) -> K::Output {
        job.run()
    }
}
