"""JAX's side of rlgrad-gpu-bench: the same workloads on the same GPU, each jitted and
timed over queued calls ended by block_until_ready. Prints one JSON object
{workload: milliseconds} on stdout. Run by the bench binary (which embeds this file) with
XLA_PYTHON_CLIENT_PREALLOCATE=false; needs jax with CUDA.

Baselines as a JAX user writes them: jnp.sum, Adam as one jitted update with donated
buffers (what optax.adam compiles to), GAE as lax.scan in reverse under jit (rlax's
formulation), pad/unpad as gathers and scatters with precomputed indices."""
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


def timed(fn, args, repeats):
    out = fn(*args)
    jax.block_until_ready(out)
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) * 1e3 / repeats


def timed_donating(fn, state, repeats):
    """Times fn(state) -> state, with the state's buffers donated (updated in place)."""
    state = fn(*state)
    jax.block_until_ready(state)
    start = time.perf_counter()
    for _ in range(repeats):
        state = fn(*state)
    jax.block_until_ready(state)
    return (time.perf_counter() - start) * 1e3 / repeats


def main():
    if jax.default_backend() != "gpu":
        raise SystemExit(f"JAX runs on {jax.default_backend()}, not a GPU")
    quick = "--quick" in sys.argv
    key = jax.random.PRNGKey(0)
    out = {}
    big = 1 << (22 if quick else 28)
    x = jax.random.normal(key, (big,), jnp.float32)
    out["copy"] = timed(jax.jit(lambda a: a.copy()), (x,), 20)
    out["sum"] = timed(jax.jit(jnp.sum), (x,), 20)
    del x
    for n in ([1 << 20] if quick else [1 << 24, 1 << 28]):
        p = jax.random.normal(key, (n,), jnp.float32)
        g = jax.random.normal(jax.random.PRNGKey(1), (n,), jnp.float32)
        m = jnp.zeros_like(p)
        v = jnp.zeros_like(p)

        @jax.jit
        def adam(p, m, v, g, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            p = p - lr * (m / (1 - b1)) / (jnp.sqrt(v / (1 - b2)) + eps)
            return p, m, v, g

        adam_donating = jax.jit(adam, donate_argnums=(0, 1, 2))
        out[f"adam {n}"] = timed_donating(adam_donating, (p, m, v, g), 20)
        del p, m, v, g
    for t, b in ([(256, 64)] if quick else [(2048, 64), (2048, 4096)]):
        r = jax.random.normal(key, (t, b), jnp.float32)
        v = jax.random.normal(jax.random.PRNGKey(2), (t, b), jnp.float32)
        term = (jax.random.uniform(jax.random.PRNGKey(3), (t, b)) < 0.01).astype(jnp.float32)
        boot = jax.random.normal(jax.random.PRNGKey(4), (b,), jnp.float32)

        @jax.jit
        def gae(r, v, term, boot):
            v_next = jnp.concatenate([v[1:], boot[None]], axis=0)
            d = 0.99 * (1.0 - term)
            delta = r + d * v_next - v

            def step(acc, xs):
                delta_t, d_t = xs
                acc = delta_t + 0.95 * d_t * acc
                return acc, acc

            _, adv = jax.lax.scan(step, jnp.zeros(b, jnp.float32), (delta, d), reverse=True)
            return adv

        out[f"gae {t}x{b}"] = timed(gae, (r, v, term, boot), 20)
    batch, features = (512, 16) if quick else (4096, 64)
    lengths = [1 + i % 256 for i in range(batch)]
    rows = jnp.asarray(
        np.array([b * 256 + s for b, n in enumerate(lengths) for s in range(n)], np.int32)
    )
    flat = jax.random.normal(key, (int(rows.shape[0]), features), jnp.float32)

    @jax.jit
    def pad(flat, rows):
        return jnp.zeros((batch * 256, features), jnp.float32).at[rows].set(
            flat, indices_are_sorted=True, unique_indices=True
        )

    @jax.jit
    def unpad(padded, rows):
        return padded[rows]

    out["pad"] = timed(pad, (flat, rows), 20)
    out["unpad"] = timed(unpad, (pad(flat, rows), rows), 20)
    print(json.dumps(out))


main()
