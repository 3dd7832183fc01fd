"""`cargo xtask compare`'s Python workloads, P3 (GAE) and P4 (pad/unpad): the peers' `run.py`
with P3 and P4 in place of its workloads W0-W7, one side at a time.

    python compare.py --side rlgrad|peers [run.py's options: --only P3,P4 --threads 1|2|both
                                           --quick --out FILE -v ...]

The jobs run as the peers' do: one process per (workload, group, thread count), after a
wait for a quiet machine, retried when other processes took its cores, into run.py's
results JSON and tables. `--side rlgrad` runs the `rlgrad` group of each driver (the
wheel's calls), `--side peers` every other group, so that `cargo xtask compare` can
alternate the two sides round by round as it does for the Rust benches.
The wheel must be importable (`cargo xtask compare` puts it on PYTHONPATH); the peer
drivers' folder comes from $RLGRAD_PEERS.
"""

import argparse
import sys
from pathlib import Path

import pbench  # noqa: F401 - puts the peer drivers on the import path
import run

HERE = Path(__file__).resolve().parent
SCRIPTS = {"P3": "p3_gae.py", "P4": "p4_padding.py"}
TITLES = {
    "P3": "rlgrad.returns.gae from Python (gamma 0.99, lambda 0.95), [T, B] f32",
    "P4": "rlgrad.mask.pad / unpad from Python, f32",
}
# Groups in run.py's notation: ":1" is single-threaded library code, run at 1 thread only.
SIDES = {
    "rlgrad": {"P3": "rlgrad", "P4": "rlgrad"},
    "peers": {"P3": "numpy:1 torch jax torchrl", "P4": "numpy:1 torch"},
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--side", choices=list(SIDES), required=True)
    args, rest = ap.parse_known_args()
    # run.py reads its job table from these module globals when main() builds the jobs;
    # a script path that is absolute stays so when run.py joins it to its own folder.
    run.WORKLOADS = {w: (str(HERE / SCRIPTS[w]), spec) for w, spec in SIDES[args.side].items()}
    run.TITLES = TITLES
    sys.argv = [sys.argv[0]] + rest
    return run.main()


if __name__ == "__main__":
    sys.exit(main())
