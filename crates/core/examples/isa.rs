//! Which vector instruction set rlgrad's Cpu kernels run in on this machine.
//!
//! ```text
//! cargo run --release -p rlgrad-core --example isa            cpu avx512 / level avx512
//! cargo run --release -p rlgrad-core --example isa -- avx2    cpu avx512 / level avx2
//! ```
//!
//! Prints the CPU's widest level and the level a cap (`LEVEL`, else `RLGRAD_MAX_ISA`)
//! leaves, one `name value` line each; a level this CPU cannot run is an error. Results
//! are the same bits at every level: only the speed differs. `cargo xtask compare --isa`
//! asks this example before it caps both sides of a comparison.

use std::process::ExitCode;

use rlgrad_core::cpu::simd::{self, Isa};

fn main() -> ExitCode {
    match report() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the two lines, or says why the level asked for is not one this CPU runs.
fn report() -> Result<(), rlgrad_core::Error> {
    let cpu = simd::detected();
    let level = match std::env::args().nth(1) {
        Some(wanted) => wanted.parse::<Isa>()?,
        None => simd::env_cap()?.map_or(cpu, |cap| cap.min(cpu)),
    };
    if !level.is_supported() {
        return Err(rlgrad_core::Error::value(
            "isa example",
            "LEVEL",
            format!("a level this CPU runs (its widest is {cpu})"),
            level.to_string(),
        ));
    }
    println!("cpu {cpu}");
    println!("level {level}");
    Ok(())
}
