"""What the Python workload drivers (P3, P4) share: the peer drivers' modules on the import
path, the wheel's import, and the float64 check of an rlgrad row before it is timed.

The peer drivers' folder comes from $RLGRAD_PEERS (`cargo xtask compare` sets it from
`--peers`); their `common.py` times every row of both sides, so rlgrad's rows are
measured exactly as the peers' are.
"""

import os
import sys
from pathlib import Path

_PEERS = os.environ.get("RLGRAD_PEERS", "")
if not (Path(_PEERS) / "common.py").is_file():
    sys.exit(
        f"RLGRAD_PEERS={_PEERS!r} is not the peer drivers' folder (no common.py): "
        "run `cargo xtask compare --only P3,P4`, or set RLGRAD_PEERS to ../shared/peers"
    )
sys.path.insert(0, _PEERS)


def rlgrad():
    """The wheel's package, or an exit that says how to get it."""
    try:
        import rlgrad.mask
        import rlgrad.returns
    except ImportError as e:
        sys.exit(
            f"cannot import rlgrad ({e}): `cargo xtask compare --only P3,P4` builds the wheel into "
            "target/python/bench-site and puts it on PYTHONPATH; or `pip install ./crates/python`"
        )
    return rlgrad


def check(bench_id, pairs, tolerance):
    """Prints the `compare-check <id>: ok|FAILED, ...` line that `cargo xtask compare` reads
    (the format of the Rust benches' check) and returns whether every `(got, want)` pair is
    within `tolerance` of its float64 reference (0: equal); a NaN fails."""
    import numpy as np

    worst = (0.0, 0)
    for got, want in pairs:
        got = np.asarray(got, np.float64).ravel()
        want = np.asarray(want, np.float64).ravel()
        if got.shape != want.shape:
            return _verdict(bench_id, False, f"{got.size} values where the reference has {want.size}", tolerance)
        error = np.abs(got - want)
        bad = np.flatnonzero(~(error <= tolerance))
        if bad.size:
            i = int(bad[0])
            detail = f"element {i} is {got[i]:e} where it should be {want[i]:e}"
            return _verdict(bench_id, False, detail, tolerance)
        i = int(np.argmax(error)) if error.size else 0
        if error.size and error[i] > worst[0]:
            worst = (float(error[i]), i)
    return _verdict(bench_id, True, f"largest error {worst[0]:.2g} (element {worst[1]})", tolerance)


def _verdict(bench_id, passed, detail, tolerance):
    status = "ok" if passed else "FAILED"
    print(f"compare-check {bench_id}: {status}, {detail} against float64 (allowed {tolerance:g})", flush=True)
    return passed
