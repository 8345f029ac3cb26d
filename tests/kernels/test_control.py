"""rare_cond (mcacct.kernels.control): lax.cond's values, batched without running the rare branch needlessly.

Also the property that motivated it: traced for an accelerator (vmap over the engine's blocks), the exact
n-step recursion scan of the b-min-sep programs sits inside a conditional branch, instead of running for every
chunk as a select's operand (measured on an H200: 23x below the roofline at n = 7200, b = 256).
"""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mcacct.kernels.control import rare_cond


def _rare(x, y):
    return x * 128.0 + y  # a power of two: the product is exact, so a fused multiply-add rounds the same


def _common(x, y):
    return x + y


def _with_rare_cond(x, y):
    return rare_cond(jnp.any(x > 5.0), _rare, _common, x, y)


def _with_lax_cond(x, y):
    return jax.lax.cond(jnp.any(x > 5.0), _rare, _common, x, y)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=6, max_size=6), st.integers(1, 3))
def test_equals_lax_cond_batched_nested_and_unbatched(values, outer):
    x = jnp.asarray(np.resize(np.asarray(values), (outer, 2, 3)))
    y = jnp.arange(3.0)
    vv = lambda f: jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(0, None))  # noqa: E731
    np.testing.assert_array_equal(jax.jit(vv(_with_rare_cond))(x, y), vv(_with_lax_cond)(x, y))
    one = x[0, 0]
    assert float(jnp.abs(_with_rare_cond(one, y) - _with_lax_cond(one, y)).max()) == 0.0
    # predicate not batched, operands batched
    f = lambda x: rare_cond(y[1] > 0.5, _rare, _common, x, y)  # noqa: E731
    np.testing.assert_array_equal(jax.vmap(f)(x[0]), jax.vmap(lambda x: _rare(x, y))(x[0]))


def test_pytree_operands_and_outputs():
    def rare(t):
        return {"a": t["a"] * 2, "b": t["b"] - 1}

    def common(t):
        return t

    x = {"a": jnp.arange(6.0).reshape(3, 2), "b": jnp.arange(3)}
    out = jax.vmap(lambda t: rare_cond(t["a"][0] > 1.0, rare, common, t))(x)
    np.testing.assert_array_equal(out["a"], np.array([[0, 1], [4, 6], [8, 10]], float))
    np.testing.assert_array_equal(out["b"], np.array([0, 0, 1]))


def test_rare_branch_runs_only_when_some_element_is_rare():
    calls = []

    def rare(x, y):
        jax.debug.callback(lambda: calls.append(1))
        return x * 100.0 + y

    f = jax.jit(jax.vmap(lambda x, y: rare_cond(jnp.any(x > 5.0), rare, _common, x, y), in_axes=(0, None)))
    y = jnp.ones(3)
    jax.block_until_ready(f(jnp.zeros((4, 3)), y))
    assert calls == []
    out = f(jnp.zeros((4, 3)).at[2, 1].set(7.0), y)
    jax.block_until_ready(out)
    assert calls == [1]
    np.testing.assert_array_equal(out[2], np.array([1.0, 701.0, 1.0]))
    np.testing.assert_array_equal(out[0], np.ones(3))


_PROBE = r"""
import json, sys
import jax, numpy as np
from mcacct.core.precision import x64_scope
from mcacct.engine.problem import Problem, chunk_losses
from mcacct.engine.runner import ladder_chunk_statistics
from mcacct.evr.calibrate import verification_spec
from mcacct.schemes.bminsep import BMinSep
from mcacct.strategies.banded import BandedToeplitz

N, B = 96, 8

def long_scans(jaxpr, under_cond=False, out=None):
    out = [0, 0] if out is None else out
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "scan" and eqn.params["length"] == N:
            out[1 if under_cond else 0] += 1
        for v in eqn.params.values():
            for j in (v if isinstance(v, (tuple, list)) else (v,)):
                inner = getattr(j, "jaxpr", j)
                if hasattr(inner, "eqns"):
                    long_scans(inner, under_cond or name == "cond", out)
    return out

with x64_scope():
    p = Problem(BMinSep(0.0312, B, N, True), BandedToeplitz(tuple(np.ones(B) / np.sqrt(B))))
    key = jax.random.key(0)
    single = jax.make_jaxpr(lambda k: chunk_losses(k, 1.0, p, 512, "remove"))(key)
    sig = np.asarray([0.8, 1.2])
    ladder = jax.make_jaxpr(lambda k: ladder_chunk_statistics(k, sig, np.zeros(2), 512, np.asarray([1.0]), p, 512,
                                                              verification_spec()))(key)
print(json.dumps({"single": long_scans(single.jaxpr), "ladder": long_scans(ladder.jaxpr)}))
"""


def test_gpu_programs_keep_the_exact_scan_in_a_branch():
    """Traced for a GPU (blocks under vmap): every n-step scan of the b-min-sep chunk programs (the exact
    log-space recursion) is inside a cond branch, none runs unconditionally."""
    env = dict(os.environ, MCACCT_TARGET_PLATFORM="gpu", JAX_PLATFORMS="cpu")
    res = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    counts = json.loads(res.stdout.strip().splitlines()[-1])
    for program, (outside, inside) in counts.items():
        assert outside == 0, (program, counts)
        assert inside >= 1, (program, counts)


def test_the_rare_branch_runs_on_the_rare_elements_gathered():
    """Batched, with at most a quarter of the batch rare, the rare branch runs on a gathered buffer of a quarter
    of the batch (the rare elements and padding), not on the whole batch; with more, on the whole batch. Also
    nested (an outer vmap of 3). The values are lax.cond's either way."""
    from mcacct.kernels.control import compact_capacity
    widths = []

    def rare(x, y):
        jax.debug.callback(lambda v: widths.append(1), x)    # batched: once per element of the branch's batch
        return x * 128.0 + y

    f = jax.jit(jax.vmap(lambda x, y: rare_cond(jnp.any(x > 5.0), rare, _common, x, y), in_axes=(0, None)))
    g = jax.vmap(lambda x, y: jax.lax.cond(jnp.any(x > 5.0), _rare, _common, x, y), in_axes=(0, None))
    y = jnp.arange(3.0)
    assert compact_capacity(16) == 4 and compact_capacity(8) == 2 and compact_capacity(7) == 7
    for rows, width in (((), None), ((2, 9, 15), 4), ((0, 1, 2, 3), 4), ((0, 1, 2, 3, 4), 16),
                        (tuple(range(16)), 16)):
        widths.clear()
        x = jnp.zeros((16, 3)).at[jnp.asarray(rows, int), 1].set(7.0) if rows else jnp.zeros((16, 3))
        out = f(x, y)
        jax.block_until_ready(out)
        np.testing.assert_array_equal(out, g(x, y))
        assert len(widths) == (width or 0), (rows, widths)

    # nested: three batches of 16, the inner level gathers where its batch has at most 4 rare elements
    x = jnp.zeros((3, 16, 3)).at[0, 2, 1].set(7.0).at[2, jnp.arange(6), 0].set(9.0)
    nested = jax.jit(jax.vmap(jax.vmap(lambda x, y: rare_cond(jnp.any(x > 5.0), _rare, _common, x, y),
                                       in_axes=(0, None)), in_axes=(0, None)))
    np.testing.assert_array_equal(nested(x, y), jax.vmap(g, in_axes=(0, None))(x, y))


def test_a_nested_rare_branch_sees_no_copies_of_a_rare_element():
    """The gathered buffer's padded slots read an element that is not rare, wherever the rare one sits (the last
    element included): a rare_cond nested in the rare branch, as the settle's whole-block recomputation, then
    counts one rare element, not the padded copies, and gathers it (2 of the 8 gathered slots)."""
    calls = []

    def expensive(x):
        jax.debug.callback(lambda v: calls.append(1), x)
        return x * 2.0

    def cheap(x):
        return x + 1.0

    f = jax.jit(jax.vmap(lambda x: rare_cond(x > -1.0, lambda v: rare_cond(v > 0.0, expensive, cheap, v), cheap, x)))
    for pos in (0, 13, 31):
        calls.clear()
        x = jnp.full(32, -5.0).at[pos].set(1.0)
        out = f(x)
        jax.block_until_ready(out)
        np.testing.assert_array_equal(out, jnp.where(jnp.arange(32) == pos, 2.0, -4.0))
        assert len(calls) == 2, (pos, len(calls))
