"""P4: `rlgrad.mask.pad` / `unpad` from Python beside W4's numpy and torch peers, at W4's seed
(B=100, L ~ U[10, 50), F=10) and large (B=1024, L ~ U[1, 200), F=64) cases, f32, W4's data.

The peers' rows are W4's own code (`w4_padding.py`, imported from the peer drivers):
numpy loops and bool masks, torch `pad_sequence` (from a list, or `split` of the flat
rows) and bool-mask unpad; plus, written here because W4 has no such row, the unpad of
`torch.nn.utils.rnn`: `torch.cat(unpad_sequence(padded, lengths, batch_first=True))`.
rlgrad's rows call the wheel as a user does, every call timed whole:
  - numpy: `pad(flat, lengths, threads=)` (max_len found and the zeroed output allocated,
    as every W4 pad) and `unpad(padded, lengths, threads=)`, NumPy in and out;
  - torch: the same from CPU tensors to tensors, `.numpy()` in, `torch.from_numpy` out.
Every result must equal W4's reference exactly before it is timed.

One job per process, as the peers' drivers (`compare.py` runs the jobs):
    RLGRAD_PEERS=../shared/peers python p4_padding.py --groups rlgrad --threads 1 [--quick]
"""

import pbench  # noqa: F401 - puts the peer drivers on the import path
import common
import w4_padding

GROUPS = ["rlgrad", "numpy", "torch"]


def run_rlgrad(rec, quick, threads):
    import torch

    mask = pbench.rlgrad().mask

    def numpy_pad(flat, lengths):
        return mask.pad(flat, lengths, threads=threads)

    def numpy_unpad(padded, lengths):
        return mask.unpad(padded, lengths, threads=threads)

    def torch_pad(flat, lengths):
        return torch.from_numpy(numpy_pad(flat.numpy(), lengths.numpy()))

    def torch_unpad(padded, lengths):
        return torch.from_numpy(numpy_unpad(padded.numpy(), lengths.numpy()))

    for case, B, lo, hi, F in w4_padding.CASES:
        flat, lengths, _ = w4_padding.make_data(B, lo, hi, F)
        padded = w4_padding.reference(flat, lengths)
        info = w4_padding.bytes_info(flat, lengths)
        flat_t, lengths_t, padded_t = (torch.from_numpy(a) for a in (flat, lengths, padded))
        for impl, fn, inputs, want in (
            ("pad rlgrad.mask.pad (numpy)", numpy_pad, (flat, lengths), padded),
            ("pad rlgrad.mask.pad (torch tensors)", torch_pad, (flat_t, lengths_t), padded),
            ("unpad rlgrad.mask.unpad (numpy)", numpy_unpad, (padded, lengths), flat),
            ("unpad rlgrad.mask.unpad (torch tensors)", torch_unpad, (padded_t, lengths_t), flat),
        ):
            if pbench.check(f"{case}/{impl}/{threads}t", [(fn(*inputs), want)], 0.0):
                samples, _ = common.measure(lambda fn=fn, inputs=inputs: fn(*inputs), **w4_padding.kw(quick))
                rec.add(impl, case, samples, extra=info)


def run_torch_rnn_unpad(rec, quick):
    import torch
    from torch.nn.utils.rnn import unpad_sequence

    impl = "unpad torch.nn.utils.rnn.unpad_sequence + cat"
    for case, B, lo, hi, F in w4_padding.CASES:
        flat, lengths_np, _ = w4_padding.make_data(B, lo, hi, F)
        padded = torch.from_numpy(w4_padding.reference(flat, lengths_np))
        lengths = torch.from_numpy(lengths_np)

        def unpad():
            return torch.cat(unpad_sequence(padded, lengths, batch_first=True))

        w4_padding.check(impl, unpad().numpy(), flat)
        samples, _ = common.measure(unpad, **w4_padding.kw(quick))
        rec.add(impl, case, samples, extra=w4_padding.bytes_info(flat, lengths_np))


def main():
    args = common.parse_args(__doc__, GROUPS)
    common.setup(args.threads)
    for group in args.groups:
        rec = common.Recorder("P4", group, args.threads)
        if group == "rlgrad":
            run_rlgrad(rec, args.quick, args.threads)
        elif group == "numpy":
            w4_padding.run_numpy(rec, args.quick)
        elif group == "torch":
            w4_padding.run_torch(rec, args.quick, args.threads)
            run_torch_rnn_unpad(rec, args.quick)
        rec.save(args.json)


if __name__ == "__main__":
    main()
