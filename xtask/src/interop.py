"""`cargo xtask interop`, the Python side (see interop.rs).

Usage: python interop.py WORK_DIR

Checks rlgrad.safetensors and events/ against rlgrad_expected.json with the Python
packages people use (safetensors.numpy, TensorBoard's EventAccumulator), then writes
python.safetensors, python_events/ and python_expected.json for rlgrad to read back.
Prints `PASS name` or `FAIL name: why` per check; exits 1 if a check failed.
"""

import json
import pathlib
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

FAILED = []


def check(name, ok, why=""):
    if ok:
        print(f"PASS {name}")
    else:
        print(f"FAIL {name}: {why}")
        FAILED.append(name)


def bits(array):
    """Values as integers: float bit patterns, or the integers themselves."""
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.dtype.kind == "f":
        flat = flat.view(f"u{flat.dtype.itemsize}")
    return [int(v) for v in flat]


def check_checkpoint(work, expected):
    path = work / "rlgrad.safetensors"
    tensors = load_file(path)
    check(
        "safetensors.numpy opens rlgrad's checkpoint with the same names",
        sorted(tensors) == sorted(expected["tensors"]),
        f"{sorted(tensors)} != {sorted(expected['tensors'])}",
    )
    for name, want in expected["tensors"].items():
        got = tensors.get(name)
        if got is None:
            check(f"`{name}`", False, "missing")
            continue
        same = str(got.dtype) == want["dtype"] and list(got.shape) == want["shape"]
        check(
            f"`{name}` is {want['dtype']} {want['shape']} with the same bits",
            same and bits(got) == want["bits"],
            f"read {got.dtype} {list(got.shape)} {bits(got)}",
        )
    with safe_open(path, framework="np") as f:
        metadata = f.metadata() or {}
    for key, value in expected["metadata"].items():
        check(f"metadata `{key}`", metadata.get(key) == value, repr(metadata.get(key)))
    check(
        "optimizer layout kept as JSON metadata",
        "rlgrad.optimizer:optim" in metadata
        and json.loads(metadata["rlgrad.optimizer:optim"])["slots"] != [],
        repr(sorted(metadata)),
    )


def check_events(work, expected):
    acc = EventAccumulator(
        str(work / "events"), size_guidance={"scalars": 0, "histograms": 0}
    )
    acc.Reload()
    tags = acc.Tags()
    check(
        "EventAccumulator lists rlgrad's scalar tags",
        sorted(tags["scalars"]) == sorted(expected["scalars"]),
        repr(tags["scalars"]),
    )
    for tag, points in expected["scalars"].items():
        got = [[e.step, e.value] for e in acc.Scalars(tag)] if tag in tags["scalars"] else []
        check(f"scalars `{tag}`: steps and values", got == points, f"{got} != {points}")

    for tag, want in expected["histograms"].items():
        if tag not in tags["histograms"]:
            check(f"histogram `{tag}`", False, f"not in {tags['histograms']}")
            continue
        (event,) = acc.Histograms(tag)
        h = event.histogram_value
        values = np.array(want["values"], dtype=np.float64)
        stats_ok = (
            event.step == want["step"]
            and h.num == len(values)
            and h.min == values.min()
            and h.max == values.max()
            and np.isclose(h.sum, values.sum(), rtol=1e-12, atol=1e-12)
            and np.isclose(h.sum_squares, (values * values).sum(), rtol=1e-12)
        )
        check(f"histogram `{tag}`: step, count, min, max, sums", stats_ok, repr(h)[:300])
        # Bucket i holds the values in [limit[i-1], limit[i]) (TensorFlow's convention).
        lower = -np.inf
        counts_ok = len(h.bucket) == len(h.bucket_limit)
        for limit, count in zip(h.bucket_limit, h.bucket):
            counts_ok &= count == np.count_nonzero((values >= lower) & (values < limit))
            lower = limit
        check(f"histogram `{tag}`: bucket counts", counts_ok, "counts differ")


def write_python_files(work):
    rng = np.random.default_rng(7)
    tensors = {
        "actor/w": rng.standard_normal((2, 3)).astype(np.float32),
        "critic/b": np.array([-0.0, 5e-324, np.nan], dtype=np.float64),
        "step": np.array(123456789012, dtype=np.int64),
        "ids": np.array([[1, -2], [3, -4]], dtype=np.int32),
        "mask": np.array([0, 1, 1, 0], dtype=np.uint8),
        "half": np.array([1.0, -2.0], dtype=np.float16),
    }
    metadata = {"format": "np", "note": "written by safetensors.numpy"}
    save_file(tensors, str(work / "python.safetensors"), metadata=metadata)

    writer = EventFileWriter(str(work / "python_events"))
    scalars = {"train/loss": [], "train/lr": []}
    for step in range(0, 30, 3):
        for tag, value in [("train/loss", 1.0 / (step + 1)), ("train/lr", 3e-4)]:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(Event(step=step, wall_time=1.7e9 + step, summary=summary))
            scalars[tag].append([step, float(np.float32(value))])
    writer.close()

    expected = {
        "tensors": {
            name: {"dtype": str(a.dtype), "shape": list(a.shape), "bits": bits(a)}
            for name, a in tensors.items()
        },
        "metadata": metadata,
        "scalars": scalars,
    }
    (work / "python_expected.json").write_text(json.dumps(expected))


def main():
    work = pathlib.Path(sys.argv[1])
    expected = json.loads((work / "rlgrad_expected.json").read_text())
    check_checkpoint(work, expected)
    check_events(work, expected)
    write_python_files(work)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
