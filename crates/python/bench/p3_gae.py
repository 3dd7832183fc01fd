"""P3: `rlgrad.returns.gae` from Python beside W3's peers, at [128, 8] (where the cost of a
call is most of the time), [2048, 64] and [128, 1024]: time-major f32, dones ~
Bernoulli(0.05), gamma 0.99, lambda 0.95 (W3's formulation and data, `w3_gae.py`).

The peers' rows are W3's own code, imported from the peer drivers and run on P3's shapes:
SB3's numpy loop, a torch loop, `lax.scan` and rlax under `jax.jit`, TorchRL. rlgrad's rows
call the wheel as a user does, and every call is timed whole:
  - numpy: `gae(rewards, values, bootstrap, gamma=, lam=, terminated=dones, threads=)` on
    W3's arrays (its f32 0/1 dones as `terminated`), new NumPy arrays out;
  - torch: the same from CPU tensors to tensors, `.numpy()` in, `torch.from_numpy` out.
rlgrad returns advantages and returns (`advantages + values`); the peers advantages only.
Both are checked against float64 before timing (tolerance 1e-3, as W3's).

One job per process, as the peers' drivers (`compare.py` runs the jobs):
    RLGRAD_PEERS=../shared/peers python p3_gae.py --groups rlgrad --threads 1 [--quick]
"""

import pbench  # noqa: F401 - puts the peer drivers on the import path
import common
import w3_gae

GROUPS = ["rlgrad", "numpy", "torch", "jax", "torchrl"]
# W3's runners loop over their module's SHAPES: P3 runs them on W3's shapes and [128, 8].
SHAPES = [("T=128,B=8", 128, 8)] + w3_gae.SHAPES
w3_gae.SHAPES = SHAPES
TOLERANCE = 1e-3


def run_rlgrad(rec, quick, threads):
    import torch

    gae = pbench.rlgrad().returns.gae

    def numpy_gae(rewards, values, bootstrap, dones):
        return gae(rewards, values, bootstrap, gamma=w3_gae.GAMMA, lam=w3_gae.LAM, terminated=dones, threads=threads)

    def torch_gae(rewards, values, bootstrap, dones):
        advantages, returns = numpy_gae(rewards.numpy(), values.numpy(), bootstrap.numpy(), dones.numpy())
        return torch.from_numpy(advantages), torch.from_numpy(returns)

    for case, T, B in SHAPES:
        arrays = w3_gae.make_data(T, B)
        want = w3_gae.reference(*arrays)
        tensors = tuple(torch.from_numpy(a) for a in arrays)
        for impl, fn, inputs in (
            ("rlgrad.returns.gae (numpy)", numpy_gae, arrays),
            ("rlgrad.returns.gae (torch tensors)", torch_gae, tensors),
        ):
            advantages, returns = fn(*inputs)
            pairs = [(advantages, want), (returns, want + arrays[1])]
            if pbench.check(f"{case}/{impl}/{threads}t", pairs, TOLERANCE):
                samples, _ = common.measure(lambda fn=fn, inputs=inputs: fn(*inputs), **w3_gae.kw(quick))
                rec.add(impl, case, samples, per=(T * B, "ns/elem"))


def main():
    args = common.parse_args(__doc__, GROUPS)
    common.setup(args.threads)
    for group in args.groups:
        rec = common.Recorder("P3", group, args.threads)
        if group == "rlgrad":
            run_rlgrad(rec, args.quick, args.threads)
        elif group == "numpy":
            w3_gae.run_numpy(rec, args.quick)
        elif group == "torch":
            w3_gae.run_torch(rec, args.quick, args.threads)
        elif group == "jax":
            w3_gae.run_jax(rec, args.quick)
        elif group == "torchrl":
            w3_gae.run_torchrl(rec, args.quick, args.threads)
        rec.save(args.json)


if __name__ == "__main__":
    main()
