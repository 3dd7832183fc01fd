//! The peers' workloads W0-W7 and, for each, the rlgrad bench cases that do the same
//! thing: same shapes, f32, same formulation, same thread count; and the Python workloads
//! P3 and P4, rlgrad's wheel called from Python beside W3's and W4's peers.
//!
//! Giving a workload its rlgrad side is one entry here plus its bench:
//!
//! 1. a bench target in `benches/benches/<name>.rs` (and a `[[bench]]` entry in
//!    `benches/Cargo.toml`) that runs at the thread counts of
//!    `rlgrad_benches::thread_counts()`, times inside `Threads::bench`, and calls
//!    `rlgrad_benches::check` on each compared case before timing it (`returns.rs` is
//!    the model);
//! 2. `rlgrad: Some(RlgradSide { runs: Runs::Bench("<name>"), cases: &[...] })` on the
//!    workload below, one [`Case`] per peer case (W6's and W7's peer case names go on with
//!    the block size, which `--quick` changes, so their cases match on the prefix
//!    `batch 100` / `batch 256`).
//!
//! A Python workload has both sides in one driver, `crates/python/bench/p<N>_*.py` (the
//! peers' driver schema, with an `rlgrad` group that prints the same `compare-check`
//! lines as the benches), run through `crates/python/bench/compare.py`: its entry is
//! `Runs::Python("<driver file>")` and one [`python_case`] per rlgrad row.

/// One workload of the peer drivers (`w<N>_*.py`).
#[derive(Debug)]
pub struct Workload {
    /// `W0` ... `W7`, as `run.sh --only` takes it.
    pub id: &'static str,
    pub title: &'static str,
    /// rlgrad's side, `None` while rlgrad cannot run the workload yet.
    pub rlgrad: Option<RlgradSide>,
}

/// What runs a workload's cases on rlgrad's side, and the cases.
#[derive(Debug)]
pub struct RlgradSide {
    pub runs: Runs,
    pub cases: &'static [Case],
}

/// Who times rlgrad's side of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// A criterion bench target of the `rlgrad-benches` package (`benches/benches/<name>.rs`).
    Bench(&'static str),
    /// The `rlgrad` group of a Python driver in `crates/python/bench/` (file name), whose
    /// other groups are the workload's peers: both sides run through `compare.py`.
    Python(&'static str),
}

impl Runs {
    /// The bench target or the driver's file name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bench(name) | Self::Python(name) => name,
        }
    }
}

/// One compared case: a criterion bench (or a Python driver's rlgrad row) and the peer
/// rows that compute the same thing.
#[derive(Debug)]
pub struct Case {
    /// How tables and summary lines name the case (no `:`; summary lines split on it).
    pub label: &'static str,
    /// The criterion group of the bench (`returns_f32/2048x64`); for a Python driver, its
    /// case name (the same as `peer_case`).
    pub group: &'static str,
    /// The criterion function; the bench appends the thread count: `gae` -> `gae/1t`. For
    /// a Python driver, the rlgrad row's implementation name.
    pub function: &'static str,
    /// The peers' case name, as in their JSON rows; a name that goes on with `, ...`
    /// (W6/W7 add the block size) matches too.
    pub peer_case: &'static str,
    /// Which of the case's peer rows are the same operation.
    pub peer_impls: PeerImpls,
    /// The W0 size whose bandwidth bounds the case (`bytes / GB/s`, as the peers' `bound`
    /// column), or `None` where the peers report no bound.
    pub bound: Option<&'static str>,
}

/// A filter on the peers' implementation names.
#[derive(Debug)]
pub struct PeerImpls {
    /// Names starting with one of these (every name when empty).
    pub starting_with: &'static [&'static str],
    /// Names containing none of these.
    pub excluding: &'static [&'static str],
}

impl PeerImpls {
    const ALL: Self = Self {
        starting_with: &[],
        excluding: &[],
    };

    pub fn matches(&self, name: &str) -> bool {
        (self.starting_with.is_empty() || self.starting_with.iter().any(|p| name.starts_with(p)))
            && !self.excluding.iter().any(|x| name.contains(x))
    }
}

/// One timing of a case in a bench process: its thread count, and whether it is that
/// count's second run in the process (the A/A repeat, `1t-again`, `rlgrad_benches::Threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub threads: usize,
    pub again: bool,
}

impl From<usize> for Slot {
    fn from(threads: usize) -> Self {
        Self {
            threads,
            again: false,
        }
    }
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let again = if self.again { "-again" } else { "" };
        write!(f, "{}t{again}", self.threads)
    }
}

impl Case {
    /// The criterion id of the case at `slot` (a thread count): `returns_f32/2048x64/gae/1t`.
    pub fn bench_id(&self, slot: impl Into<Slot>) -> String {
        format!("{}/{}", self.group, self.function_id(slot))
    }

    /// The criterion function id at `slot` (a thread count): `gae/1t`, `gae/1t-again`.
    pub fn function_id(&self, slot: impl Into<Slot>) -> String {
        format!("{}/{}", self.function, slot.into())
    }

    pub fn matches_peer_case(&self, name: &str) -> bool {
        name.strip_prefix(self.peer_case)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(','))
    }
}

/// W4's pad cases: every pad that allocates its output (the preallocated one is its own
/// case).
const FRESH_PADS: PeerImpls = PeerImpls {
    starting_with: &["pad "],
    excluding: &["preallocated"],
};
const PREALLOCATED_PAD: PeerImpls = PeerImpls {
    starting_with: &["pad numpy bool mask assign, preallocated out"],
    excluding: &[],
};
const UNPADS: PeerImpls = PeerImpls {
    starting_with: &["unpad "],
    excluding: &[],
};

/// A case of a Python driver: its rlgrad row `function` of driver case `peer_case`, against
/// the peer rows `peer_impls` of that case (no bandwidth bound: a Python call's own cost
/// is what the Python workloads measure).
const fn python_case(
    label: &'static str,
    peer_case: &'static str,
    function: &'static str,
    peer_impls: PeerImpls,
) -> Case {
    Case {
        label,
        group: peer_case,
        function,
        peer_case,
        peer_impls,
        bound: None,
    }
}

const fn padding(
    label: &'static str,
    group: &'static str,
    function: &'static str,
    peer_case: &'static str,
    peer_impls: PeerImpls,
    bound: &'static str,
) -> Case {
    Case {
        label,
        group,
        function,
        peer_case,
        peer_impls,
        bound: Some(bound),
    }
}

pub const WORKLOADS: &[Workload] = &[
    Workload {
        id: "W0",
        title: "memory bandwidth: a copy of 64M f32 (Rust's loop, not an rlgrad kernel)",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("reduce"),
            cases: &[Case {
                label: "copy 64M",
                group: "sum_64m_f32",
                function: "copy",
                peer_case: "64M",
                peer_impls: PeerImpls {
                    starting_with: &["numpy copyto", "torch copy_"],
                    excluding: &[],
                },
                bound: None,
            }],
        }),
    },
    Workload {
        id: "W1",
        title: "one Adam step on one flat f32 parameter (PyTorch's formula)",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("optim"),
            cases: &[
                Case {
                    label: "P=1M",
                    group: "optim_f32/1M",
                    function: "adam",
                    peer_case: "P=1M",
                    peer_impls: PeerImpls::ALL,
                    bound: Some("1M"),
                },
                Case {
                    label: "P=16M",
                    group: "optim_f32/16M",
                    function: "adam",
                    peer_case: "P=16M",
                    peer_impls: PeerImpls::ALL,
                    bound: Some("16M"),
                },
            ],
        }),
    },
    Workload {
        id: "W2",
        title: "discounted returns with episode ends, [T, B] f32, gamma 0.99",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("returns"),
            cases: &[
                Case {
                    label: "[2048,64]",
                    group: "returns_f32/2048x64",
                    function: "discounted_returns",
                    peer_case: "T=2048,B=64",
                    // lfilter ignores the episode ends: the peers keep it for reference only.
                    peer_impls: PeerImpls {
                        starting_with: &[],
                        excluding: &["(no dones)"],
                    },
                    bound: Some("128K"),
                },
                Case {
                    label: "[128,1024]",
                    group: "returns_f32/128x1024",
                    function: "discounted_returns",
                    peer_case: "T=128,B=1024",
                    peer_impls: PeerImpls {
                        starting_with: &[],
                        excluding: &["(no dones)"],
                    },
                    bound: Some("128K"),
                },
            ],
        }),
    },
    Workload {
        id: "W3",
        title: "GAE advantages (gamma 0.99, lambda 0.95), [T, B] f32",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("returns"),
            cases: &[
                Case {
                    label: "[2048,64]",
                    group: "returns_f32/2048x64",
                    function: "gae",
                    peer_case: "T=2048,B=64",
                    peer_impls: PeerImpls::ALL,
                    bound: Some("128K"),
                },
                Case {
                    label: "[128,1024]",
                    group: "returns_f32/128x1024",
                    function: "gae",
                    peer_case: "T=128,B=1024",
                    peer_impls: PeerImpls::ALL,
                    bound: Some("128K"),
                },
            ],
        }),
    },
    Workload {
        id: "W4",
        title: "pad / unpad of ragged f32 sequences (pad: fresh or preallocated output)",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("mask"),
            cases: &[
                padding("seed pad", "mask_f32/seed", "pad", SEED, FRESH_PADS, "128K"),
                padding(
                    "seed pad_into",
                    "mask_f32/seed",
                    "pad_into",
                    SEED,
                    PREALLOCATED_PAD,
                    "128K",
                ),
                padding("seed unpad", "mask_f32/seed", "unpad", SEED, UNPADS, "128K"),
                padding(
                    "large pad",
                    "mask_f32/large",
                    "pad",
                    LARGE,
                    FRESH_PADS,
                    "16M",
                ),
                padding(
                    "large pad_into",
                    "mask_f32/large",
                    "pad_into",
                    LARGE,
                    PREALLOCATED_PAD,
                    "16M",
                ),
                padding(
                    "large unpad",
                    "mask_f32/large",
                    "unpad",
                    LARGE,
                    UNPADS,
                    "16M",
                ),
            ],
        }),
    },
    Workload {
        id: "W5",
        title: "masked mean, forward + backward, x [256, 200] f32",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("mask"),
            cases: &[Case {
                label: "[256,200]",
                group: "mask_f32/masked_mean",
                function: "fwd_bwd_256x200",
                peer_case: "x[256,200]",
                peer_impls: PeerImpls {
                    starting_with: &[],
                    excluding: &["forward only"],
                },
                bound: None,
            }],
        }),
    },
    Workload {
        id: "W6",
        title: "training step of the seed MLP 8-64-64-1, batch 100, Adam 5e-4",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("autodiff"),
            cases: &[
                Case {
                    label: "seed MLP step",
                    group: "autodiff_f32/w6_seed_mlp",
                    function: "step",
                    peer_case: "batch 100",
                    peer_impls: PeerImpls::ALL,
                    bound: None,
                },
                // The same step with the tape's and the optimizer's finite checks on: what
                // naming the first NaN costs.
                Case {
                    label: "seed MLP step, finite checks on",
                    group: "autodiff_f32/w6_seed_mlp",
                    function: "step_checked",
                    peer_case: "batch 100",
                    peer_impls: PeerImpls::ALL,
                    bound: None,
                },
            ],
        }),
    },
    Workload {
        id: "W7",
        title: "TD3 iteration (400-300 actor, twin 400-300 critics, batch 256)",
        rlgrad: Some(RlgradSide {
            runs: Runs::Bench("autodiff"),
            cases: &[Case {
                label: "TD3 iteration",
                group: "autodiff_f32/w7_td3",
                function: "iteration",
                peer_case: "batch 256",
                peer_impls: PeerImpls::ALL,
                bound: None,
            }],
        }),
    },
    Workload {
        id: "P3",
        title: "rlgrad.returns.gae from Python beside W3's peers, [T, B] f32",
        rlgrad: Some(RlgradSide {
            runs: Runs::Python("p3_gae.py"),
            cases: &[
                python_case("[128,8]", "T=128,B=8", GAE_NUMPY, PeerImpls::ALL),
                python_case("[128,8] torch", "T=128,B=8", GAE_TORCH, PeerImpls::ALL),
                python_case("[2048,64]", "T=2048,B=64", GAE_NUMPY, PeerImpls::ALL),
                python_case("[2048,64] torch", "T=2048,B=64", GAE_TORCH, PeerImpls::ALL),
                python_case("[128,1024]", "T=128,B=1024", GAE_NUMPY, PeerImpls::ALL),
                python_case(
                    "[128,1024] torch",
                    "T=128,B=1024",
                    GAE_TORCH,
                    PeerImpls::ALL,
                ),
            ],
        }),
    },
    Workload {
        id: "P4",
        title: "rlgrad.mask.pad / unpad from Python beside W4's numpy and torch peers, f32",
        rlgrad: Some(RlgradSide {
            runs: Runs::Python("p4_padding.py"),
            cases: &[
                python_case("seed pad", SEED, PAD_NUMPY, FRESH_PADS),
                python_case("seed pad torch", SEED, PAD_TORCH, FRESH_PADS),
                python_case("seed unpad", SEED, UNPAD_NUMPY, UNPADS),
                python_case("seed unpad torch", SEED, UNPAD_TORCH, UNPADS),
                python_case("large pad", LARGE, PAD_NUMPY, FRESH_PADS),
                python_case("large pad torch", LARGE, PAD_TORCH, FRESH_PADS),
                python_case("large unpad", LARGE, UNPAD_NUMPY, UNPADS),
                python_case("large unpad torch", LARGE, UNPAD_TORCH, UNPADS),
            ],
        }),
    },
];

// The rlgrad rows of the Python drivers: NumPy arrays in and out, or PyTorch CPU tensors
// through `.numpy()` and `torch.from_numpy`.
const GAE_NUMPY: &str = "rlgrad.returns.gae (numpy)";
const GAE_TORCH: &str = "rlgrad.returns.gae (torch tensors)";
const PAD_NUMPY: &str = "pad rlgrad.mask.pad (numpy)";
const PAD_TORCH: &str = "pad rlgrad.mask.pad (torch tensors)";
const UNPAD_NUMPY: &str = "unpad rlgrad.mask.unpad (numpy)";
const UNPAD_TORCH: &str = "unpad rlgrad.mask.unpad (torch tensors)";
// W4's case names (P4 runs W4's code).
const SEED: &str = "seed B=100 L~U[10,50) F=10";
const LARGE: &str = "large B=1024 L~U[1,200) F=64";

impl Workload {
    /// Whether rlgrad's side is Python: such workloads run only when `--only` names them
    /// (they build the wheel, which needs maturin from PyPI).
    pub fn is_python(&self) -> bool {
        matches!(
            self.rlgrad,
            Some(RlgradSide {
                runs: Runs::Python(_),
                ..
            })
        )
    }
}

/// The workload `id` (case-insensitive), or an error listing the known ones.
pub fn find(id: &str) -> Result<&'static Workload, String> {
    WORKLOADS
        .iter()
        .find(|w| w.id.eq_ignore_ascii_case(id.trim()))
        .ok_or_else(|| {
            let known: Vec<&str> = WORKLOADS.iter().map(|w| w.id).collect();
            format!(
                "--only: unknown workload `{id}`; known: {}",
                known.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_a_distinct_id_and_labels_without_colons() {
        let ids: std::collections::BTreeSet<&str> = WORKLOADS.iter().map(|w| w.id).collect();
        assert_eq!(ids.len(), WORKLOADS.len());
        for side in WORKLOADS.iter().filter_map(|w| w.rlgrad.as_ref()) {
            assert!(side.cases.iter().all(|c| !c.label.contains(':')));
        }
    }

    #[test]
    fn peer_impl_filters_select_the_same_operation() {
        assert!(FRESH_PADS.matches("pad torch pad_sequence(list)"));
        assert!(!FRESH_PADS.matches("pad numpy bool mask assign, preallocated out"));
        assert!(!FRESH_PADS.matches("unpad numpy bool index"));
        assert!(PREALLOCATED_PAD.matches("pad numpy bool mask assign, preallocated out"));
        assert!(UNPADS.matches("unpad tf.function(boolean_mask)"));
        let w2 = find("w2").unwrap().rlgrad.as_ref().unwrap();
        assert!(
            !w2.cases[0]
                .peer_impls
                .matches("scipy lfilter axis=0 (no dones)")
        );
        assert!(w2.cases[0].peer_impls.matches("jax lax.scan (jit)"));
    }

    #[test]
    fn peer_cases_match_whole_names_or_names_that_go_on_with_a_comma() {
        let w1 = find("W1").unwrap().rlgrad.as_ref().unwrap();
        assert!(w1.cases[0].matches_peer_case("P=1M"));
        assert!(!w1.cases[0].matches_peer_case("P=16M"));
        let mlp_step = Case {
            peer_case: "batch 100",
            ..padding("x", "g", "f", "", PeerImpls::ALL, "1M")
        };
        assert!(mlp_step.matches_peer_case("batch 100, 400 steps/block"));
        assert!(!mlp_step.matches_peer_case("batch 1000"));
    }

    #[test]
    fn python_workloads_name_their_driver_and_its_rlgrad_rows() {
        let driver_dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/python/bench");
        for id in ["P3", "P4"] {
            let workload = find(id).unwrap();
            assert!(workload.is_python());
            let side = workload.rlgrad.as_ref().unwrap();
            assert!(driver_dir.join(side.runs.name()).is_file(), "{id}");
        }
        assert!(!find("W3").unwrap().is_python());
        let small = &find("p3").unwrap().rlgrad.as_ref().unwrap().cases[0];
        // The id the driver's check line carries: its case, its row, the thread count.
        assert_eq!(small.bench_id(1), "T=128,B=8/rlgrad.returns.gae (numpy)/1t");
        assert!(small.matches_peer_case("T=128,B=8"));
        let large_pad = &find("P4").unwrap().rlgrad.as_ref().unwrap().cases[4];
        assert_eq!(large_pad.label, "large pad");
        assert!(large_pad.peer_impls.matches("pad torch pad_sequence(list)"));
    }

    #[test]
    fn bench_ids_carry_the_thread_count() {
        let gae = &find("W3").unwrap().rlgrad.as_ref().unwrap().cases[0];
        assert_eq!(gae.bench_id(2), "returns_f32/2048x64/gae/2t");
        let again = Slot {
            threads: 1,
            again: true,
        };
        assert_eq!(gae.bench_id(again), "returns_f32/2048x64/gae/1t-again");
        assert!(find("W9").is_err());
    }
}
