"""Tamper evidence of job files (#37): consistency of the statistics, the digest, the optional MAC, stale temporary
files. Every edit of a shard is refused by the digest; edits whose digest was recomputed (a writer who knows the
format) are refused by the consistency checks where the histogram bounds them, and by the MAC under a key."""

from __future__ import annotations

import json
import os
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mcacct
from mcacct.cli.commands import main
from mcacct.engine.problem import Problem
from mcacct.statistics.accumulators import DirectionStats, HistogramSpec, chunk_statistics
from mcacct.evr.calibrate import plan_calibration
from mcacct.jobs import calibration as cj
from mcacct.jobs import integrity, shards as jobs

PB = Problem(mcacct.BMinSep(0.2, 4, 32), mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5)))
KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """Two shards of a small plan (no key), and the single-run statistics."""
    out = tmp_path_factory.mktemp("good")
    cfg = jobs.JobConfig(PB, 0.9, (0.5, 1.0), 1024, 256, 3)
    os.environ.pop(integrity.KEY_ENV, None)
    for i in range(2):
        jobs.run_shard(cfg, i, 2, str(out))
    ref = mcacct.estimate(PB, cfg.sigma, cfg.root_key(), cfg.num_samples, cfg.epsilons, chunk_size=256).stats
    return out, cfg, ref


def _copy(good, tmp_path, name="t"):
    d = tmp_path / name
    shutil.copytree(good[0], d)
    return d, d / jobs.shard_filename(0, 2)


def _edit(path, edit, reseal):
    obj = json.loads(path.read_text())
    edit(obj["directions"]["remove"])
    path.write_text(json.dumps(integrity.seal(obj, b"") if reseal else obj))


def _error(capsys):
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_good_shards_merge_bit_identically_and_say_how_they_were_checked(good, capsys, monkeypatch):
    monkeypatch.delenv(integrity.KEY_ENV, raising=False)
    out, cfg, ref = good
    res = jobs.merge([str(out)])
    for d in ref:
        assert res.stats[d].count == ref[d].count and res.stats[d].sums == ref[d].sums
        np.testing.assert_array_equal(res.stats[d].hist, ref[d].hist)
    assert res.integrity == "digest" and res.report()["integrity"] == "digest"
    obj = json.loads((out / jobs.shard_filename(0, 2)).read_text())
    assert set(obj["integrity"]) == {"digest"} and obj["integrity"]["digest"].startswith("sha256:")
    assert main(["merge", str(out)]) == 0
    assert "files checked by SHA-256 digest" in capsys.readouterr().out


# (edit of the remove direction, text of the refusal once the digest is recomputed)
def _one_digit(e):
    s = str(e["sums"][0])
    e["sums"][0] = int(s[0] + str((int(s[1]) + 5) % 10) + s[2:])


def _move_mass(e):
    e["hist"]["count"][-1] -= 1  # one sample of the highest bin moved to L <= 0
    if e["hist"]["count"][-1] == 0:
        e["hist"]["count"].pop()
        e["hist"]["index"].pop()
    if e["hist"]["index"][0] == 0:
        e["hist"]["count"][0] += 1
    else:
        e["hist"]["index"].insert(0, 0)
        e["hist"]["count"].insert(0, 1)


TAMPERS = [
    ("one digit of a sum", _one_digit, "outside"),
    ("zeroed sums", lambda e: e.update(sums=[0, 0]), "outside"),
    ("negative histogram count", lambda e: e["hist"]["count"].__setitem__(1, -e["hist"]["count"][1]), "positive"),
    ("duplicate index", lambda e: (e["hist"]["index"].__setitem__(2, e["hist"]["index"][1])), "sorted and unique"),
    ("unsorted indices", lambda e: e["hist"]["index"].__setitem__(slice(1, 3), e["hist"]["index"][2:0:-1]),
     "sorted and unique"),
    ("histogram total != count", lambda e: e["hist"]["count"].__setitem__(0, e["hist"]["count"][0] + 1),
     "histogram holds"),
    ("count changed with the histogram", lambda e: (e.update(count=e["count"] + 1),
                                                    e["hist"]["count"].__setitem__(0, e["hist"]["count"][0] + 1)),
     "done chunks hold"),
    ("moved mass", _move_mass, "outside"),
    ("index out of range", lambda e: e["hist"]["index"].__setitem__(-1, 10**6), "out of range"),
    ("float sum", lambda e: e["sums"].__setitem__(0, 1.5), "list of integers"),
]


@pytest.mark.parametrize("name,edit,why", TAMPERS, ids=[t[0] for t in TAMPERS])
def test_tampered_shard_is_refused(good, tmp_path, capsys, monkeypatch, name, edit, why):
    monkeypatch.delenv(integrity.KEY_ENV, raising=False)
    d, p = _copy(good, tmp_path)
    original = p.read_text()
    _edit(p, edit, reseal=False)
    with pytest.raises(ValueError, match="digest does not match"):
        jobs.merge([str(d)])
    assert main(["merge", str(d)]) == 2
    assert "digest does not match" in _error(capsys)
    p.write_text(original)
    _edit(p, edit, reseal=True)  # a writer who recomputes the digest: the statistics themselves are refused
    with pytest.raises(ValueError, match=why):
        jobs.merge([str(d)])


def test_missing_digest_is_refused(good, tmp_path, monkeypatch):
    monkeypatch.delenv(integrity.KEY_ENV, raising=False)
    d, p = _copy(good, tmp_path)
    obj = json.loads(p.read_text())
    obj.pop("integrity")
    p.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="carries no digest"):
        jobs.merge([str(d)])


def test_mac_under_a_key(good, tmp_path, capsys, monkeypatch):
    out, cfg, ref = good
    monkeypatch.setenv(integrity.KEY_ENV, KEY)
    # files written without the key are refused once a key is set
    with pytest.raises(ValueError, match="not signed"):
        jobs.merge([str(out)])
    signed = tmp_path / "signed"
    for i in range(2):
        jobs.run_shard(cfg, i, 2, str(signed))
    res = jobs.merge([str(signed)])
    assert res.integrity == "mac" and res.stats["remove"].sums == ref["remove"].sums
    assert main(["merge", str(signed), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["integrity"] == "mac"
    # a writer without the key: edits the sums and recomputes the digest (keeping the old MAC)
    p = signed / jobs.shard_filename(0, 2)
    obj = json.loads(p.read_text())
    mac = obj["integrity"]["mac"]
    obj["directions"]["remove"]["sums"][0] -= 1
    obj = integrity.seal(obj, b"")
    obj["integrity"]["mac"] = mac
    p.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="MAC does not match"):
        jobs.merge([str(signed)])
    # another key
    monkeypatch.setenv(integrity.KEY_ENV, "another key of enough length!!")
    with pytest.raises(ValueError, match="MAC does not match"):
        jobs.merge([str(signed / jobs.shard_filename(1, 2))], allow_partial=True)
    # without a key the digest alone is checked (the MAC cannot be)
    monkeypatch.delenv(integrity.KEY_ENV)
    assert jobs.merge([str(signed / jobs.shard_filename(1, 2))], allow_partial=True).integrity == "digest"
    monkeypatch.setenv(integrity.KEY_ENV, "short")
    assert main(["merge", str(signed)]) == 2
    assert integrity.KEY_ENV in _error(capsys)


def test_calibration_plan_shards_are_sealed(tmp_path, capsys, monkeypatch):
    """The audit's case: zeroed remove sums of the lower candidates made `calibrate --from` certify a sigma far
    too small. The digest refuses the edited file; a writer who recomputes the digest is stopped by the MAC only
    (the verification histogram has one bin, so it bounds these sums from below by 0); the plan is sealed too."""
    monkeypatch.setenv(integrity.KEY_ENV, KEY)
    plan = plan_calibration(PB, 1.0, 0.2, jax.random.key(0), num_samples=512, chunk_size=256,
                            sigmas=[0.8, 2.0, 3.0])
    d = str(tmp_path / "plan")
    cj.write_plan(d, plan, PB)
    cj.run_plan_shard(d, 0, 1)
    assert cj.calibrate_from(d).sigma == 2.0
    p = tmp_path / "plan" / jobs.shard_filename(0, 1)
    signed = json.loads(p.read_text())
    attack = json.loads(p.read_text())
    for c in attack["candidates"]:  # sigma = 0.8 left after its first chunk: it now looks complete and clean
        c["remove"] = {**c["remove"], "count": 512, "sums": [0], "hist": {"size": 3, "index": [1], "count": [512]}}
        c["add"] = {**c["add"], "count": 512, "sums": [0], "hist": {"size": 3, "index": [1], "count": [512]}}
    p.write_text(json.dumps(attack))
    assert main(["calibrate", "--from", d, "--json"]) == 2
    assert "digest does not match" in _error(capsys)
    p.write_text(json.dumps(integrity.seal(attack, b"")))  # digest recomputed, no MAC
    with pytest.raises(ValueError, match="not signed"):
        cj.calibrate_from(d)
    forged = integrity.seal(attack, b"")
    forged["integrity"]["mac"] = signed["integrity"]["mac"]
    p.write_text(json.dumps(forged))
    with pytest.raises(ValueError, match="MAC does not match"):
        cj.calibrate_from(d)
    monkeypatch.delenv(integrity.KEY_ENV)  # what the digest alone cannot stop, and why the MAC exists
    assert cj.calibrate_from(d).sigma == 0.8
    # more samples than the done chunks hold, with the digest recomputed
    over = json.loads(json.dumps(signed))
    over["candidates"][1]["add"]["count"] += 1
    over["candidates"][1]["add"]["hist"]["count"][0] += 1
    p.write_text(json.dumps(integrity.seal(over, b"")))
    with pytest.raises(ValueError, match="more than its done chunks hold"):
        cj.calibrate_from(d)
    plan_path = tmp_path / "plan" / cj.PLAN_NAME
    pd = json.loads(plan_path.read_text())
    pd["plan"]["base_delta"] *= 10
    pd["fingerprint"] = cj.plan_fingerprint(pd)  # fingerprint recomputed, digest not
    plan_path.write_text(json.dumps(pd))
    with pytest.raises(ValueError, match="digest does not match"):
        cj.load_plan(d)


def test_stale_temporaries_are_removed(tmp_path):
    target = tmp_path / "shard-00000-of-00001.json"
    stale = tmp_path / ".shard-00000-of-00001.json.abc.tmp"
    fresh = tmp_path / ".shard-00000-of-00001.json.def.tmp"
    other = tmp_path / ".other.json.abc.tmp"
    for f in (stale, fresh, other):
        f.write_text("{partial")
    old = time.time() - 2 * jobs.STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    jobs.atomic_write_json(str(target), {"a": 1})
    assert not stale.exists() and fresh.exists() and other.exists()
    assert json.loads(target.read_text()) == {"a": 1}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-5.0, 80.0, allow_nan=False), min_size=1, max_size=64),
       st.sampled_from([HistogramSpec(), HistogramSpec(0.25, 16), HistogramSpec(64.0, 1)]),
       st.floats(0.0, 0.1))
def test_statistics_of_real_chunks_always_pass(losses, spec, shift):
    """No false refusal: statistics accumulated by the engine's own chunk reducer from any losses pass the
    consistency check (the slack of the bracket covers the float64 rounding)."""
    eps = (0.0, 0.5, 3.0, 70.0)
    arr = np.zeros(64)
    arr[: len(losses)] = losses
    sums, hist = chunk_statistics(jnp.asarray(arr), len(losses), jnp.asarray(eps), spec, shift)
    s = DirectionStats(eps, spec)
    s.add_chunk(len(losses), np.asarray(sums), np.asarray(hist))
    s.add_chunk(len(losses), np.asarray(sums), np.asarray(hist))
    integrity.check_statistics(s.count, s.sums, s.hist, eps, spec.width, spec.bins, "x")
    round_trip = jobs.stats_from_json(json.loads(json.dumps(jobs.stats_to_json(s))), eps, spec)
    assert round_trip.sums == s.sums and round_trip.count == s.count
