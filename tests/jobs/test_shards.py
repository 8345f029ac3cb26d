"""Shard jobs: atomic checkpoints, kill/resume, exact merge and its refusals, plot, launchers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

import mcacct
from mcacct.jobs import integrity, shards as jobs
from mcacct.engine.problem import Problem
from mcacct.schemes import registry
from mcacct.evr.calibrate import candidate_key
from mcacct.cli.commands import main
from mcacct.statistics.accumulators import DIRECTIONS

from helpers import ROOT, sigkill_when  # noqa: E402
from suite_env import cpu_subprocess_env  # noqa: E402
PB = Problem(mcacct.BMinSep(0.2, 4, 32), mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5)))
SCHEME = ["--iterations", "32", "--min-sep", "4", "--sampling-prob", "0.2", "--c-col", "0.5,0.5,0.5,0.5"]
SIGMA, CHUNK = 0.9, 256
N_SMALL = 256 * 8 + 5  # 9 chunks per direction, the last one masked


def _cfg(sigma=SIGMA, n=N_SMALL, candidate=None, eps=(0.5, 1.0), seed=0) -> jobs.JobConfig:
    return jobs.JobConfig(PB, sigma, eps, n, CHUNK, seed, candidate)


def _shards(out, cfg, k, which=None):
    for i in (range(k) if which is None else which):
        jobs.run_shard(cfg, i, k, str(out))


def _assert_same(a, b):
    assert a.count == b.count
    assert a.sums == b.sums
    np.testing.assert_array_equal(a.hist, b.hist)


def _reference(cfg):
    """The single-run statistics: both directions on shared draws, as `mcacct delta` (mcacct.engine.estimate)."""
    return mcacct.estimate(PB, cfg.sigma, cfg.root_key(), cfg.num_samples, cfg.epsilons, chunk_size=CHUNK).stats


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A complete 3-shard plan and its single-run reference."""
    out = tmp_path_factory.mktemp("small")
    cfg = _cfg()
    _shards(out, cfg, 3)
    return out, cfg, _reference(cfg)


def test_merge_equals_single_run_and_delta_cli(small, capsys):
    out, cfg, ref = small
    res = jobs.merge([str(out)])
    assert res.complete and not res.missing_shards
    for d in DIRECTIONS:
        _assert_same(res.stats[d], ref[d])
    # the merged report equals `mcacct delta` with the same flags, number for number
    assert main(["merge", str(out), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert main(["delta", "--sigma", str(SIGMA), "--epsilon", "0.5", "--samples", str(N_SMALL), "--chunk-size",
                 str(CHUNK), *SCHEME, "--json", "--quiet"]) == 0
    delta = json.loads(capsys.readouterr().out)
    for k in ("delta_estimate", "delta_upper", "num_samples"):
        assert merged[k] == delta[k]
    assert merged["directions"] == delta["directions"]
    assert len(merged["results"]) == 2 and merged["samples_per_second"] > 0


def test_other_splits_and_merged_files_combine(small, tmp_path):
    out, cfg, ref = small
    # shard 0 of 2 plus shards 2, 3 of 4 cover the plan exactly once
    _shards(tmp_path / "a", cfg, 2, [0])
    _shards(tmp_path / "b", cfg, 4, [2, 3])
    res = jobs.merge([str(tmp_path / "a"), str(tmp_path / "b")])
    assert res.complete
    for d in DIRECTIONS:
        _assert_same(res.stats[d], ref[d])
    # a merged file can be merged (and plotted) again
    path = jobs.write_merged(res, str(tmp_path / "m"))
    again = jobs.merge([str(tmp_path / "m")])
    for d in DIRECTIONS:
        _assert_same(again.stats[d], ref[d])
    assert json.load(open(path))["kind"] == "merged"


def test_merge_rejects_duplicate_shard(small, tmp_path):
    out, cfg, _ = small
    dup = tmp_path / "dup"
    dup.mkdir()
    shutil.copy(out / jobs.shard_filename(1, 3), dup / jobs.shard_filename(1, 3))
    with pytest.raises(ValueError, match=r"duplicate shard 1 of 3"):
        jobs.merge([str(out), str(dup)])
    # the same directory twice is the same files, not a duplicate
    assert jobs.merge([str(out), str(out)]).complete


def test_merge_rejects_overlapping_ranges(small, tmp_path):
    out, cfg, _ = small
    _shards(tmp_path, cfg, 2, [0])
    with pytest.raises(ValueError, match="overlapping key ranges"):
        jobs.merge([str(out / jobs.shard_filename(0, 3)), str(tmp_path)])


def test_merge_rejects_other_sigma_with_clear_message(small, tmp_path, capsys):
    out, cfg, _ = small
    _shards(tmp_path, _cfg(sigma=1.2), 3, [2])
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(out / jobs.shard_filename(0, 3), mixed)
    shutil.copy(out / jobs.shard_filename(1, 3), mixed)
    shutil.copy(tmp_path / jobs.shard_filename(2, 3), mixed)
    with pytest.raises(ValueError, match=r"sigma differs \(0\.9 in .*, 1\.2 in "):
        jobs.merge([str(mixed)])
    assert main(["merge", str(mixed)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot merge") and "sigma differs" in err


def test_merge_reports_missing_shards(small, tmp_path, capsys):
    out, cfg, ref = small
    part = tmp_path / "part"
    part.mkdir()
    for i in (0, 2):
        shutil.copy(out / jobs.shard_filename(i, 3), part)
    with pytest.raises(ValueError, match=r"missing shards 1/3"):
        jobs.merge([str(part)])
    assert main(["merge", str(part)]) == 2
    assert "missing shards 1/3" in capsys.readouterr().err
    assert main(["merge", str(part), "--allow-partial", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    a, b = jobs.shard_chunk_range(9, 1, 3)
    assert rep["complete"] is False and rep["missing_shards"] == ["1/3"]
    assert rep["missing_chunks"] == {d: [[a, b]] for d in DIRECTIONS}
    assert rep["num_samples"] == N_SMALL - (b - a) * CHUNK


def test_resume_refuses_other_config_and_candidates_are_independent(small, tmp_path):
    out, cfg, _ = small
    with pytest.raises(ValueError, match="sigma differs"):
        jobs.run_shard(_cfg(sigma=1.0), 0, 3, str(out))
    c0, c1 = tmp_path / "c0", tmp_path / "c1"
    _shards(c0, _cfg(candidate=0), 2)
    _shards(c1, _cfg(candidate=1), 2)
    m0, m1 = jobs.merge([str(c0)]), jobs.merge([str(c1)])
    key0 = candidate_key(jax.random.key(0), 0)
    _assert_same(m0.stats["add"], mcacct.estimate(PB, SIGMA, key0, N_SMALL, (0.5, 1.0), chunk_size=CHUNK).stats["add"])
    assert m0.stats["add"].sums != m1.stats["add"].sums
    with pytest.raises(ValueError, match="candidate differs"):
        jobs.merge([str(c0), str(c1)])


def test_max_chunks_then_resume(tmp_path, small, capsys):
    _, cfg, ref = small
    s = jobs.run_shard(cfg, 0, 1, str(tmp_path), max_chunks=4)
    assert not s["complete"] and s["samples_total"] == 2 * 4 * CHUNK  # a chunk covers both directions
    with pytest.raises(ValueError, match="unfinished shards 0/1"):
        jobs.merge([str(tmp_path)])
    argv = ["sample", "--out", str(tmp_path), "--sigma", str(SIGMA), "--epsilon", "0.5,1", "--samples",
            str(N_SMALL), "--chunk-size", str(CHUNK), *SCHEME]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert "complete" in cap.out and "resumed" in cap.out
    assert "samples" in cap.err and "ETA" in cap.err  # progress on stderr
    res = jobs.merge([str(tmp_path)])
    for d in DIRECTIONS:
        _assert_same(res.stats[d], ref[d])


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path):
    """SIGKILL a `mcacct sample` shard once its checkpoint shows a completed chunk; resume; compare."""
    n = 256 * 300  # 300 chunks per direction: shard 0 of 2 has 300 chunks to do
    cfg = _cfg(n=n)
    out = tmp_path / "run"
    path = out / jobs.shard_filename(0, 2)
    argv = ["sample", "--shard", "0", "--num-shards", "2", "--out", str(out), "--sigma", str(SIGMA),
            "--epsilon", "0.5,1", "--samples", str(n), "--chunk-size", str(CHUNK), *SCHEME, "--quiet"]
    env = cpu_subprocess_env()
    proc = subprocess.Popen([sys.executable, "-m", "mcacct", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)

    def one_chunk_done():
        if not path.exists():
            return False
        f = jobs.load_stats_file(str(path))
        return sum(b - a for r in f.done.values() for a, b in r) >= 1

    sigkill_when(proc, one_chunk_done)
    killed = jobs.load_stats_file(str(path))  # the checkpoint is a complete, valid file
    assert not killed.complete and killed.stats["remove"].count >= CHUNK
    assert killed.stats["remove"].count == CHUNK * sum(b - a for a, b in killed.done["remove"])
    assert main(argv) == 0  # resume
    resumed = jobs.load_stats_file(str(path))
    assert resumed.complete
    jobs.run_shard(cfg, 1, 2, str(out), checkpoint_seconds=1e9)
    res = jobs.merge([str(out)])
    ref = _reference(cfg)
    for d in DIRECTIONS:
        _assert_same(res.stats[d], ref[d])


def test_leftover_temp_file_is_ignored(small, tmp_path):
    out, cfg, ref = small
    d = tmp_path / "t"
    shutil.copytree(out, d)
    (d / ".shard-00000-of-00003.json.xyz.tmp").write_text("{partial")
    assert jobs.merge([str(d)]).complete


def test_corrupt_file_is_refused(small, tmp_path):
    out, _, _ = small
    d = tmp_path / "c"
    shutil.copytree(out, d)
    p = d / jobs.shard_filename(0, 3)
    obj = json.loads(p.read_text())
    obj["config"]["sigma"] = 0.8  # edited without updating the fingerprint or the digest
    p.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="digest does not match"):
        jobs.merge([str(d)])
    p.write_text(json.dumps(integrity.seal(obj)))  # digest recomputed: the fingerprint still catches it
    with pytest.raises(ValueError, match="fingerprint"):
        jobs.merge([str(d)])


def test_plot(small, tmp_path, capsys, monkeypatch):
    out, _, _ = small
    fig = tmp_path / "fig.png"
    assert main(["plot", str(out), "--out", str(fig), "--points", "40"]) == 0
    assert fig.stat().st_size > 1000 and "wrote" in capsys.readouterr().out
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["plot", str(out), "--out", str(tmp_path / "g.png")]) == 2
    assert "error: mcacct plot needs matplotlib" in capsys.readouterr().err


def test_cli_bad_input_exit_2(tmp_path, capsys):
    base = ["sample", "--out", str(tmp_path), "--sigma", "0.9", "--epsilon", "1", *SCHEME]
    assert main([*base[:-len(SCHEME)], "--shard", "2", "--num-shards", "2", *SCHEME]) == 2
    assert "error: --shard must be in [0, 1]; got 2" in capsys.readouterr().err
    assert _main(["sample", "--out", str(tmp_path), "--sigma", "-1", "--epsilon", "1", *SCHEME]) == 2
    assert "error: --sigma must be in (0, inf); got -1" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(ValueError, match="num_shards"):
        jobs.shard_chunk_range(10, 0, 0)


@pytest.mark.slow
def test_job_array_launcher(small, tmp_path):
    out, cfg, ref = small
    env = cpu_subprocess_env(SLURM_ARRAY_TASK_ID="1", SLURM_ARRAY_TASK_COUNT="3")
    d = tmp_path / "arr"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "launch", "job_array.py"), f"--out={d}", "--",
                        "--sigma", str(SIGMA), "--epsilon", "0.5,1", "--samples", str(N_SMALL), "--chunk-size",
                        str(CHUNK), *SCHEME, "--quiet"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (d / jobs.shard_filename(1, 3)).exists()
    for i in (0, 2):
        shutil.copy(out / jobs.shard_filename(i, 3), d)
    res = jobs.merge([str(d)])
    for k in DIRECTIONS:
        _assert_same(res.stats[k], ref[k])


# -- fingerprints identify the mechanism and the kernel -----------------------------------------------------
def _all_scheme_problems():
    from mcacct.schemes.banded_inverse import BandedInverse
    from mcacct.schemes.balls_in_bins import BallsInBins
    from mcacct.schemes.cyclic_poisson import CyclicPoisson
    from mcacct.schemes.multi_attribution import MultiAttribution
    from mcacct.schemes.truncated import TruncatedBMinSep
    st = mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5))
    return [Problem(mcacct.BMinSep(0.2, 4, 32), st),
            Problem(TruncatedBMinSep(0.2, 4, 32, 40, 8), st),
            Problem(TruncatedBMinSep(0.2, 4, 32, 41, 8), st),
            Problem(BandedInverse(0.2, 4, 32), st),
            Problem(MultiAttribution(0.2, 4, 32, 1), st),
            Problem(MultiAttribution(0.2, 4, 32, 2), st),
            Problem(CyclicPoisson(0.2, 4, 32), st),
            Problem(CyclicPoisson(0.2, 4, 32, random_phase=False), st),
            Problem(BallsInBins(4, 32), st),
            Problem(mcacct.BMinSep(0.2, 4, 32), st, recursion="scan"),
            Problem(mcacct.BMinSep(0.2, 4, 32), st, dot_method="direct"),
            Problem(mcacct.BMinSep(0.2, 4, 32), st, dtype="float32")]


def test_fingerprint_covers_scheme_type_fields_and_kernel(monkeypatch):
    cfgs = [jobs.JobConfig(p, SIGMA, (0.5,), N_SMALL, CHUNK) for p in _all_scheme_problems()]
    prints = [c.fingerprint() for c in cfgs]
    assert len(set(prints)) == len(prints)  # equal (n, b, p, warm) but other mechanisms: all different
    for c in cfgs:  # the config round-trips exactly (type and every field)
        d = c.to_dict()
        assert d["kernel"] == jobs.KERNEL_VERSION and d["scheme"]["type"] == registry.entry_for(c.problem.scheme).name
        back = jobs.JobConfig.from_dict(json.loads(json.dumps(d)))
        assert back == c and back.fingerprint() == c.fingerprint()
    from mcacct.jobs import problem_file
    monkeypatch.setattr(problem_file, "KERNEL_VERSION", "another kernel")
    assert cfgs[0].fingerprint() != prints[0]


def test_merge_refuses_other_scheme_type_with_equal_parameters(small, tmp_path):
    from mcacct.schemes.banded_inverse import BandedInverse
    out, cfg, _ = small
    other = jobs.JobConfig(Problem(BandedInverse(0.2, 4, 32), PB.strategy), SIGMA, (0.5, 1.0), N_SMALL, CHUNK)
    assert other.fingerprint() != cfg.fingerprint()
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for i in (0, 1):
        shutil.copy(out / jobs.shard_filename(i, 3), mixed)
    # (run_shard itself refuses to write next to shards of another configuration: run elsewhere and copy)
    jobs.run_shard(other, 2, 3, str(tmp_path / "other"))
    shutil.copy(tmp_path / "other" / jobs.shard_filename(2, 3), mixed)
    with pytest.raises(ValueError, match=r"scheme\.type differs \('bminsep'.*'banded-inverse'"):
        jobs.merge([str(mixed)])
    # nor can a shard file of one mechanism be resumed by another
    with pytest.raises(ValueError, match=r"scheme\.type differs"):
        jobs.run_shard(other, 0, 3, str(mixed))


def test_multi_attribution_shards_merge_to_the_single_run(tmp_path):
    from mcacct.schemes.multi_attribution import MultiAttribution
    problem = Problem(MultiAttribution(0.3, 2, 8, 2), mcacct.BandedToeplitz((1.0, 0.5)))
    cfg = jobs.JobConfig(problem, 1.1, (0.5,), 64 * 3 + 7, 64, seed=3)
    for i in range(2):
        jobs.run_shard(cfg, i, 2, str(tmp_path))
    res = jobs.merge([str(tmp_path)])
    assert res.complete and res.config == cfg
    ref = mcacct.estimate(problem, cfg.sigma, cfg.root_key(), cfg.num_samples, cfg.epsilons, chunk_size=64)
    for d in DIRECTIONS:
        _assert_same(res.stats[d], ref.stats[d])
    assert res.report()["config"]["scheme"] == {"type": "multi-attribution", "sampling_prob": 0.3, "min_sep": 2,
                                                "iterations": 8, "max_examples_per_user": 2}


def test_files_of_another_kernel_or_generator_or_without_type_are_refused(small, tmp_path):
    out, _, _ = small
    src = json.loads((out / jobs.shard_filename(0, 3)).read_text())

    def rewrite(name, edit):
        obj = json.loads(json.dumps(src))
        edit(obj["config"])
        obj["fingerprint"] = jobs.config_fingerprint(obj["config"])  # consistent file, only the content is old
        d = tmp_path / name
        d.mkdir()
        (d / jobs.shard_filename(0, 3)).write_text(json.dumps(integrity.seal(obj)))
        return str(d)

    old_kernel = rewrite("k", lambda c: c.update(kernel="mcacct-kernel/0"))
    with pytest.raises(ValueError, match="kernel"):
        jobs.merge([old_kernel], allow_partial=True)
    # a file of the earlier format: no kernel, scheme without its type
    legacy = rewrite("legacy", lambda c: (c.pop("kernel"), c.pop("recursion"), c["scheme"].pop("type")))
    with pytest.raises(ValueError, match="kernel"):
        jobs.merge([legacy], allow_partial=True)
    other_rng = rewrite("rng", lambda c: c.update(rng="jax.random:rbg:classic"))
    with pytest.raises(ValueError, match="rng"):
        jobs.merge([other_rng], allow_partial=True)
    untyped = rewrite("untyped", lambda c: c["scheme"].pop("type"))
    with pytest.raises(ValueError, match="no 'type'"):
        jobs.merge([untyped], allow_partial=True)
    unknown = rewrite("unknown", lambda c: c["scheme"].update(type="Shuffling"))
    with pytest.raises(ValueError, match="scheme.type must be one of"):
        jobs.merge([unknown], allow_partial=True)


def test_job_config_refuses_unknown_scheme():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Custom(mcacct.BMinSep):
        pass

    with pytest.raises(ValueError, match="problem.scheme must be one of"):
        jobs.JobConfig(Problem(Custom(0.2, 4, 32), PB.strategy), SIGMA, (0.5,), 10, 5)


# -- issue 19: one-direction runs, certification notes, refusals before any write ---------------------------
FLOAT32_NOTE = ("note: float32 kernel: its round-off is not bounded, so the upper bound holds for the float32 "
                "computation, not as a privacy certificate (use --dtype float64)")


def _sample_argv(out, *extra):
    return ["sample", "--out", str(out), "--sigma", str(SIGMA), "--epsilon", "0.5,1", "--samples", str(N_SMALL),
            "--chunk-size", str(CHUNK), *SCHEME, "--quiet", *extra]


def _main(argv):
    """``main(argv)``'s exit status, also for refusals at parse time (argparse exits with status 2)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _one_error(capsys, *needles):
    """Exactly one ``error:`` line on stderr (argparse may print its usage lines above it; no traceback),
    containing every needle; returns it."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _listing(d):
    return sorted((p.name, p.stat().st_mtime_ns) for p in d.iterdir()) if d.exists() else None


def test_one_direction_run_is_labelled_and_never_certified(small, tmp_path, capsys):
    out, cfg, _ = small
    assert _main(["merge", str(out), "--json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["certified"] is True and both["directions_run"] == ["remove", "add"] and "note" not in both
    d = tmp_path / "add"
    assert _main(_sample_argv(d, "--direction", "add")) == 0
    capsys.readouterr()
    assert _main(["merge", str(d), "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["directions_run"] == ["add"] and one["certified"] is False
    assert "add direction" in one["note"] and "not a certificate of the mechanism" in one["note"]
    assert _main(["merge", str(d)]) == 0
    text = capsys.readouterr().out
    assert "add direction only" in text and "note:" in text and "not a certificate of the mechanism" in text
    # the Python API says the same of a one-direction estimate
    est = mcacct.estimate(PB, SIGMA, cfg.root_key(), 2 * CHUNK, (0.5,), chunk_size=CHUNK, directions=("add",))
    assert est.certified is False


def test_merge_text_carries_the_float32_note(small, tmp_path, capsys):
    out, _, _ = small
    d = tmp_path / "f32"
    d.mkdir()
    for name in os.listdir(out):  # the same statistics, labelled as drawn by the float32 kernel
        obj = json.loads((out / name).read_text())
        obj["config"]["dtype"] = "float32"
        obj["fingerprint"] = jobs.config_fingerprint(obj["config"])
        (d / name).write_text(json.dumps(integrity.seal(obj)))
    assert _main(["merge", str(d)]) == 0
    assert FLOAT32_NOTE in capsys.readouterr().out.splitlines()
    assert _main(["merge", str(d), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["certified"] is False and "float32" in rep["note"]


def test_merge_out_existing_file_is_an_error(small, tmp_path, capsys):
    out, _, _ = small
    f = tmp_path / "taken"
    f.write_text("keep me")
    assert _main(["merge", str(out), "--out", str(f)]) == 2
    _one_error(capsys, "--out", str(f))
    assert f.read_text() == "keep me"


def test_plot_bad_out_is_refused_before_any_work(small, tmp_path, capsys, monkeypatch):
    out, _, _ = small

    def no_work(*a, **k):
        raise AssertionError("merged before the arguments were checked")

    import mcacct.jobs.merge as merging
    monkeypatch.setattr(merging, "merge", no_work)
    assert _main(["plot", str(out), "--out", str(tmp_path / "nodir" / "p.png")]) == 2
    _one_error(capsys, "--out", "nodir")
    assert _main(["plot", str(out), "--out", str(tmp_path / "p.notanimage")]) == 2
    _one_error(capsys, "--out", ".notanimage", "png")
    assert _main(["plot", str(out), "--out", str(tmp_path / "p.png"), "--points", "1"]) == 2
    _one_error(capsys, "--points must be", "[2, ", "got 1")
    assert _main(["plot", str(out), "--out", str(tmp_path / "p.png"), "--alpha", "1.5"]) == 2
    _one_error(capsys, "--alpha must be in (0, 1); got 1.5")
    assert not (tmp_path / "nodir").exists() and not list(tmp_path.glob("p.*"))


@pytest.mark.parametrize("flag", [["--sigma", "3"], ["--epsilon", "1"], ["--samples", "100"], ["--seed", "1"],
                                  ["--chunk-size", "64"], ["--dtype", "float32"], ["--scheme", "bminsep"],
                                  ["--iterations", "8"], ["--c-col", "1"], ["--cold-start"],
                                  ["--direction", "both"], ["--candidate", "0"], ["--out", "somewhere"]])
def test_sample_with_plan_refuses_the_flags_the_plan_fixes(tmp_path, capsys, flag):
    plan = tmp_path / "no-plan-needed"  # refused before the plan is read
    assert _main(["sample", "--plan", str(plan), "--shard", "0", "--num-shards", "1", *flag]) == 2
    _one_error(capsys, f"{flag[0]} does not apply with --plan (the plan fixes it)")
    assert not plan.exists() and not (tmp_path / "somewhere").exists()


def test_sample_with_plan_accepts_its_own_flags(tmp_path, capsys):
    argv = ["sample", "--plan", str(tmp_path / "nope"), "--shard", "0", "--num-shards", "1", "--max-chunks", "2",
            "--checkpoint-seconds", "5", "--json", "--quiet"]
    assert _main(argv) == 2
    assert "does not apply" not in _one_error(capsys, "plan")


def test_sample_refuses_another_split_or_config_in_the_same_out(small, tmp_path, capsys):
    out, _, _ = small
    d = tmp_path / "run"
    shutil.copytree(out, d)
    before = _listing(d)
    assert _main(_sample_argv(d, "--shard", "1", "--num-shards", "4")) == 2
    _one_error(capsys, "--num-shards", "3", "4")
    assert _listing(d) == before
    # a shard of another configuration next to the split's files is refused too (merge would fail on it)
    part = tmp_path / "part"
    part.mkdir()
    shutil.copy(out / jobs.shard_filename(0, 3), part)
    before = _listing(part)
    argv = _sample_argv(part, "--shard", "1", "--num-shards", "3")
    argv[argv.index("--sigma") + 1] = "1.2"
    assert _main(argv) == 2
    _one_error(capsys, "sigma differs")
    assert _listing(part) == before
    with pytest.raises(ValueError, match="sigma differs"):
        jobs.run_shard(_cfg(sigma=1.2), 1, 3, str(part))
    with pytest.raises(ValueError, match="split"):
        jobs.run_shard(_cfg(), 1, 4, str(d))


def test_sample_refuses_more_shards_than_chunks_and_bad_ranges(tmp_path, capsys):
    d = tmp_path / "few"
    argv = _sample_argv(d, "--shard", "0", "--num-shards", "3")
    argv[argv.index("--samples") + 1] = str(2 * CHUNK)  # 2 chunks
    assert _main(argv) == 2
    _one_error(capsys, "--num-shards must be in [1, chunks=2]; got 3")
    assert not d.exists()
    with pytest.raises(ValueError, match="num_shards"):
        jobs.run_shard(_cfg(n=2 * CHUNK), 0, 3, str(d))
    assert not d.exists()
    for extra, needles in ((["--shard", "2", "--num-shards", "2"], ("--shard must be", "[0, 1]", "got 2")),
                           (["--num-shards", "0"], ("--num-shards must be", "[1, ", "got 0")),
                           (["--max-chunks", "0"], ("--max-chunks must be", "[1, inf)", "got 0")),
                           (["--checkpoint-seconds", "-1"], ("--checkpoint-seconds must be", "[0, inf)", "got -1")),
                           (["--candidate", "-1"], ("--candidate must be", "[0, ", "got -1")),
                           (["--sigma", "-1"], ("--sigma must be", "(0, inf)", "got -1")),
                           (["--seed", "-1"], ("--seed must be", "[0, ", "got -1")),
                           (["--chunk-size", "0"], ("--chunk-size must be", "[1, ", "got 0"))):
        assert _main(_sample_argv(d, *extra)) == 2
        _one_error(capsys, *needles)
    f = tmp_path / "a-file"
    f.write_text("x")
    assert _main(_sample_argv(f)) == 2
    _one_error(capsys, "--out", "not a directory")
    assert not d.exists() and f.read_text() == "x"


def test_sample_refuses_a_plan_directory_and_foreign_shard_files(small, tmp_path, capsys):
    from mcacct.jobs import calibration as cj
    out, _, _ = small
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    (plan_dir / cj.PLAN_NAME).write_text("{}")
    assert _main(_sample_argv(plan_dir)) == 2
    _one_error(capsys, "calibration plan", "--plan")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / jobs.shard_filename(0, 3)).write_text(json.dumps({"format": cj.SHARD_FORMAT}))
    assert _main(_sample_argv(foreign, "--shard", "1", "--num-shards", "3")) == 2
    _one_error(capsys, "not an mcacct statistics file")
    assert sorted(p.name for p in foreign.iterdir()) == [jobs.shard_filename(0, 3)]


def test_candidate_and_seed_beyond_the_key_range_are_refused(tmp_path, capsys):
    assert _main(_sample_argv(tmp_path / "c", "--candidate", str(2**32))) == 2
    _one_error(capsys, "--candidate must be", str(2**32))
    with pytest.raises(ValueError, match="candidate"):
        _cfg(candidate=2**32)
    with pytest.raises(ValueError, match="seed"):
        _cfg(seed=2**63)
    assert not (tmp_path / "c").exists()
    from mcacct.cli.jobs import CANDIDATE_MAX
    assert CANDIDATE_MAX == jobs.CANDIDATE_MAX


def test_empty_paths_are_refused(small, tmp_path, capsys, monkeypatch):
    out, _, _ = small
    monkeypatch.chdir(tmp_path)  # an empty path would write here
    assert _main(_sample_argv("")) == 2
    _one_error(capsys, "--out must name a directory")
    assert _main(["merge", str(out), "--out", ""]) == 2
    _one_error(capsys, "--out must name a directory")
    assert _main(["plot", str(out), "--out", ""]) == 2
    _one_error(capsys, "--out")
    assert _main(["sample", "--plan", ""]) == 2
    _one_error(capsys, "--plan must name a directory")
    assert list(tmp_path.iterdir()) == []
