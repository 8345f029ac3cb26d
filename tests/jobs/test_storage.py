"""Job files through fsspec (#41): local paths and URLs, whole and atomic writes, resume after an interrupted upload,
merge and calibration on an object store (fsspec's in-process ``memory://``), and clear refusals."""

from __future__ import annotations

import importlib.util
import json
import os
import uuid

import fsspec
import jax
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import mcacct
from mcacct.cli.commands import main
from mcacct.cli.flags import check_out_dir, check_out_file
from mcacct.engine.problem import Problem
from mcacct.statistics.accumulators import DIRECTIONS
from mcacct.evr.calibrate import plan_calibration
from mcacct.jobs import calibration as cj
from mcacct.jobs import integrity, shards as jobs, storage

# the problem, sigma and chunk of tests/jobs/test_shards.py: the compiled programs are shared
PB = Problem(mcacct.BMinSep(0.2, 4, 32), mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5)))
SCHEME = ["--iterations", "32", "--min-sep", "4", "--sampling-prob", "0.2", "--c-col", "0.5,0.5,0.5,0.5"]
SIGMA, CHUNK = 0.9, 256
N_SMALL = 256 * 8 + 5  # 9 chunks per direction, the last one masked
HAS_GCSFS = importlib.util.find_spec("gcsfs") is not None


class InPlaceFileSystem(MemoryFileSystem):
    """A filesystem whose protocol is not one of storage.WHOLE_OBJECT_PROTOCOLS (as sftp:// or hdfs://)."""

    protocol = ("inplace",)

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(path.removeprefix("inplace://"))


fsspec.register_implementation("inplace", InPlaceFileSystem, clobber=True)


@pytest.fixture
def mem():
    """A fresh ``memory://`` directory, removed afterwards (fsspec's memory store is global to the process)."""
    root = f"memory://mcacct-test-{uuid.uuid4().hex}"
    yield root
    fs = fsspec.filesystem("memory")
    path = root[len("memory://"):]
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv(integrity.KEY_ENV, raising=False)


def _assert_same(a, b):
    assert a.count == b.count and a.sums == b.sums
    np.testing.assert_array_equal(a.hist, b.hist)


# -- the storage layer ----------------------------------------------------------------------------------------
def test_names_of_paths_and_urls(tmp_path):
    assert storage.is_url("gs://b/runs") and storage.is_url("memory://x") and storage.is_url("simplecache::s3://b")
    assert not storage.is_url("runs/s1") and not storage.is_url("/abs/x") and not storage.is_url("C:/x")
    assert not storage.is_url("file:///tmp/x")  # file:// is a local path
    assert storage.join("gs://b/runs/", "shard.json") == "gs://b/runs/shard.json"
    assert storage.join("runs", "shard.json") == os.path.join("runs", "shard.json")
    assert storage.basename("gs://b/runs/s1/") == "s1" and storage.basename("a/b.json") == "b.json"
    assert storage.absolute("gs://b/x") == "gs://b/x" and storage.absolute("x") == os.path.abspath("x")
    storage.write_json(f"file://{tmp_path}/f.json", {"a": 1})
    assert storage.read_json(str(tmp_path / "f.json"), "file") == {"a": 1}
    assert storage.identity(f"file://{tmp_path}/f.json") == storage.identity(str(tmp_path / "." / "f.json"))


def test_memory_round_trip_listing_and_read_errors(mem):
    d = mem + "/runs"
    assert not storage.exists(d) and storage.list_names(d, "*.json") == []
    for name in ("shard-00001-of-00002.json", "shard-00000-of-00002.json", ".hidden.json", "notes.txt"):
        storage.write_bytes(storage.join(d, name), b'{"k": [1, 2]}')
    assert storage.isdir(d) and not storage.isfile(d) and storage.isfile(storage.join(d, "notes.txt"))
    assert storage.list_names(d, "shard-*-of-*.json") == ["shard-00000-of-00002.json", "shard-00001-of-00002.json"]
    assert storage.read_json(storage.join(d, "notes.txt"), "notes") == {"k": [1, 2]}
    assert storage.read_bytes(storage.join(d, "notes.txt"), 4) == b'{"k"'
    with pytest.raises(ValueError, match=r"shard file 'memory://.*/nope.json' cannot be read: No such file"):
        storage.read_json(storage.join(d, "nope.json"), "shard file")
    storage.write_bytes(storage.join(d, "bad.json"), b'{"a": ')
    with pytest.raises(ValueError, match="is not valid JSON"):
        storage.read_json(storage.join(d, "bad.json"), "shard file")
    storage.write_bytes(storage.join(d, "bin.json"), b"\xff\xfe")
    with pytest.raises(ValueError, match="not valid JSON/UTF-8"):
        storage.read_json(storage.join(d, "bin.json"), "shard file")


def test_an_object_store_write_is_one_whole_upload(mem, monkeypatch):
    """Each write is a single pipe of the complete bytes (no temporary object, no partial write); an upload that
    fails leaves the previous object as it was."""
    path = mem + "/runs/shard-00000-of-00001.json"
    storage.write_json(path, {"state": 1})
    calls = []
    real = MemoryFileSystem.pipe_file

    def spy(self, p, value, **kw):
        calls.append((p, bytes(value)))
        return real(self, p, value, **kw)

    monkeypatch.setattr(MemoryFileSystem, "pipe_file", spy)
    storage.write_json(path, {"state": 2, "big": list(range(1000))})
    assert len(calls) == 1 and json.loads(calls[0][1]) == {"state": 2, "big": list(range(1000))}
    assert fsspec.filesystem("memory").ls(mem[len("memory://"):] + "/runs", detail=False) == [calls[0][0]]

    def dies(self, p, value, **kw):
        raise KeyboardInterrupt  # killed before the upload completed

    monkeypatch.setattr(MemoryFileSystem, "pipe_file", dies)
    with pytest.raises(KeyboardInterrupt):
        storage.write_json(path, {"state": 3})
    assert storage.read_json(path, "f")["state"] == 2


def test_a_local_write_is_fsynced_and_renamed(tmp_path, monkeypatch):
    seen = []
    real_replace, real_fsync = os.replace, os.fsync
    monkeypatch.setattr(os, "replace", lambda a, b: (seen.append(("replace", os.path.basename(b))),
                                                     real_replace(a, b)))
    monkeypatch.setattr(os, "fsync", lambda fd: (seen.append(("fsync",)), real_fsync(fd)))
    storage.write_json(str(tmp_path / "new" / "f.json"), {"a": 1})
    assert seen == [("fsync",), ("replace", "f.json"), ("fsync",)]  # file, rename, directory
    assert os.listdir(tmp_path / "new") == ["f.json"]


def test_urls_that_cannot_be_used_are_refused_naming_why(mem):
    with pytest.raises(ValueError, match="fsspec knows no protocol 'nosuchfs'"):
        storage.exists("nosuchfs://b/x")
    inplace = mem.replace("memory://", "inplace://")  # the same store, through another protocol
    fsspec.filesystem("inplace").pipe_file(inplace + "/f.json", b"{}")
    assert storage.read_json(inplace + "/f.json", "f") == {}  # a filesystem that is read fine ...
    with pytest.raises(ValueError, match=r"cannot write job files atomically to inplace://"):
        storage.write_json(inplace + "/f.json", {})  # ... but not written by the jobs
    with pytest.raises(ValueError, match="cannot write job files atomically"):
        jobs.write_merged(None, inplace + "/merged")
    storage.check_url(mem, write=True)
    storage.check_url("runs/local", write=True)


@pytest.mark.skipif(HAS_GCSFS, reason="gcsfs is installed here")
def test_a_missing_store_package_is_named():
    with pytest.raises(ValueError, match=r"gs:// URLs need the package gcsfs, which is not installed \(pip install "
                                         r"gcsfs\)"):
        storage.check_url("gs://bucket/runs")


def test_cli_path_checks_take_urls_only_where_asked(mem):
    with pytest.raises(ValueError, match=r"--out must be a local directory path; got the URL 'memory://"):
        check_out_dir("--out", mem + "/d")
    with pytest.raises(ValueError, match=r"--plot must be a local file path; got the URL"):
        check_out_file("--plot", mem + "/f.png", (".png",))
    check_out_dir("--out", mem + "/d", urls=True)
    storage.write_bytes(mem + "/f.json", b"{}")
    with pytest.raises(ValueError, match="--out must be a directory; .* is an existing file"):
        check_out_dir("--out", mem + "/f.json", urls=True)
    with pytest.raises(ValueError, match="--out: .* exists already"):
        check_out_file("--out", mem + "/f.json", exist_ok=False, urls=True)
    with pytest.raises(ValueError, match="--out must end in one of .png"):
        check_out_file("--out", mem + "/g.json", (".png",), urls=True)
    with pytest.raises(ValueError, match="--out: .*cannot write job files atomically"):
        check_out_dir("--out", "inplace://d", urls=True)
    if not HAS_GCSFS:
        with pytest.raises(ValueError, match="--out: gs://b/x: gs:// URLs need the package gcsfs"):
            check_out_dir("--out", "gs://b/x", urls=True)


# -- shard jobs on an object store ------------------------------------------------------------------------------
def test_shards_resume_after_an_interrupted_upload_and_merge_exactly(mem, monkeypatch):
    cfg = jobs.JobConfig(PB, SIGMA, (0.5, 1.0), N_SMALL, CHUNK)
    out = mem + "/runs/s1"
    assert not jobs.run_shard(cfg, 0, 2, out, max_chunks=2)["complete"]  # chunks [0, 2) of [0, 4)
    path = storage.join(out, jobs.shard_filename(0, 2))
    uploads = []
    real = MemoryFileSystem.pipe_file

    def killed_at_second_upload(self, p, value, **kw):
        uploads.append(p)
        if len(uploads) == 2:  # the checkpoint after chunk 2: the pod dies while it uploads
            raise KeyboardInterrupt
        return real(self, p, value, **kw)

    monkeypatch.setattr(MemoryFileSystem, "pipe_file", killed_at_second_upload)
    with pytest.raises(KeyboardInterrupt):
        jobs.run_shard(cfg, 0, 2, out)
    monkeypatch.setattr(MemoryFileSystem, "pipe_file", real)
    left = jobs.load_stats_file(path)  # the last complete checkpoint, digest checked
    assert left.done == {d: [(0, 2)] for d in DIRECTIONS} and left.stats["add"].count == 2 * CHUNK
    resumed = jobs.run_shard(cfg, 0, 2, out)
    assert resumed["complete"] and resumed["samples_resumed"] == 2 * 2 * CHUNK
    assert resumed["path"] == path
    jobs.run_shard(cfg, 1, 2, out)
    res = jobs.merge([out, path])  # the directory and one of its files: counted once
    assert res.complete and len(res.files) == 2
    ref = mcacct.estimate(PB, SIGMA, cfg.root_key(), N_SMALL, cfg.epsilons, chunk_size=CHUNK).stats
    for d in DIRECTIONS:
        _assert_same(res.stats[d], ref[d])
    merged = jobs.write_merged(res, mem + "/merged")
    assert merged == mem + "/merged/merged.json"
    again = jobs.merge([mem + "/merged"])
    assert again.files[0].kind == "merged" and [s["path"] for s in again.files[0].sources] == [
        storage.join(out, jobs.shard_filename(i, 2)) for i in range(2)]
    for d in DIRECTIONS:
        _assert_same(again.stats[d], ref[d])
    # the refusals read through fsspec too: another split, a file where the directory should be, an edited file
    with pytest.raises(ValueError, match="split into 2"):
        jobs.run_shard(cfg, 0, 3, out)
    with pytest.raises(ValueError, match="is not a directory"):
        jobs.run_shard(cfg, 0, 2, path)
    obj = json.loads(storage.read_bytes(path))
    obj["directions"]["add"]["count"] += 1
    storage.write_json(path, obj)
    with pytest.raises(ValueError, match="digest does not match"):
        jobs.merge([out])


def test_cli_sample_and_merge_write_to_urls(mem, capsys):
    out = mem + "/cli"
    base = ["sample", "--out", out, "--sigma", str(SIGMA), "--epsilon", "0.5", "--samples", str(2 * CHUNK),
            "--chunk-size", str(CHUNK), *SCHEME, "--json", "--quiet"]
    assert main(base) == 0
    assert json.loads(capsys.readouterr().out)["path"] == storage.join(out, jobs.shard_filename(0, 1))
    assert main(["merge", out, "--out", mem + "/m", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["complete"] and rep["merged_path"] == mem + "/m/merged.json" and rep["num_samples"] == 2 * CHUNK
    assert main(["sample", "--out", "inplace://x", *base[3:]]) == 2
    assert "cannot write job files atomically to inplace://" in capsys.readouterr().err
    if not HAS_GCSFS:
        assert main(["sample", "--out", "gs://bucket/runs", *base[3:]]) == 2
        assert "gs:// URLs need the package gcsfs" in capsys.readouterr().err


def test_calibration_plan_and_shards_on_a_url_equal_a_local_run(mem, tmp_path):
    plan = plan_calibration(PB, 1.0, 0.2, jax.random.key(0), num_samples=512, chunk_size=256,
                            sigmas=[0.8, 2.0, 3.0])
    results = []
    for d in (mem + "/cal", str(tmp_path / "cal")):
        assert cj.write_plan(d, plan, PB) == storage.join(d, cj.PLAN_NAME)
        cj.write_plan(d, plan, PB)  # the same plan again: accepted
        cj.run_plan_shard(d, 1, 2)
        with pytest.raises(ValueError, match="split into 2"):
            cj.run_plan_shard(d, 0, 1)
        cj.run_plan_shard(d, 0, 2)
        results.append(cj.calibrate_from(d))
    remote, local = results
    assert remote.sigma == local.sigma == 2.0
    assert remote.candidates == local.candidates
