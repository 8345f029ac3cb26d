"""Train a small flax model with DP-BandMF and b-min-sep batches, with sigma calibrated by mcacct.

Data: scikit-learn's handwritten digits (1,797 8x8 images, shipped inside the scikit-learn package: no download).
Pipeline, one step: draw the batch with :class:`mcacct.training.batching.BMinSepSampler` (warm start), clip each
example's gradient to ``--clip`` and sum, add the BandMF noise ``sigma * clip * C^-1 z``
(:func:`mcacct.training.bandmf.bandmf_noise`), divide by the expected batch size and take an Adam step. ``C`` comes
from :func:`mcacct.strategies.optimize_banded_toeplitz` and ``sigma`` from :func:`mcacct.calibrate` for the same
scheme, strategy and (epsilon, delta), so the printed guarantee is the accountant's certificate for this run.

    python examples/train_bandmf_digits.py [--epsilon 4] [--delta 1e-4] [--iterations 300] [--quick]

Needs ``pip install flax optax scikit-learn`` (``pip install -e ".[examples]"``).
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from sklearn.datasets import load_digits

jax.config.update("jax_enable_x64", True)  # an application: float64 globally (importing mcacct leaves it alone)
import mcacct
from mcacct.engine.problem import Problem
from mcacct.strategies import optimize_banded_toeplitz
from mcacct.training.bandmf import bandmf_noise
from mcacct.training.batching import BMinSepSampler


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(64, 64, rngs=rngs)
        self.out = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))


def load(seed: int = 0):
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(0.8 * len(y))
    return (x[order[:cut]], y[order[:cut]]), (x[order[cut:]], y[order[cut:]])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--delta", type=float, default=1e-4)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--batch-size", type=float, default=64.0, help="expected batch size")
    ap.add_argument("--min-sep", type=int, default=8)
    ap.add_argument("--bands", type=int, default=4)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--samples", type=int, default=None, help="Monte Carlo samples per direction (default: Alg. 5's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a short smoke run (20 iterations, weak target)")
    args = ap.parse_args(argv)
    if args.quick:
        args.iterations, args.epsilon, args.delta, args.samples = 20, 8.0, 1e-2, args.samples or 4000

    (x_tr, y_tr), (x_te, y_te) = load(args.seed)
    m = len(y_tr)
    n, b = args.iterations, args.min_sep
    p = mcacct.sampling_prob_from_batch_size(args.batch_size, m, b)
    t0 = time.perf_counter()
    strategy = optimize_banded_toeplitz(n, args.bands)
    c = strategy.c_col
    print(f"C: {args.bands} bands, prefix-sum error {strategy.error:.4g} ({strategy.seconds:.1f} s)", file=sys.stderr)
    problem = Problem(mcacct.BMinSep(p, b, n), mcacct.BandedToeplitz(c))
    cal = mcacct.calibrate(problem, args.epsilon, args.delta, jax.random.key(args.seed + 1), num_samples=args.samples,
                           progress=True)
    sigma = cal.sigma
    print(f"sigma = {sigma:.4f} certified for (epsilon, delta) = ({args.epsilon:g}, {cal.overall_delta:.3g}) "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)

    model = MLP(nnx.Rngs(args.seed))
    graphdef, params = nnx.split(model, nnx.Param)

    def loss_one(prm, x, y):
        logits = nnx.merge(graphdef, prm)(x[None])
        return optax.softmax_cross_entropy_with_integer_labels(logits, y[None]).mean()

    def clipped_sum(prm, mask):
        grads = jax.vmap(jax.grad(loss_one), in_axes=(None, 0, 0))(prm, jnp.asarray(x_tr), jnp.asarray(y_tr))
        norms = jnp.sqrt(sum(jnp.sum(g.reshape(m, -1) ** 2, axis=1) for g in jax.tree_util.tree_leaves(grads)))
        weight = mask * jnp.minimum(1.0, args.clip / jnp.maximum(norms, 1e-12))
        return jax.tree_util.tree_map(lambda g: jnp.tensordot(weight, g, axes=1), grads)

    tx = optax.chain(bandmf_noise(c, sigma, args.clip, jax.random.key(args.seed + 2)),
                     optax.scale(1.0 / args.batch_size), optax.adam(args.lr))
    opt_state = tx.init(params)
    sampler = BMinSepSampler(m, p, b)
    keys = jax.random.split(jax.random.key(args.seed + 3), n + 1)
    batch_state = sampler.init(keys[0], warm_start=True)

    @jax.jit
    def train_step(prm, opt_state, batch_state, key):
        batch_state, mask = sampler.step(key, batch_state)
        grads = clipped_sum(prm, mask.astype(jnp.float32))
        updates, opt_state = tx.update(grads, opt_state, prm)
        return optax.apply_updates(prm, updates), opt_state, batch_state

    for t in range(n):
        params, opt_state, batch_state = train_step(params, opt_state, batch_state, keys[t + 1])
    logits = nnx.merge(graphdef, params)(jnp.asarray(x_te))
    accuracy = float(jnp.mean(jnp.argmax(logits, axis=1) == jnp.asarray(y_te)))
    out = {"epsilon": args.epsilon, "delta": cal.overall_delta, "sigma": sigma, "iterations": n, "min_sep": b,
           "bands": args.bands, "sampling_prob": p, "test_accuracy": accuracy}
    print(f"DP-BandMF: (epsilon, delta) = ({args.epsilon:g}, {cal.overall_delta:.3g}), sigma = {sigma:.4f}, "
          f"{n} iterations, b = {b}, bands = {args.bands}: test accuracy {accuracy:.3f}")
    return out


if __name__ == "__main__":
    main()
