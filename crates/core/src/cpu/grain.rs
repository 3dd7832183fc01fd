//! Grain sizes: per kernel family, the least work worth a parallel task of its own.
//!
//! A kernel given [`Par::rayon`](crate::Par) splits its work into at most
//! `work / grain` tasks ([`Par::for_work`](crate::Par::for_work)), so work below twice
//! the grain runs inline on the calling thread: handing a piece to another thread costs
//! microseconds (more on a virtual machine, and more again when the two logical CPUs share
//! a core), which small kernels never win back. **Results never depend on the grain**:
//! partitions into pieces and the order pieces are combined in are fixed by the canonical
//! orders, whoever runs them.
//!
//! The defaults were measured, not guessed: `cargo xtask calibrate` times every family's
//! kernel at sizes around its grain on one thread and on two (the second forced to split),
//! and reports where two threads start to pay (two threads at least 1.1x faster at that
//! size and every larger one). On a 2-vCPU AVX-512 Xeon VM (2026-11-26) that crossover,
//! halved (a split needs two tasks), gives the defaults:
//!
//! | family | kernel measured | crossover | default grain |
//! |---|---|---|---|
//! | elementwise | `x * y` | 64K elements (1.41x) | 32K |
//! | reduce | sum | 256K elements (1.56x; 0.91x at 64K) | 128K |
//! | matmul | square `f32` | 1M multiply-adds (1.63x; 0.93x at 256K) | 512K |
//! | recurrence | `[128, B]` scan | 256K elements (3.12x; 0.56x at 64K) | 128K |
//! | batch-major | `[B, 128]` scan | 16K elements (1.29x; 1.03x at 8K)\* | 8K |
//! | sequence | unpad | 64K elements (1.31x) | 32K |
//! | optim | Adam | 64K elements (1.76x) | 32K |
//! | cell | LSTM forward | 1K rows x units (1.18x) | 512 |
//!
//! \* Measured on a 2-vCPU AMD EPYC Zen 5 VM with AVX-512 (2026-11-28), where the
//! time-major family's crossover came at 128K elements (1.35x).
//!
//! The command prints the same table on any machine (two logical CPUs that share a core
//! pay later), and [`set_grain`] applies its figures to a process.
//!
//! ```
//! use rlgrad_core::cpu::grain::{self, Family};
//! assert_eq!(grain::grain(Family::Matmul), grain::default_grain(Family::Matmul));
//! grain::set_grain(Family::Matmul, Some(1 << 16));
//! assert_eq!(grain::grain(Family::Matmul), 1 << 16);
//! grain::set_grain(Family::Matmul, None);
//! assert_eq!(grain::grain(Family::Matmul), grain::default_grain(Family::Matmul));
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

/// A family of CPU kernels that shares one grain, with the unit it is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Elementwise maps, zips and selects, strided copies, gathers and concatenations
    /// (output elements).
    Elementwise,
    /// Sums, means, variances, minima and maxima over the canonical tree (input elements).
    Reduce,
    /// Matrix products (multiply-adds, `m * n * k`).
    Matmul,
    /// The reverse linear recurrences of the return estimators (elements of `[T, B]`).
    Recurrence,
    /// The same over batch-major `[B, T]` data, whose register transposes cost several
    /// times a time-major step (elements).
    BatchMajor,
    /// Ragged sequences: pad, unpad, masked sums and maps (elements written or read).
    Sequence,
    /// Fused optimizer updates and gradient clipping (parameter elements).
    Optim,
    /// Fused recurrent cells (rows times hidden units).
    Cell,
}

impl Family {
    /// Every family, in the order `cargo xtask calibrate` reports them.
    pub const ALL: [Family; 8] = [
        Family::Elementwise,
        Family::Reduce,
        Family::Matmul,
        Family::Recurrence,
        Family::BatchMajor,
        Family::Sequence,
        Family::Optim,
        Family::Cell,
    ];

    /// The family's name, lower case (`elementwise`, `matmul`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Reduce => "reduce",
            Family::Matmul => "matmul",
            Family::Recurrence => "recurrence",
            Family::BatchMajor => "batch-major",
            Family::Sequence => "sequence",
            Family::Optim => "optim",
            Family::Cell => "cell",
        }
    }

    /// What the grain counts.
    pub fn unit(self) -> &'static str {
        match self {
            Family::Matmul => "multiply-adds",
            Family::Cell => "rows x units",
            _ => "elements",
        }
    }
}

/// The grain of `family` unless [`set_grain`] changed it.
pub const fn default_grain(family: Family) -> usize {
    match family {
        Family::Elementwise => 1 << 15,
        Family::Reduce => 1 << 17,
        Family::Matmul => 1 << 19,
        Family::Recurrence => 1 << 17,
        Family::BatchMajor => 1 << 13,
        Family::Sequence => 1 << 15,
        Family::Optim => 1 << 15,
        Family::Cell => 1 << 9,
    }
}

/// Grains set by [`set_grain`]; 0 where none was.
static SET: [AtomicUsize; Family::ALL.len()] = [const { AtomicUsize::new(0) }; Family::ALL.len()];

/// The grain kernels of `family` use now.
pub fn grain(family: Family) -> usize {
    match SET[family as usize].load(Ordering::Relaxed) {
        0 => default_grain(family),
        set => set,
    }
}

/// Sets the grain of `family` for every thread of the process from now on (`None`: back
/// to [`default_grain`]; `Some(0)` counts as 1, so that every kernel may split). Speed
/// changes; results do not.
pub fn set_grain(family: Family, grain: Option<usize>) {
    SET[family as usize].store(grain.map_or(0, |g| g.max(1)), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_every_default_is_positive() {
        let mut names: Vec<_> = Family::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Family::ALL.len());
        for (i, family) in Family::ALL.into_iter().enumerate() {
            assert_eq!(family as usize, i, "ALL is in declaration order");
            assert!(default_grain(family) > 0);
        }
    }

    #[test]
    fn zero_means_every_kernel_may_split() {
        set_grain(Family::Cell, Some(0));
        assert_eq!(grain(Family::Cell), 1);
        set_grain(Family::Cell, None);
        assert_eq!(grain(Family::Cell), default_grain(Family::Cell));
    }
}
