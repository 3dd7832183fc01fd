//! What a test or a tool does when the GPU (or NVRTC) it needs is missing.
//!
//! By default it prints that it skipped and why, and passes: `cargo test` and CI run on
//! machines without a GPU. On a GPU machine that is wrong: a run that skipped everything
//! would look like a run that passed. `RLGRAD_REQUIRE_GPU=1` (the GPU runner sets it)
//! turns every such skip into a failure.

use std::fmt::Display;

/// The environment variable that turns skips into failures when set to `1`.
pub const REQUIRE_GPU: &str = "RLGRAD_REQUIRE_GPU";

/// Whether [`REQUIRE_GPU`] is set to `1` in this process's environment.
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU).is_ok_and(|v| v == "1")
}

/// The outcome of missing `what` (the GPU, NVRTC) because of `why`: the line that says
/// it was skipped, or, when `required`, the error that says it may not be.
pub fn skip_outcome(required: bool, what: &str, why: &dyn Display) -> Result<String, String> {
    if required {
        Err(format!(
            "{REQUIRE_GPU}=1 and no {what}: {why} (a run that skips would pass without \
             running anything)"
        ))
    } else {
        Ok(format!("SKIPPED (no {what}): {why}"))
    }
}

/// Skips what needs `what` (printing why), or panics when [`gpu_required`]: for tests.
///
/// ```
/// // Without RLGRAD_REQUIRE_GPU=1 this prints `SKIPPED (no GPU): ...` and returns.
/// # if !rlgrad_cuda::gpu_required() {
/// rlgrad_cuda::skip("GPU", &"no driver");
/// # }
/// ```
pub fn skip(what: &str, why: &dyn Display) {
    match skip_outcome(gpu_required(), what, why) {
        Ok(line) => println!("{line}"),
        Err(message) => panic!("{message}"),
    }
}

/// The line a GPU test prints once, when it ends, with how many elements it compared
/// with the Cpu and how many of them differed: the GPU runner (`cargo xtask gpu-run`)
/// reads it back (its `parse_bits_line`, which pins the same text) and reports the counts
/// per test.
pub fn bits_line(compared: u64, differing: u64) -> String {
    format!("rlgrad-bits: compared {compared}, differing {differing}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bits_line_is_the_text_the_gpu_runner_reads() {
        // xtask's gpu.rs parses exactly this text (its test pins it too).
        assert_eq!(bits_line(7, 2), "rlgrad-bits: compared 7, differing 2");
    }

    #[test]
    fn a_required_gpu_makes_a_skip_an_error() {
        let skipped = skip_outcome(false, "GPU", &"CUDA_ERROR_NO_DEVICE").unwrap();
        assert_eq!(skipped, "SKIPPED (no GPU): CUDA_ERROR_NO_DEVICE");
        let refused = skip_outcome(true, "NVRTC", &"libnvrtc.so.13 not found").unwrap_err();
        assert!(
            refused.starts_with("RLGRAD_REQUIRE_GPU=1 and no NVRTC: libnvrtc.so.13 not found"),
            "{refused}"
        );
    }
}
