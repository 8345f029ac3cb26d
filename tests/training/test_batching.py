"""Tests for mcacct.training.batching (Dong & Ganesh 2026 [arXiv:2602.09338], Alg. 1-4 and App. D).

Statistical tests use fixed seeds and tolerances of ``Z = 5`` standard errors, where the standard
error is derived from the sample size and the exact (binomial or Markov-chain) variance of the
statistic, never a hand-tuned constant.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcacct.training import batching as bt

Z = 5.0  # tolerance in standard errors for all statistical checks
HSET = settings(deadline=None, max_examples=20, derandomize=True)


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------


def assert_min_sep(masks: np.ndarray, b: int) -> None:
    """No column of ``masks`` (iterations x items) has two True entries closer than ``b``."""
    masks = np.asarray(masks, bool)
    for lag in range(1, min(b, masks.shape[0])):
        both = masks[:-lag] & masks[lag:]
        assert not both.any(), f"participation twice within lag {lag} < b={b}"


def users_as_sets(users: np.ndarray) -> list[set[int]]:
    users = np.asarray(users).reshape(len(users), -1)
    return [set(int(u) for u in row if u >= 0) for row in users]


def user_masks_np(masks: np.ndarray, users: np.ndarray, num_users: int) -> np.ndarray:
    sets = users_as_sets(users)
    out = np.zeros((masks.shape[0], num_users), bool)
    for e, us in enumerate(sets):
        for u in us:
            out[:, u] |= np.asarray(masks[:, e], bool)
    return out


def ref_alg1(coins: np.ndarray, b: int, history: list[set[int]] | None = None) -> np.ndarray:
    """Alg. 1/2 pseudocode with given coins; ``history`` = virtual batches B_{1-b+1}..B_0."""
    n, m = coins.shape
    batches: list[set[int]] = list(history) if history is not None else []
    offset = len(batches)
    out = np.zeros((n, m), bool)
    for i in range(n):
        lo = max(0, offset + i - (b - 1))
        excl = set().union(*batches[lo:offset + i]) if b > 1 else set()
        bi = {e for e in range(m) if coins[i, e] and e not in excl}
        batches.append(bi)
        out[i, list(bi)] = True
    return out


def ref_multi(coins: np.ndarray, users: np.ndarray, b: int, on_sampled: bool) -> np.ndarray:
    """Alg. 3 (``on_sampled``) / Alg. 4 pseudocode with given coins ``S_i``."""
    n, m = coins.shape
    sets = users_as_sets(users)
    nbr = [{f for f in range(m) if sets[f] & sets[e]} for e in range(m)]
    trig: list[set[int]] = []
    out = np.zeros((n, m), bool)
    for i in range(n):
        s_i = {e for e in range(m) if coins[i, e]}
        excl: set[int] = set()
        for j in range(max(0, i - (b - 1)), i):
            for e in trig[j]:
                excl |= nbr[e]
        b_i = s_i - excl
        out[i, list(b_i)] = True
        trig.append(s_i if on_sampled else b_i)
    return out


_alg1_t = jax.jit(bt.transitions.bminsep_transition)
_multi_t = jax.jit(bt.transitions.multi_transition, static_argnums=(4, 5))


def run_transition(fn, coins: np.ndarray, blocked0: np.ndarray) -> np.ndarray:
    blocked = jnp.asarray(blocked0, jnp.int32)
    out = []
    for row in coins:
        blocked, mask = fn(blocked, jnp.asarray(row))
        out.append(np.asarray(mask))
    return np.stack(out)


def exact_count_variance(p: float, b: int, n: int) -> float:
    """Exact variance of the number of participations of one example in ``n`` consecutive
    iterations of stationary b-min-sep subsampling (Markov chain of Fig. 1)."""
    p0 = bt.participation_rate(p, b)
    # P(participate k iterations after a participation): state b-1, b-1 forced steps, then p each.
    # r[k] = P(x_{t+k} = 1 | x_t = 1), computed by the renewal recursion.
    r = np.zeros(n)
    for k in range(1, n):
        # first return after exactly k steps: k = (b - 1) + g with g ~ Geom(p) on {1, 2, ...}
        g = k - (b - 1)
        first = p * (1 - p) ** (g - 1) if g >= 1 else 0.0
        r[k] = first + sum((p * (1 - p) ** (k - j - b) if k - j - (b - 1) >= 1 else 0.0) * r[j]
                           for j in range(1, k))
    cov = p0 * r[1:] - p0 ** 2
    lags = np.arange(1, n)
    return n * p0 * (1 - p0) + 2.0 * float(np.sum((n - lags) * cov))


# ------------------------------------------------------------------------------------------
# Rates
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p0,b", [(0.05, 1), (0.05, 4), (0.1, 10), (0.2, 5)])
def test_rate_roundtrip(p0, b):
    p = bt.sampling_prob_from_rate(p0, b)
    assert math.isclose(p, p0 / (1 - p0 * (b - 1)))
    assert math.isclose(bt.participation_rate(p, b), p0)
    s = bt.BMinSepSampler.from_participation_rate(100, p0, b)
    assert math.isclose(s.participation_rate, p0)
    assert math.isclose(s.expected_batch_size, 100 * p0)


def test_rate_at_one_over_b_is_balls_in_bins():
    assert bt.sampling_prob_from_rate(0.25, 4) == 1.0


# ------------------------------------------------------------------------------------------
# Alg. 1 / 2: exactness against the pseudocode, min-sep property
# ------------------------------------------------------------------------------------------


@HSET
@given(data=st.data(), b=st.integers(1, 6), n=st.integers(1, 14), m=st.integers(1, 6))
def test_alg1_transition_matches_pseudocode(data, b, n, m):
    coins = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m),
                                        min_size=n, max_size=n)), bool).reshape(n, m)
    got = run_transition(lambda s, c: _alg1_t(s, c, jnp.int32(b)), coins,
                         np.zeros(m))
    np.testing.assert_array_equal(got, ref_alg1(coins, b))


@HSET
@given(data=st.data(), b=st.integers(2, 6), n=st.integers(1, 14), m=st.integers(1, 6))
def test_alg2_virtual_history_matches_pseudocode(data, b, n, m):
    # state s_j = k > 0 <=> virtual participation in B_{k - b + 1} (0-based offset into history)
    blocked0 = np.array(data.draw(st.lists(st.integers(0, b - 1), min_size=m, max_size=m)))
    coins = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m),
                                        min_size=n, max_size=n)), bool).reshape(n, m)
    history = [set() for _ in range(b - 1)]
    for e, k in enumerate(blocked0):
        if k > 0:
            history[(b - 1) - (b - k)].add(e)  # virtual batch B_{1-(b-k)} bars it for k more steps
    got = run_transition(lambda s, c: _alg1_t(s, c, jnp.int32(b)), coins, blocked0)
    np.testing.assert_array_equal(got, ref_alg1(coins, b, history))


@HSET
@given(seed=st.integers(0, 2**31 - 1), p=st.floats(0.01, 1.0), b=st.integers(1, 8),
       m=st.sampled_from([1, 40]), n=st.sampled_from([1, 30]), warm=st.booleans())
def test_bminsep_never_violates_min_sep(seed, p, b, m, n, warm):
    s = bt.BMinSepSampler(m, p, b)
    key = jax.random.key(seed)
    state = s.init(jax.random.fold_in(key, 1), warm_start=warm)
    masks, final = s.sample_batches(key, n, state=state, return_state=True)
    masks = np.asarray(masks)
    assert masks.shape == (n, m) and masks.dtype == bool
    assert_min_sep(masks, b)
    # the (virtual) history is respected too: blocked[j] = k bars the first k iterations
    blocked0 = np.asarray(state.blocked)
    assert blocked0.min() >= 0 and blocked0.max() <= b - 1
    for j in range(m):
        assert not masks[:blocked0[j], j].any()
    fb = np.asarray(final.blocked)
    assert fb.dtype == np.int32 and fb.min() >= 0 and fb.max() <= b - 1


def test_p_one_warm_start_is_balls_in_bins():
    b, m = 4, 1000
    s = bt.BMinSepSampler(m, 1.0, b)
    masks = np.asarray(s.sample_batches(jax.random.key(3), 3 * b))
    assert (masks.sum(axis=0) == 3).all()  # every example exactly once per epoch of b batches
    np.testing.assert_array_equal(masks[:b], masks[b:2 * b])  # the same b batches cycle


# ------------------------------------------------------------------------------------------
# Alg. 1 / 2: participation rates (fixed seeds)
# ------------------------------------------------------------------------------------------

RATE_CASES = [(0.1, 4), (0.05, 1), (0.3, 3), (1.0, 5), (0.02, 20)]


@pytest.mark.parametrize("p,b", RATE_CASES)
def test_warm_start_is_stationary_every_batch(p, b):
    m, n = 100_000, 24
    s = bt.BMinSepSampler(m, p, b)
    p0 = s.participation_rate
    masks = np.asarray(s.sample_batches(jax.random.key(11), n, warm_start=True))
    # at a fixed iteration examples are independent with marginal p0: exactly Binomial(m, p0)
    se = math.sqrt(p0 * (1 - p0) / m)
    rates = masks.mean(axis=1)
    assert abs(rates[0] - p0) <= Z * se, (rates[0], p0, se)  # batch 1 already stationary
    np.testing.assert_array_less(np.abs(rates - p0), Z * se)
    # pooled rate: per-example counts are independent; their exact variance comes from the chain
    se_pool = math.sqrt(exact_count_variance(p, b, n) / m) / n
    assert abs(masks.mean() - p0) <= Z * se_pool


@pytest.mark.parametrize("p,b", [(0.1, 4), (0.3, 3), (0.02, 20)])
def test_cold_start_first_batches_have_rate_p(p, b):
    m = 100_000
    s = bt.BMinSepSampler(m, p, b)
    p0 = s.participation_rate
    masks = np.asarray(s.sample_batches(jax.random.key(12), 2, warm_start=False))
    r1, r2 = masks.mean(axis=1)
    se1 = math.sqrt(p * (1 - p) / m)
    assert abs(r1 - p) <= Z * se1  # batch 1: every example available
    assert abs(p - p0) > 2 * Z * se1  # ... which is distinguishable from p0 here
    q2 = p * (1 - p)  # batch 2 (b >= 2): not in batch 1, then the coin
    assert abs(r2 - q2) <= Z * math.sqrt(q2 * (1 - q2) / m)
    # and the warm start's first batch is not at rate p
    w1 = np.asarray(s.sample_batches(jax.random.key(12), 1, warm_start=True)).mean()
    assert abs(w1 - p) > Z * se1


# ------------------------------------------------------------------------------------------
# App. D: truncated sampler
# ------------------------------------------------------------------------------------------


@HSET
@given(seed=st.integers(0, 2**31 - 1), p=st.floats(0.05, 1.0), b=st.integers(1, 6),
       m=st.just(50), bmax=st.sampled_from([1, 8, 60]), warm=st.booleans())
def test_truncated_never_exceeds_max(seed, p, b, m, bmax, warm):
    n = 12
    key = jax.random.key(seed)
    ts = bt.TruncatedBMinSepSampler(m, p, b, bmax)
    batches = ts.sample_index_batches(key, n, warm_start=warm)
    full = np.asarray(ts.untruncated.sample_batches(key, n, warm_start=warm))
    idx, valid, ns = (np.asarray(x) for x in batches)
    assert idx.shape == valid.shape == (n, bmax) and ns.shape == (n,)
    assert idx.dtype == np.int32 and valid.dtype == bool
    np.testing.assert_array_equal(ns, full.sum(axis=1))  # pre-truncation size
    np.testing.assert_array_equal(valid.sum(axis=1), np.minimum(ns, bmax))
    for t in range(n):
        k = valid[t].sum()
        assert valid[t, :k].all() and not valid[t, k:].any()  # valid prefix, then padding
        assert (idx[t, k:] == 0).all()
        chosen = idx[t, :k]
        assert len(set(chosen.tolist())) == k  # no duplicates
        assert full[t, chosen].all()  # a subset of the untruncated batch
    masks = np.asarray(ts.sample_batches(key, n, warm_start=warm))
    assert (masks.sum(axis=1) <= bmax).all()
    assert_min_sep(masks, b)


@HSET
@given(seed=st.integers(0, 2**31 - 1), p=st.floats(0.05, 1.0), b=st.integers(1, 6),
       m=st.just(50), extra=st.sampled_from([0, 5]), warm=st.booleans())
def test_truncated_with_large_max_equals_untruncated(seed, p, b, m, extra, warm):
    key = jax.random.key(seed)
    ts = bt.TruncatedBMinSepSampler(m, p, b, m + extra)
    s = bt.BMinSepSampler(m, p, b)
    np.testing.assert_array_equal(np.asarray(ts.sample_batches(key, 10, warm_start=warm)),
                                  np.asarray(s.sample_batches(key, 10, warm_start=warm)))
    st0 = s.init(key, warm_start=warm)
    (st_t, batch), (st_u, mask) = ts.step(key, st0), s.step(key, st0)
    np.testing.assert_array_equal(np.asarray(st_t.blocked), np.asarray(st_u.blocked))
    got = np.zeros(m, bool)
    got[np.asarray(batch.indices)[np.asarray(batch.valid)]] = True
    np.testing.assert_array_equal(got, np.asarray(mask))


def test_truncated_single_example_padding():
    ts = bt.TruncatedBMinSepSampler(1, 1.0, 1, 3)
    idx, valid, ns = ts.sample_index_batches(jax.random.key(0), 4)
    np.testing.assert_array_equal(np.asarray(idx), np.zeros((4, 3), np.int32))
    np.testing.assert_array_equal(np.asarray(valid), np.tile([True, False, False], (4, 1)))
    np.testing.assert_array_equal(np.asarray(ns), np.ones(4, np.int32))


def test_truncation_drops_uniformly_and_dropped_stay_blocked():
    m, r, bmax, trials = 100, 40, 10, 4000
    mask = jnp.zeros(m, bool).at[jnp.arange(0, 2 * r, 2)].set(True)
    keys = jax.random.split(jax.random.key(5), trials)
    batches = jax.vmap(lambda k: bt.truncate_batch(k, mask, bmax))(keys)
    assert bool(batches.valid.all()) and bool((batches.num_sampled == r).all())
    counts = np.zeros(m)
    np.add.at(counts, np.asarray(batches.indices).ravel(), 1)
    assert counts[~np.asarray(mask)].sum() == 0
    q = bmax / r  # survival probability B_max / |B_i| of each sampled example (App. D)
    se = math.sqrt(q * (1 - q) / trials)
    np.testing.assert_array_less(np.abs(counts[np.asarray(mask)] / trials - q), Z * se)

    # state: sampled-but-dropped examples are blocked for b - 1 more iterations, like survivors
    b = 5
    ts = bt.TruncatedBMinSepSampler(2000, 0.5, b, 10)
    key = jax.random.key(9)
    state, batch = ts.step(key, ts.init(warm_start=False))
    _, full = ts.untruncated.step(key, ts.init(warm_start=False))
    full = np.asarray(full)
    assert full.sum() > 10  # truncation happened
    np.testing.assert_array_equal(np.asarray(state.blocked), np.where(full, b - 1, 0))


# ------------------------------------------------------------------------------------------
# Alg. 3 / 4: multi-attribution
# ------------------------------------------------------------------------------------------



def attributions(sizes):
    """1-D (one user per example) or 2-D (-1 padded user lists) attribution arrays, user ids in
    [0, 6). Few distinct shapes, since each new shape costs a compilation."""
    return st.sampled_from(sizes).flatmap(lambda m: st.one_of(
        st.lists(st.integers(0, 5), min_size=m, max_size=m).map(lambda x: np.array(x, np.int32)),
        st.lists(st.lists(st.integers(-1, 5), min_size=2, max_size=2), min_size=m, max_size=m)
        .map(lambda x: np.array(x, np.int32)),
    ))


user_arrays = attributions([1, 3, 8])
user_arrays_8 = attributions([8])


@HSET
@given(data=st.data(), users=user_arrays, b=st.integers(1, 5), n=st.integers(1, 12),
       on_sampled=st.booleans())
def test_multi_transition_matches_pseudocode(data, users, b, n, on_sampled):
    m = users.shape[0]
    coins = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m),
                                        min_size=n, max_size=n)), bool).reshape(n, m)
    u = jnp.asarray(users.reshape(m, -1))
    fn = lambda s, c: _multi_t(s, c, u, jnp.int32(b), 6, on_sampled)
    got = run_transition(fn, coins, np.zeros(m))
    np.testing.assert_array_equal(got, ref_multi(coins, users, b, on_sampled))


@HSET
@given(seed=st.integers(0, 2**31 - 1), users=user_arrays_8, p=st.floats(0.05, 1.0),
       b=st.integers(1, 6),
       cls=st.sampled_from([bt.MultiAttributionSampler, bt.ConjecturalMultiAttributionSampler]))
def test_multi_attribution_user_min_sep(seed, users, p, b, cls):
    n = 20
    s = cls(users, p, b, num_users=6)
    masks = np.asarray(s.sample_batches(jax.random.key(seed), n))
    assert masks.shape == (n, users.shape[0])
    assert_min_sep(user_masks_np(masks, users, 6), b)  # no user twice within b iterations


@pytest.mark.parametrize("users", [np.array([0, 2, 2, 1, 0]), np.array([[0, -1], [1, 2], [2, 2]])])
def test_user_participation_and_burn_in(users):
    b = 3
    s = bt.MultiAttributionSampler(users, 0.6, b, num_users=4)
    masks, final = s.sample_batches(jax.random.key(2), 25, burn_in=4, return_state=True)
    um = np.asarray(s.user_participation(masks))
    np.testing.assert_array_equal(um, user_masks_np(np.asarray(masks), users, 4))
    assert not um[:, 3].any()  # user without examples
    assert_min_sep(um, b)
    blocked = np.asarray(final.blocked)
    assert blocked.dtype == np.int32 and blocked.min() >= 0 and blocked.max() <= b - 1


def test_alg3_and_alg4_differ_as_in_the_paper():
    # one user, two examples, b = 3: e1 is sampled while blocked at iteration 2. Under Alg. 3 that
    # interim sample blocks the user through iteration 4; under Alg. 4 only B_1 counts.
    users = np.array([0, 0])
    coins = np.array([[1, 0], [0, 1], [1, 0], [1, 0]], bool)
    alg3 = ref_multi(coins, users, 3, True)
    alg4 = ref_multi(coins, users, 3, False)
    u = jnp.asarray(users.reshape(2, 1))
    for on_sampled, ref in ((True, alg3), (False, alg4)):
        fn = lambda s, c: bt.transitions.multi_transition(s, c, u, jnp.int32(3), 1, on_sampled)
        np.testing.assert_array_equal(run_transition(fn, coins, np.zeros(2)), ref)
    assert not alg3[3].any() and alg4[3, 0]


def test_alg4_with_singleton_users_is_alg1():
    m, p, b = 500, 0.2, 4
    key = jax.random.key(21)
    a4 = bt.ConjecturalMultiAttributionSampler(np.arange(m), p, b)
    a1 = bt.BMinSepSampler(m, p, b)
    np.testing.assert_array_equal(np.asarray(a4.sample_batches(key, 30)),
                                  np.asarray(a1.sample_batches(key, 30, warm_start=False)))


@pytest.mark.parametrize("k,p,b", [(1, 0.1, 4), (3, 0.05, 3), (5, 0.2, 2)])
def test_alg3_participation_rate(k, p, b):
    # U users with k examples each. For iterations i >= b (cold start) an example participates iff
    # its own coin is 1 and none of its user's k coins were 1 in the previous b - 1 iterations:
    # per user, X_u = Binom(k, p) * Bernoulli(q), q = (1-p)^(k(b-1)), independent across users.
    m = 60_000  # same shapes and num_users for every case: one compilation
    num_users = m // k
    users = np.repeat(np.arange(num_users), k)
    s = bt.MultiAttributionSampler(users, p, b, num_users=m)
    n = b + 3
    masks = np.asarray(s.sample_batches(jax.random.key(31), n))
    q = (1 - p) ** (k * (b - 1))
    mean_x = k * p * q
    var_x = q * (k * p * (1 - p) + (k * p) ** 2) - mean_x ** 2
    se = math.sqrt(var_x / num_users) / k
    r1 = masks[0].mean()
    assert abs(r1 - p) <= Z * math.sqrt(p * (1 - p) / (num_users * k))  # cold start: rate p
    np.testing.assert_array_less(np.abs(masks[b - 1:].mean(axis=1) - p * q), Z * se)
    # burn-in of b - 1 iterations already reaches this (exactly stationary) law
    w = np.asarray(s.sample_batches(jax.random.key(32), 1, burn_in=b - 1))
    assert abs(w.mean() - p * q) <= Z * se


def test_max_examples_per_user():
    assert bt.max_examples_per_user(np.array([0, 1, 1, 2, 1])) == 3
    assert bt.max_examples_per_user(np.array([[0, -1], [0, 1], [1, 1]])) == 2
    assert bt.max_examples_per_user(np.array([[-1, -1]])) == 0


# ------------------------------------------------------------------------------------------
# jit compatibility
# ------------------------------------------------------------------------------------------


def _loop(sampler, key, state, n):
    def body(carry, k):
        st_, acc = carry
        st_, batch = sampler.step(k, st_)
        mask = batch
        if isinstance(batch, bt.TruncatedBatch):  # fixed-size indices -> mask
            mask = jnp.zeros(acc.shape, bool).at[batch.indices].max(batch.valid)
        return (st_, acc + mask), batch

    return jax.lax.scan(body, (state, jnp.zeros(state.blocked.shape, jnp.int32)),
                        jax.random.split(key, n))


@pytest.mark.parametrize("sampler", [
    bt.BMinSepSampler(64, 0.2, 3),
    bt.TruncatedBMinSepSampler(64, 0.2, 3, 5),
    bt.MultiAttributionSampler(np.arange(64) % 10, 0.1, 3),
    bt.ConjecturalMultiAttributionSampler(np.arange(64) % 10, 0.1, 3),
], ids=["alg2", "truncated", "alg3", "alg4"])
def test_jit_compatible(sampler):
    key = jax.random.key(4)
    state = sampler.init(jax.random.fold_in(key, 7))  # warm (Alg. 2) or cold (Alg. 3/4)
    # sampler passed as a (pytree) argument and closed over; both match eager execution
    jitted = jax.jit(_loop, static_argnums=3)
    (st_a, acc_a), masks_a = jitted(sampler, key, state, 15)
    if isinstance(sampler, bt.MultiAttributionSampler):  # attribution array closed over
        (st_b, acc_b), masks_b = jax.jit(lambda k, s: _loop(sampler, k, s, 15))(key, state)
    else:
        (st_b, acc_b), masks_b = (st_a, acc_a), masks_a
    st_c, masks_c = state, []
    for k in jax.random.split(key, 15):
        st_c, batch = sampler.step(k, st_c)
        masks_c.append(batch)
    for x, y in zip(jax.tree.leaves((st_a, acc_a, masks_a)), jax.tree.leaves((st_b, acc_b, masks_b))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(st_a.blocked), np.asarray(st_c.blocked))
    ref = jax.tree.map(lambda *xs: np.stack(xs), *masks_c)
    for x, y in zip(jax.tree.leaves(masks_a), jax.tree.leaves(ref)):
        np.testing.assert_array_equal(np.asarray(x), y)
    assert st_a.blocked.dtype == jnp.int32
    # sample_batches itself under jit
    f = jax.jit(lambda k: bt.sample_batches(k, sampler, 7))
    np.testing.assert_array_equal(np.asarray(f(key)), np.asarray(bt.sample_batches(key, sampler, 7)))


def test_warm_init_under_jit():
    s = bt.BMinSepSampler(32, 0.3, 4)
    key = jax.random.key(8)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda k: s.init(k).blocked)(key)),
                                  np.asarray(s.init(key).blocked))


# ------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,name", [
    (dict(dataset_size=0, sampling_prob=0.1, min_sep=2), "dataset_size"),
    (dict(dataset_size=2.5, sampling_prob=0.1, min_sep=2), "dataset_size"),
    (dict(dataset_size=10, sampling_prob=0.0, min_sep=2), "sampling_prob"),
    (dict(dataset_size=10, sampling_prob=1.5, min_sep=2), "sampling_prob"),
    (dict(dataset_size=10, sampling_prob=float("nan"), min_sep=2), "sampling_prob"),
    (dict(dataset_size=10, sampling_prob=0.1, min_sep=0), "min_sep"),
    (dict(dataset_size=10, sampling_prob=0.1, min_sep=1.5), "min_sep"),
    (dict(dataset_size=10, sampling_prob=0.1, min_sep=True), "min_sep"),
])
def test_bminsep_validation(kwargs, name):
    with pytest.raises(ValueError, match=name):
        bt.BMinSepSampler(**kwargs)
    with pytest.raises(ValueError, match=name):
        bt.TruncatedBMinSepSampler(**kwargs, max_batch_size=4)


@pytest.mark.parametrize("bmax", [0, -3, 2.5, None])
def test_truncated_validation(bmax):
    with pytest.raises(ValueError, match="max_batch_size"):
        bt.TruncatedBMinSepSampler(10, 0.1, 2, bmax)
    with pytest.raises(ValueError, match="max_batch_size"):
        bt.truncate_batch(jax.random.key(0), jnp.ones(4, bool), bmax)


def test_rate_validation():
    with pytest.raises(ValueError, match=r"^rate must be in \(0, 0\.25\]; got 0\.3$"):
        bt.sampling_prob_from_rate(0.3, 4)
    with pytest.raises(ValueError, match="rate"):
        bt.BMinSepSampler.from_participation_rate(10, 0.0, 2)
    with pytest.raises(ValueError, match="min_sep"):
        bt.participation_rate(0.5, 0)


@pytest.mark.parametrize("users,kw,name", [
    (np.array([0.5, 1.0]), {}, "user_of_example"),
    (np.array([True, False]), {}, "user_of_example"),
    (np.array([0, -1]), {}, "user_of_example"),
    (np.array([[0, -2]]), {}, "user_of_example"),
    (np.zeros((0,), np.int32), {}, "user_of_example"),
    (np.zeros((2, 2, 2), np.int32), {}, "user_of_example"),
    (np.array([0, 3]), dict(num_users=3), "num_users"),
    (np.array([0, 1]), dict(sampling_prob=0.0), "sampling_prob"),
    (np.array([0, 1]), dict(min_sep=0), "min_sep"),
])
@pytest.mark.parametrize("cls", [bt.MultiAttributionSampler, bt.ConjecturalMultiAttributionSampler])
def test_multi_validation(cls, users, kw, name):
    args = dict(sampling_prob=0.1, min_sep=2) | kw
    with pytest.raises(ValueError, match=name):
        cls(users, **args)


def test_call_validation():
    s = bt.BMinSepSampler(10, 0.1, 2)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="iterations"):
        s.sample_batches(key, 0)
    with pytest.raises(ValueError, match="warm_start"):
        s.init(key, warm_start=1)
    with pytest.raises(ValueError, match="key"):
        s.init(None, warm_start=True)
    with pytest.raises(ValueError, match=r"state\.blocked.*\(10,\)"):
        s.step(key, bt.SamplerState(jnp.zeros(9, jnp.int32)))
    with pytest.raises(ValueError, match="state"):
        s.step(key, jnp.zeros(10, jnp.int32))
    ma = bt.MultiAttributionSampler(np.arange(10), 0.1, 2)
    with pytest.raises(ValueError, match="burn_in"):
        ma.init(key, burn_in=-1)
    with pytest.raises(ValueError, match="key"):
        ma.init(None, burn_in=2)
    with pytest.raises(ValueError, match="sampler"):
        bt.sample_batches(key, object(), 3)
    with pytest.raises(ValueError, match="mask"):
        bt.truncate_batch(key, jnp.ones((2, 2), bool), 3)
