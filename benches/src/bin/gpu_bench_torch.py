"""PyTorch's side of rlgrad-gpu-bench: the same workloads on the same GPU, timed with
CUDA events. Prints one JSON object {workload: milliseconds} on stdout. Run by the bench
binary (which embeds this file); needs torch with CUDA.

Baselines as a PyTorch user writes them: torch.sum, Adam(fused=True), GAE as a loop over
time, pad/unpad with precomputed indices (index_copy_/index_select, not boolean masks),
FP32 GEMMs as torch.matmul (cuBLAS) with TF32 off, as rlgrad's canonical GEMM is IEEE
FP32."""
import json
import sys

import torch


def timed(fn, repeats):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def main():
    quick = "--quick" in sys.argv
    dev = torch.device("cuda")
    out = {}
    big = 1 << (22 if quick else 28)
    x = torch.randn(big, device=dev)
    y = torch.empty_like(x)
    out["copy"] = timed(lambda: y.copy_(x), 20)
    out["sum"] = timed(lambda: x.sum(), 20)
    del y
    for n in ([1 << 20] if quick else [1 << 24, 1 << 28]):
        p = torch.randn(n, device=dev)
        g = torch.randn(n, device=dev)
        opt = torch.optim.Adam([p], lr=1e-3, fused=True)
        p.grad = g
        out[f"adam {n}"] = timed(opt.step, 20)
        del p, g, opt
    for t, b in ([(256, 64)] if quick else [(2048, 64), (2048, 4096)]):
        r = torch.randn(t, b, device=dev)
        v = torch.randn(t, b, device=dev)
        term = (torch.rand(t, b, device=dev) < 0.01).float()
        boot = torch.randn(b, device=dev)
        adv = torch.empty_like(r)

        def gae():
            acc = torch.zeros(b, device=dev)
            v_next = boot
            for s in range(t - 1, -1, -1):
                d = 0.99 * (1.0 - term[s])
                delta = r[s] + d * v_next - v[s]
                acc = delta + 0.95 * d * acc
                adv[s] = acc
                v_next = v[s]

        out[f"gae {t}x{b}"] = timed(gae, 3)
    batch, features = (512, 16) if quick else (4096, 64)
    lengths = [1 + i % 256 for i in range(batch)]
    # Precomputed destination rows of the packed steps in the [batch, 256] padded array
    # (batch-major), as an RNN data loader keeps them: no boolean mask at run time.
    rows = torch.tensor(
        [b * 256 + t for b, n in enumerate(lengths) for t in range(n)], device=dev
    )
    flat = torch.randn(len(rows), features, device=dev)
    padded = torch.zeros(batch * 256, features, device=dev)

    def pad():
        padded.zero_()
        padded.index_copy_(0, rows, flat)

    out["pad"] = timed(pad, 20)
    out["unpad"] = timed(lambda: padded.index_select(0, rows), 20)
    del padded, flat, rows
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    shapes = (
        [(1024, 1024, 1024), (256, 400, 300), (8192, 64, 64)]
        if quick
        else [(4096, 4096, 4096), (65536, 256, 256), (256, 400, 300), (8192, 64, 64)]
    )
    for m, k, n in shapes:
        a = torch.randn(m, k, device=dev)
        b = torch.randn(k, n, device=dev)
        c = torch.empty(m, n, device=dev)
        repeats = 10 if m * n * k >= 1 << 30 else 50
        out[f"matmul {m}x{k}x{n}"] = timed(lambda: torch.matmul(a, b, out=c), repeats)
        del a, b, c
    print(json.dumps(out))


main()
