r"""The accelerator measurements of mcacct in one script, and lowering checks that need no device.

**Lowering checks** (``--lower-only``; no device, CI runs them through the test suite). Each check exports a
program with ``jax.export.export(jax.jit(fn), platforms=[platform])`` at small shapes, so every primitive must
have a lowering for that platform and, for the fused kernel, Pallas must produce a Triton kernel. The engine
picks its kernel forms at trace time from :func:`mcacct.core.platform.target_platform` (the environment variable
``MCACCT_TARGET_PLATFORM``), which JAX's jit caches do not see, so each platform is lowered in a fresh process:
without ``--platform`` this script runs itself once per platform (cuda, then tpu; at the same time, results
printed in that order) with ``MCACCT_TARGET_PLATFORM`` set and ``JAX_PLATFORMS=cpu``, and combines the
results. Checks:

* cuda: the compiled Pallas fused kernel (``fused_pallas_losses(..., interpret=False)``); the engine's chunk
  program of the shared-draw ladder (``ladder_chunk_statistics``) for ``BMinSep`` with ``loss_kernel="fused"``
  (it must contain the Triton kernel) and ``"unfused"``, and for ``TruncatedBMinSep`` (a small case, and one where
  a CPU would screen the counts (``schemes/truncated/screen.py``), which accelerators draw by every sample's chain:
  ``AUTO_SCREEN``); the single-direction chunk program (``chunk_losses``) for ``BMinSep`` and both
  ``TruncatedBMinSep``;
* tpu: the XLA forms only (unfused ladders and ``chunk_losses``). Where JAX cannot export even a trivial
  program for a platform from this host, that platform's checks are reported ``skipped`` with the reason.

One line per check (platform, name, ok/FAIL/skipped, seconds, first line of the error); exit status 1 if a
check fails. Nothing is written unless ``--out FILE`` (JSON) is given.

**Device parts** (``--part``; each designed to finish within 8 minutes on an H100: every configuration is timed
for a fixed number of seconds, and a part stops starting new configurations when its time budget is spent).
Results go to ``benchmarks/results/accelerator_<device>.json`` (device: a slug of ``device_kind``, e.g.
``nvidia_h100_80gb_hbm3``; ``cpu`` on CPU) with a bar chart of the throughput table next to it
(``accelerator_<device>.png``). The file is resumable: a run loads it, adds or replaces only the part that ran,
and writes it atomically after every configuration; a configuration already measured is kept (``--redo``
measures the part again; so does a change of the mcacct sources, ``mcacct_source``), one that was skipped for
time is tried again, and one whose run was killed (e.g. by a
command time limit during a compilation) is recorded as such and not retried unless ``--retry-errors`` (e.g.
``--part throughput --configs n7200_b256 --retry-errors`` gives the fused kernel at b = 256 a part's whole
budget).

* ``throughput``: samples/s of one direction at one sigma (``chunk_losses``; unfused kernel, float64 and
  float32) and draws/s of a 4-sigma ladder over both directions on shared draws (the engine's chunk program
  ``ladder_chunk_statistics`` with calibrate's verification histogram; evaluations/s = draws/s x 8) for the
  unfused kernel (float64, float32) and the fused kernel (float64 only; where the fused kernel refuses a
  configuration the reason is recorded), at (n=1024, b=8), (n=7200, b=256) and (n=1024, b=1) with
  ``c = ones(b)/sqrt(b)`` and ``p`` from an expected batch size. Compilation and the first call are timed
  separately. Bytes per sample: XLA's ``cost_analysis()`` of the compiled program ("bytes accessed" / samples)
  for XLA programs; for the Pallas fused kernel the loads and stores its BlockSpecs imply, counted, not measured.
  The fused entry also holds ``agreement`` (:func:`fused_agreement`): the compiled kernel's losses against the
  unfused kernel's on the same draws, with the loss-error bound they must stay within.
* ``production``: the section 7.4 case of Dong & Ganesh 2026 (truncated 256-min-sep, n = 7200; the functions
  and constants of ``benchmarks/production.py``): draws/s of the 4-sigma ladder (the engine's chunk program, the
  one calibrate runs, and production.py's form), one direction at sigma 0.47, jax-privacy's NumPy reference,
  for c = ones(256)/16 and, if time allows, the MSE-optimised c; and the one-device wall time of the
  7.5e9-sample verification, SAMPLES_7_4 / ladder draws/s, in hours.
* ``roofline``: samples/s of only "RNG + sliding sums + one exp per element" at n = 7200, b = 256 (float64 normals
  of ``standard_normal``, ``sliding_dot_t``, one ``jnp.exp``, the engine's block structure), and the fraction of
  it that each kernel of the throughput part reaches there (run ``throughput`` first).
* ``plan``: ``python -m mcacct calibrate ... --plan-only --json`` at section 7.4, exactly as production.py's
  ``_plan_only`` runs it (its own probe and projection): its ``expected_seconds_at_most``, next to the production
  part's estimate; then the job as a user runs it (production.py's ``_shard_vs_plan``, c = ones): the plan
  written with ``--out``, ``mcacct sample --plan`` shard jobs of 32 and 128 chunks (after a warm-up), the
  larger one's steady draws/s (its groups after the first, as the probe reads its run) and the projection's ratio
  to it (issue #39: within 5%).
* ``fused_bound``: issue #39's shortcut 4, the remove bound ``U`` of the draws the skip lets go, fused
  (``mcacct.kernels.fused_bound``: the noise drawn and folded block by block in one Pallas Triton kernel, never
  written to memory) against the XLA path it would replace (the noise materialised, then
  ``remove_loss_bound_from_draws_t``) and the normals alone, at the §7.4 shape with c = ones(256)/16 and the
  production ladder, chunk 65,536. First the numbers: both bounds on one chunk (largest difference, draws each
  lets go at epsilon 10), then draws/s of each, the fused kernel at several (block, tile, warps); the hours for
  7.5e9 draws of each.
* ``all``: the parts missing from (or incomplete in) the file, in the order above (longer than one 10-minute
  command: prefer one part per command).

On a device, one command per part (each well under 10 minutes), in this order::

    python benchmarks/accelerator.py --lower-only            # no device needed; seconds
    python benchmarks/accelerator.py --part throughput
    python benchmarks/accelerator.py --part production
    python benchmarks/accelerator.py --part roofline
    python benchmarks/accelerator.py --part plan
    python benchmarks/accelerator.py --part fused_bound

``--quick`` shrinks shapes and budgets so that the device parts can be smoke-tested on CPU (compilation
dominates: about 20 s per throughput configuration, a minute for production or plan on a 2-core box); it writes
``accelerator_<device>_quick.json`` into ``--out-dir`` (default benchmarks/results). ``--configs`` picks
throughput configurations. A part stops starting configurations after ``--part-seconds`` (default 420) and a
watchdog ends one still running ``--grace-seconds`` (default 60) later, recording it as timed out (exit status 3).
Work runs in float64 scope (``mcacct.core.precision.x64_scope``). ``XLA_PYTHON_CLIENT_PREALLOCATE`` defaults to
``false`` here, so that the plan part's calibrate subprocess finds device memory. The script installs nothing
(jax, numpy, matplotlib; jax-privacy for the production part's reference).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform as host_platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PLATFORM_ENV = "MCACCT_TARGET_PLATFORM"          # mcacct.core.platform.PLATFORM_ENV (not imported before it is set)
TRITON_CALL = "__gpu$xla.gpu.triton"
LOWER_PLATFORMS = ("cuda", "tpu")
TARGET_OF = {"cuda": "gpu", "tpu": "tpu"}
PARTS = ("throughput", "production", "roofline", "plan", "fused_bound")
RESULT_TAG = "@@accelerator-lower-result "

# throughput configurations: name -> (iterations, min_sep, (expected batch, dataset size), chunk size)
CONFIGS = {
    "n1024_b8": (1024, 8, (1, 256), 65536),
    "n7200_b256": (7200, 256, (1793, 14_745_600), 16384),
    "n1024_b1": (1024, 1, (1, 256), 65536),
}
QUICK_CONFIGS = {
    "n64_b8": (64, 8, (1, 32), 256),
    "n32_b1": (32, 1, (1, 32), 256),
}
LADDER = (0.8, 1.0, 1.25, 1.6)      # throughput's 4-sigma ladder
# production's count_chain: unrolls of the law of r's lookup rounds (default: the platform's COUNT_CHAIN_UNROLL only;
# --count-unrolls 1,8,32 compares them, about 30 s of compilation each)
SIGMA = 1.0                         # throughput's single sigma
RECURSION_SWEEP = ("linear", "stepwise", "blocked")  # throughput: the ladder per recursion (f64, b > 1)
EPSILONS = (1.0,)
# roofline shape: n, b and chunk (quick: tiny)
ROOF = (7200, 256, 16384)
ROOF_QUICK = (64, 8, 256)
# production in --quick: a small truncated case (module constants of production.py patched in this process), with a
# ladder whose candidates all pass there (shard jobs drop failed ones: the plan part's shard_vs_plan needs them all)
PROD_QUICK = {"M": 4096, "BATCH": 64, "B": 8, "N": 64, "BMAX": 72, "LADDER": (2.0, 2.2, 2.5, 2.8)}


# ------------------------------------------------------------------------------------------------ helpers


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(err).__name__}: {line}"[:400]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "unknown"


def _atomic_write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, default=float)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _is_oom(err: BaseException) -> bool:
    text = str(err).lower()
    return "resource_exhausted" in text or "out of memory" in text or "oom" in text.split()


def _cost_bytes(compiled) -> float | None:
    """"bytes accessed" of XLA's cost analysis of a compiled program (None where the backend gives none)."""
    try:
        ca = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - a backend without cost analysis
        return None
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    if not ca:
        return None
    val = ca.get("bytes accessed")
    return None if val is None else float(val)


# ---------------------------------------------------------------------------------------- lowering checks


def _lower_checks(plat: str) -> list[tuple[str, object]]:
    """``(name, thunk)`` pairs; each thunk exports one program for ``plat`` and returns a detail string (or
    raises). Imports happen here, after ``MCACCT_TARGET_PLATFORM`` is set."""
    import jax
    import jax.numpy as jnp
    from jax import export

    from mcacct.core.platform import gpu_lowering_target
    from mcacct.engine.problem import Problem, chunk_losses
    from mcacct.engine.runner import ladder_chunk_statistics
    from mcacct.evr.calibrate import verification_spec
    from mcacct.kernels.fused import fused_pallas_losses
    from mcacct.schemes.bminsep import BMinSep
    from mcacct.strategies.banded import BandedToeplitz
    from mcacct.schemes.truncated import TruncatedBMinSep

    disabled = [export.DisabledSafetyCheck.custom_call(TRITON_CALL)] if plat == "cuda" else []
    chunk = 128
    spec = verification_spec()
    c3 = (0.6, 0.5, 0.4)
    bminsep = BMinSep(0.05, 8, 64, True)
    trunc = TruncatedBMinSep(0.2, 2, 16, 12, 3, True)      # p, b, n, M, B_max, warm start: every sample's chain
    screened = TruncatedBMinSep(0.02, 2, 10, 1000, 31, True)  # where CPUs screen the counts (schemes/truncated/screen.py)
    problems = {
        "bminsep_fused": Problem(bminsep, BandedToeplitz(c3), loss_kernel="fused"),
        "bminsep_unfused": Problem(bminsep, BandedToeplitz(c3), loss_kernel="unfused"),
        "truncated_unfused": Problem(trunc, BandedToeplitz((1.0, 0.5)), loss_kernel="unfused"),
        "screened_unfused": Problem(screened, BandedToeplitz((1.0, 0.5)), loss_kernel="unfused"),
    }

    def do_export(fn, *args):
        # JAX 0.11's Triton lowering needs a target card where the host has no GPU; the arguments are made outside
        with gpu_lowering_target() if plat == "cuda" else contextlib.nullcontext():
            exp = export.export(jax.jit(fn), platforms=[plat], disabled_checks=disabled)(*args)
        if tuple(exp.platforms) != (plat,):
            raise AssertionError(f"exported for {exp.platforms}, not {plat}")
        return exp

    def triton_count(exp) -> int:
        return exp.mlir_module().count(TRITON_CALL)

    def pallas_kernel():
        n, b, p, c, width, tile, nj = 64, 8, 0.05, c3, 128, 64, 3
        nblk = -(-n // b)
        fn = lambda key, tau, sig: fused_pallas_losses(key, tau, sig, width, tile, n, b, p, True, c,  # noqa: E731
                                                       interpret=False)
        exp = do_export(fn, jax.ShapeDtypeStruct((2,), jnp.uint32), jax.ShapeDtypeStruct((nblk, width), jnp.int32),
                        jax.ShapeDtypeStruct((nj,), jnp.float64))
        k = triton_count(exp)
        if k < 1:
            raise AssertionError("no Pallas Triton kernel in the exported module")
        return f"{k} Triton kernel(s)"

    def ladder(name: str, want_triton: bool | None):
        problem = problems[name]

        def thunk():
            fn = lambda key, sig, shifts, valid, eps: ladder_chunk_statistics(  # noqa: E731
                key, sig, shifts, valid, eps, problem, chunk, spec)
            exp = do_export(fn, jax.random.key(0), jnp.asarray(LADDER), jnp.zeros(len(LADDER)),
                            jnp.asarray(chunk, jnp.int32), jnp.asarray(EPSILONS))
            k = triton_count(exp)
            if want_triton and k < 1:
                raise AssertionError("the fused ladder has no Pallas Triton kernel (traced for the CPU form?)")
            if want_triton is False and k:
                raise AssertionError(f"the unfused ladder contains {k} Triton kernel(s)")
            return f"{k} Triton kernel(s)" if k else ""
        return thunk

    def single(name: str):
        problem = problems[name]

        def thunk():
            fn = lambda key, sigma: chunk_losses(key, sigma, problem, chunk, "remove")  # noqa: E731
            do_export(fn, jax.random.key(0), jnp.asarray(1.0))
            return ""
        return thunk

    checks = []
    if plat == "cuda":
        checks += [("pallas_fused_kernel", pallas_kernel),
                   ("ladder_chunk_bminsep_fused", ladder("bminsep_fused", True))]
    checks += [("ladder_chunk_bminsep_unfused", ladder("bminsep_unfused", False)),
               ("ladder_chunk_truncated_unfused", ladder("truncated_unfused", False)),
               ("ladder_chunk_truncated_screened", ladder("screened_unfused", False)),
               ("chunk_losses_bminsep", single("bminsep_unfused")),
               ("chunk_losses_truncated", single("truncated_unfused")),
               ("chunk_losses_truncated_screened", single("screened_unfused"))]
    return checks


def _lower_one_platform(plat: str) -> dict:
    """Run the checks of one platform in this process (``MCACCT_TARGET_PLATFORM`` set before any trace)."""
    want = TARGET_OF[plat]
    if os.environ.get(PLATFORM_ENV) not in (None, "", want, plat):
        print(f"note: {PLATFORM_ENV}={os.environ[PLATFORM_ENV]} replaced by {want}", file=sys.stderr)
    os.environ[PLATFORM_ENV] = want
    t_start = time.perf_counter()
    import jax
    import jax.numpy as jnp
    from jax import export

    from mcacct.core.platform import target_platform
    from mcacct.core.precision import x64_scope

    if target_platform() != want:
        raise RuntimeError(f"mcacct traces for {target_platform()!r}, wanted {want!r}")
    results = []
    with x64_scope():
        # can this host export anything for the platform? (a JAX limitation here is not an mcacct failure)
        try:
            export.export(jax.jit(lambda x: jnp.sin(x) * 2.0), platforms=[plat])(jnp.ones(4))
            blocked = ""
        except Exception as e:  # noqa: BLE001
            blocked = f"JAX cannot export for {plat} from this host: {_first_line(e)}"
        for name, thunk in _lower_checks(plat):
            if blocked:
                results.append({"name": name, "status": "skipped", "seconds": 0.0, "error": blocked})
                continue
            t0 = time.perf_counter()
            try:
                detail = thunk()
                results.append({"name": name, "status": "ok", "seconds": time.perf_counter() - t0,
                                "detail": detail or ""})
            except Exception as e:  # noqa: BLE001
                results.append({"name": name, "status": "FAIL", "seconds": time.perf_counter() - t0,
                                "error": _first_line(e), "traceback": traceback.format_exc()[-3000:]})
            jax.clear_caches()
    return {"platform": plat, "target_platform": want, "jax": jax.__version__, "checks": results,
            "seconds": time.perf_counter() - t_start}


def _format_check(plat: str, c: dict) -> str:
    tail = c.get("error") or c.get("detail") or ""
    return f"{plat:5s} {c['name']:32s} {c['status']:7s} {c['seconds']:7.2f}s  {tail}".rstrip()


def _lower_only(args) -> int:
    t0 = time.perf_counter()
    if args.platform:
        res = _lower_one_platform(args.platform)
        if args.emit_json:
            print(RESULT_TAG + json.dumps(res), flush=True)
        per_platform = {args.platform: res}
    else:
        procs = {}
        for plat in LOWER_PLATFORMS:        # one fresh process per platform (jit caches do not see the variable)
            env = dict(os.environ, **{PLATFORM_ENV: TARGET_OF[plat], "JAX_PLATFORMS": "cpu"})
            cmd = [sys.executable, os.path.abspath(__file__), "--lower-only", "--platform", plat, "--emit-json"]
            procs[plat] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        per_platform = {}
        for plat in LOWER_PLATFORMS:
            out, err = procs[plat].communicate()
            line = next((ln for ln in reversed(out.splitlines()) if ln.startswith(RESULT_TAG)), None)
            if procs[plat].returncode == 0 and line is not None:
                per_platform[plat] = json.loads(line[len(RESULT_TAG):])
            else:
                msg = (err.strip().splitlines() or ["(no output)"])[-1]
                per_platform[plat] = {"platform": plat, "checks": [{
                    "name": "subprocess", "status": "FAIL", "seconds": 0.0,
                    "error": f"exit {procs[plat].returncode}: {msg}"[:400], "stderr": err[-3000:]}]}
    failed = 0
    for plat, res in per_platform.items():
        for c in res["checks"]:
            print(_format_check(plat, c), flush=True)
            failed += c["status"] == "FAIL"
    total = time.perf_counter() - t0
    print(f"lowering checks: {failed} failed, {total:.1f}s", flush=True)
    if args.out and not args.emit_json:
        _atomic_write_json(args.out, {"kind": "lowering checks", "finished_at": _now(), "seconds": total,
                                      "ok": failed == 0, "platforms": per_platform})
    return 1 if failed else 0


# ------------------------------------------------------------------------------------------- device parts


class Results:
    """The per-device JSON: ``parts[name]`` holds each part; entries are saved as soon as they are measured."""

    def __init__(self, path: str, meta: dict, redo: bool, retry_errors: bool = False):
        self.path = path
        self.retry_errors = retry_errors
        self.lock = threading.RLock()
        self.data = {}
        if os.path.exists(path):
            with open(path) as fh:
                self.data = json.load(fh)
        self.data.update(meta)
        self.data.setdefault("parts", {})
        self.redo = redo

    def part(self, name: str, settings: dict) -> dict:
        """The part's entry: resumed if it was measured with the same mcacct sources, else started afresh."""
        old = self.data["parts"].get(name)
        source = self.data.get("mcacct_source")
        if self.redo or not isinstance(old, dict) or old.get("mcacct_source") != source:
            old = {}
        old.update({"settings": settings, "mcacct_source": source, "complete": False, "started_at": _now()})
        self.data["parts"][name] = old
        return old

    def save(self) -> None:
        with self.lock:
            self.data["updated_at"] = _now()
            _atomic_write_json(self.path, self.data)


class Budget:
    """A part's time: no new configuration starts after ``seconds``; at ``seconds + grace`` a watchdog records
    the configuration still running (e.g. a compilation that does not end) as timed out, saves, and ends the
    process (exit status 3), so that a part never runs into the device command's time limit."""

    def __init__(self, seconds: float, grace: float):
        self.t0 = time.monotonic()
        self.seconds = seconds
        self.grace = grace

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.t0)

    def hard_left(self) -> float:
        return self.left() + self.grace


def _entry(res: Results, node: dict, key: str, budget: Budget, need_s: float, fn, label: str = ""):
    """Run ``fn()`` into ``node[key]`` unless done already (a measurement or a refusal is kept until ``--redo``, an
    error until ``--retry-errors``); skip it when the part's budget is short (a later run tries it again); save
    after it."""
    old = node.get(key)
    if res.retry_errors and isinstance(old, dict) and "error" in old:
        old = None
    elif isinstance(old, dict) and old.get("status") == "running":
        node[key] = {"error": f"did not finish in an earlier run started {old.get('since')} (killed, e.g. by a "
                              "command time limit during compilation, or crashed); --redo retries it"}
        res.save()
        return node[key]
    if old is not None and not (isinstance(old, dict) and "skipped" in old):
        return old
    if budget.left() < need_s:
        node[key] = {"skipped": f"the part's time budget was spent ({budget.seconds:.0f}s); run the part again"}
        res.save()
        return node[key]
    print(f"  {label or key} ...", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    node[key] = {"status": "running", "since": _now()}
    res.save()

    def fire():
        with res.lock:
            node[key] = {"error": f"timed out: still running after {time.monotonic() - t0:.0f}s, at the part's hard "
                                  f"limit ({budget.seconds + budget.grace:.0f}s); ended by the script's watchdog"}
            res.save()
        print(f"watchdog: {label or key} timed out; results saved in {res.path}", file=sys.stderr, flush=True)
        os._exit(3)

    timer = threading.Timer(max(budget.hard_left(), 1.0), fire)
    timer.daemon = True
    timer.start()
    try:
        value = fn()
    except Exception as e:  # noqa: BLE001 - recorded, the part goes on
        value = {"error": _first_line(e), "traceback": traceback.format_exc()[-3000:]}
    finally:
        timer.cancel()
    with res.lock:
        node[key] = value
    gc.collect()
    res.save()
    return node[key]


def _keys(n: int):
    import jax
    return [jax.random.key(1000 + i) for i in range(n)]


def _timed(make, per_call: int, seconds: float, unit: str) -> dict:
    """Compile ``make()``'s jitted function of a key ahead of time, call it once, then for ``seconds``.

    Returns per-second rate (``unit`` per second), compile and first-call seconds and XLA's bytes accessed."""
    import jax
    fn = make()
    keys = _keys(8)
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(keys[0]).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(keys[0]))
    first_s = time.perf_counter() - t0
    calls, t0 = 0, time.perf_counter()
    while True:
        jax.block_until_ready(compiled(keys[calls % len(keys)]))
        calls += 1
        if time.perf_counter() - t0 >= seconds:
            break
    elapsed = time.perf_counter() - t0
    out = {f"{unit}_per_s": calls * per_call / elapsed, "compile_s": compile_s, "first_call_s": first_s,
           "timed_calls": calls, "timed_s": elapsed, "per_call": per_call}
    bytes_acc = _cost_bytes(compiled)
    if bytes_acc is not None:
        out["xla_bytes_accessed_per_call"] = bytes_acc
        out[f"xla_bytes_per_{unit[:-1]}"] = bytes_acc / per_call
    return out


def _with_oom_retry(run, chunk: int, min_chunk: int = 256) -> dict:
    """``run(chunk)``; on an out-of-memory error again with half the chunk (at most three times)."""
    tries = []
    while True:
        try:
            out = run(chunk)
            out["chunk_size"] = chunk
            if tries:
                out["oom_retries"] = tries
            return out
        except Exception as e:  # noqa: BLE001
            if not _is_oom(e) or chunk // 2 < min_chunk or len(tries) >= 3:
                raise
            tries.append({"chunk_size": chunk, "error": _first_line(e)})
            chunk //= 2
            gc.collect()


def _label_recursion(label: str) -> str:
    """The recursion a throughput label names: ``unfused_f64_<name>`` (:data:`RECURSION_SWEEP`), else ``auto``."""
    parts = label.split("_")
    return parts[2] if len(parts) > 2 else "auto"


def _bminsep_problem(n: int, b: int, batch: tuple[int, int], dtype: str, loss_kernel: str, recursion: str = "auto"):
    import numpy as np

    from mcacct.engine.problem import Problem
    from mcacct.core.rates import sampling_prob_from_batch_size
    from mcacct.schemes.bminsep import BMinSep
    from mcacct.strategies.banded import BandedToeplitz
    p = sampling_prob_from_batch_size(batch[0], batch[1], b)
    c = tuple(float(v) for v in np.ones(b) / np.sqrt(b))
    return Problem(BMinSep(p, b, n, True), BandedToeplitz(c), dtype=dtype, loss_kernel=loss_kernel,
                   recursion=recursion), p


def _single_fn(problem, chunk: int, sigma: float):
    from mcacct.engine.problem import chunk_losses
    return lambda key: chunk_losses(key, sigma, problem, chunk, "remove")


def _ladder_fn(problem, chunk: int, sigmas, epsilons=EPSILONS, skips: bool = False):
    """The engine's chunk program of the shared-draw ladder, as calibrate's verification runs it; with ``skips``,
    with the provably zero contributions at ``epsilons`` skipped as the runner does (``skip_bound``,
    ``remove_skip_arrays``; on accelerators the blocks that need the exact recursions are gathered)."""
    import jax.numpy as jnp

    from mcacct.engine.runner import ladder_chunk_statistics
    from mcacct.engine.skips import remove_skip_arrays, skip_bound
    from mcacct.evr.calibrate import verification_spec
    from mcacct.kernels.shortcuts import RemoveSkip
    spec = verification_spec()
    add_bound = skip_bound(problem, list(sigmas), list(epsilons)) if skips else None
    arrays = remove_skip_arrays(problem, list(sigmas), list(epsilons)) if skips else None
    if skips and (add_bound is None or arrays is None):
        raise AssertionError(f"the skips do not apply at epsilons {list(epsilons)}")
    rskip = None if arrays is None else RemoveSkip(*jnp.asarray(arrays, jnp.float64).T)

    def fn(key):
        sig = jnp.asarray(sigmas, jnp.float64)
        return ladder_chunk_statistics(key, sig, jnp.zeros_like(sig), jnp.asarray(chunk, jnp.int32),
                                       jnp.asarray(epsilons, jnp.float64), problem, chunk, spec, add_bound, rskip)
    return fn


def _measure_single(problem, chunk: int, seconds: float, sigma: float = SIGMA) -> dict:
    out = _with_oom_retry(lambda ch: _timed(lambda: _single_fn(problem, ch, sigma), ch, seconds, "samples"),
                          chunk)
    out["note"] = "chunk_losses: one sigma, direction remove; bytes: XLA cost_analysis of the compiled program"
    return out


def _measure_ladder(problem, chunk: int, seconds: float, sigmas=LADDER, epsilons=EPSILONS,
                    skips: bool = False) -> dict:
    out = _with_oom_retry(lambda ch: _timed(lambda: _ladder_fn(problem, ch, sigmas, epsilons, skips), ch, seconds,
                                            "draws"), chunk)
    out["evaluations_per_s"] = out["draws_per_s"] * 2 * len(sigmas)
    out["sigmas"] = list(sigmas)
    out["epsilons"], out["skips"] = list(epsilons), bool(skips)
    return out


@contextlib.contextmanager
def _platform_setting(table: dict, value):
    """``table[platform] = value`` for the platform being traced for, jit caches cleared on entry and exit (the
    tables are read at trace time), the entry restored after."""
    import jax

    from mcacct.core.platform import target_platform
    plat = target_platform()
    before = table.get(plat)
    table[plat] = value
    jax.clear_caches()
    try:
        yield
    finally:
        if before is None:
            table.pop(plat, None)
        else:
            table[plat] = before
        jax.clear_caches()


def _fused(measure) -> dict:
    """``measure()`` with the remove bound of the fused kernel (``kernels.fused_bound.FUSED_BOUND_AUTO`` on for this
    platform: the draws that the skip lets go never have their noise in memory)."""
    from mcacct.kernels import fused_bound
    with _platform_setting(fused_bound.FUSED_BOUND_AUTO, True):
        return dict(measure(), remove_bound="fused")


def _tabled(measure) -> dict:
    """``measure()`` with the remove bound reading table normals (``kernels.normal_table.TABLE_SCREEN_AUTO`` on for
    this platform: float32 normals within a certified ``alpha`` of the draws, the float64 noise redrawn by column only
    for the draws the bound does not let go; on CPUs since kernels 17/18)."""
    from mcacct.kernels import normal_table
    with _platform_setting(normal_table.TABLE_SCREEN_AUTO, True):
        return dict(measure(), remove_bound="table")


def _screened(measure) -> dict:
    """``measure()`` with the truncated scheme's counts screened on this platform, whatever
    ``schemes.truncated.screen.AUTO_SCREEN`` says for it (an A/B of that choice; no program of the other choice is
    reused)."""
    from mcacct.schemes.truncated import screen
    with _platform_setting(screen.AUTO_SCREEN, (True, "benchmarks/accelerator.py: screened for an A/B measurement")):
        return dict(measure(), count_sampler="screened")


def fused_counted_bytes(iterations: int, min_sep: int, num_sigmas: int, c_len: int, tile: int) -> dict:
    """Bytes per sample that the Pallas fused kernel's BlockSpecs move (``fused_pallas_losses``): counted from
    the blocks each program loads and stores, not measured. Per sample: the ``ceil(n/b)`` int32 participation rows
    ``tau`` read, ``(2, J')`` float64 losses and an int32 ``ok`` flag written; per tile (amortised): the 8-byte
    key, the padded ladder and the constants (``c_col`` and the half squared column norms, zero-padded to powers
    of two). Not counted: the XLA program around the kernel (participation draws, which write ``tau``, reported
    apart; the slicing of the padded outputs) and re-reads of the constants that hit cache."""
    def pow2(v):
        return 1 << max(int(v) - 1, 0).bit_length()
    n, b = iterations, min_sep
    nblk = -(-n // b)
    nj_pad = pow2(num_sigmas)
    hs_len = pow2(nblk * b)                         # tile_constants: pad + n half squared norms, padded
    c_pad = pow2(c_len)
    reads_sample = nblk * 4
    writes_sample = 2 * nj_pad * 8 + 4
    per_tile = 2 * 4 + nj_pad * 8 + (c_pad + hs_len) * 8
    kernel = reads_sample + writes_sample + per_tile / tile
    return {"kernel_bytes_per_draw": kernel, "reads_tau_per_draw": reads_sample, "writes_per_draw": writes_sample,
            "constants_per_tile": per_tile, "tile": tile, "tau_write_by_xla_per_draw": nblk * 4,
            "kernel_plus_tau_write_per_draw": kernel + nblk * 4,
            "source": "counted from the BlockSpecs of fused_pallas_losses, not measured"}


def source_digest() -> str:
    """The first 16 hex digits of the SHA-256 of the mcacct package's ``.py`` files (paths and contents, sorted):
    the code a part measured; a part measured with other sources is measured afresh (:meth:`Results.part`)."""
    import hashlib
    pkg = os.path.join(os.path.dirname(HERE), "mcacct")
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(pkg)):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(root, f)
                h.update(os.path.relpath(path, pkg).encode() + b"\0")
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()[:16]


def _device_meta() -> dict:
    import jax
    dev = jax.devices()[0]
    return {"device": f"{dev.platform}:{dev.device_kind}", "device_kind": dev.device_kind,
            "device_count": jax.device_count(), "platform": dev.platform, "jax": jax.__version__,
            "python": host_platform.python_version(), "cpu_count": os.cpu_count(), "mcacct_source": source_digest(),
            "kernel": _kernel_version()}


def _kernel_version() -> str:
    from mcacct.jobs.problem_file import KERNEL_VERSION
    return KERNEL_VERSION


def _device_slug() -> str:
    import jax
    dev = jax.devices()[0]
    return "cpu" if dev.platform == "cpu" else _slug(dev.device_kind)


def part_throughput(res: Results, args) -> dict:
    from mcacct.engine.kernel_choice import resolve_loss_kernel
    from mcacct.core.platform import target_platform
    all_configs = QUICK_CONFIGS if args.quick else CONFIGS
    wanted = [c for c in args.configs.split(",") if c] if args.configs else list(all_configs)
    unknown = [c for c in wanted if c not in all_configs]
    if unknown:
        raise SystemExit(f"unknown --configs {unknown}; choose from {list(all_configs)}")
    configs = {k: all_configs[k] for k in wanted}
    seconds = args.seconds
    settings = {"configs": wanted, "seconds": seconds, "sigma": SIGMA, "ladder": list(LADDER), "quick": args.quick,
                "chunk_size": args.chunk_size}
    part = res.part("throughput", settings)
    part["notes"] = {
        "single": "samples/s of one direction (remove) at one sigma: engine.problem.chunk_losses",
        "ladder": ("draws/s of a 4-sigma ladder over both directions on shared draws (engine.runner."
                   "ladder_chunk_statistics with calibrate's verification histogram); evaluations/s = draws/s x 8"),
        "compile_s": "lower + compile ahead of time; first_call_s: the first execution after it",
        "bytes": ("xla_bytes_per_*: XLA cost_analysis 'bytes accessed' of the compiled program / samples (as XLA "
                  "estimates it); fused_counted_bytes: counted from the Pallas kernel's BlockSpecs, not measured"),
        "fused_f32": "n/a: the fused kernel computes in float64 only",
        "recursions": ("ladder unfused_f64_<name>: the same ladder with Problem.recursion=<name> instead of the "
                       "platform's 'auto' (kernels.recursion.auto_recursion)"),
    }
    table = part.setdefault("table", {})
    budget = Budget(args.part_seconds, args.grace_seconds)
    plan = [(name, kind, label) for name in configs
            for kind, label in (("single", "unfused_f64"), ("single", "unfused_f32"), ("ladder", "unfused_f64"),
                                ("ladder", "unfused_f32"), ("ladder", "fused_f64"))]
    # the recursions other than the platform's "auto" (ladder, f64, b > 1), after the table's own columns
    plan += [(name, "ladder", f"unfused_f64_{rec}") for name in configs if configs[name][1] > 1
             for rec in RECURSION_SWEEP]
    # the compiled fused kernel at large b goes last: its compilation time on a device is unknown
    plan.sort(key=lambda t: (t[2] == "fused_f64" and configs[t[0]][1] >= 64, _label_recursion(t[2]) != "auto"))
    for name, (n, b, batch, chunk) in configs.items():
        _, p = _bminsep_problem(n, b, batch, "float64", "unfused")
        row = table.setdefault(name, {})
        if (row.get("iterations"), row.get("min_sep")) not in ((None, None), (n, b)):
            row.clear()                                  # another shape under this name: measure afresh
        row.update({"iterations": n, "min_sep": b, "sampling_prob": p, "c_col": f"ones({b})/sqrt({b})"})
        row.setdefault("single", {})
        row.setdefault("ladder", {})["fused_f32"] = "n/a (the fused kernel computes in float64 only)"
    res.save()
    for name, kind, label in plan:
        n, b, batch, chunk = configs[name]
        chunk = args.chunk_size or chunk
        row = table[name]
        dtype = "float32" if label.endswith("f32") else "float64"
        loss_kernel = "fused" if label.startswith("fused") else "unfused"
        problem, _ = _bminsep_problem(n, b, batch, dtype, loss_kernel, _label_recursion(label))
        need = seconds + (5 if args.quick else 20)

        def run(problem=problem, kind=kind, chunk=chunk, loss_kernel=loss_kernel, n=n, b=b):
            if loss_kernel == "fused":
                try:
                    resolved = resolve_loss_kernel(problem)
                except ValueError as e:
                    return {"refused": str(e)}
                out = _measure_ladder(problem, chunk, seconds)
                from mcacct.engine.problem import block_size
                pallas = target_platform() != "cpu"
                bsize = block_size(problem, out["chunk_size"])
                tile = min(bsize & -bsize, 64) if pallas else bsize
                out["kernel"] = ("Pallas Triton (compiled)" if pallas else "XLA form of the fused tile function")
                out["resolved"] = resolved.reason
                out["fused_counted_bytes"] = fused_counted_bytes(n, b, len(LADDER), b, tile)
                out["xla_bytes_note"] = ("cost_analysis of the whole program; a Pallas custom call's own loads and "
                                         "stores are not seen by XLA's cost model") if pallas else ""
                out["agreement"] = fused_agreement(problem, bsize)
                return out
            return (_measure_single if kind == "single" else _measure_ladder)(problem, chunk, seconds)

        _entry(res, row[kind], label, budget, need, run, f"{name} {kind} {label}")
    part["complete"] = not _has_skips(table) and all(k in table for k in all_configs)
    part["finished_at"] = _now()
    part["wall_s"] = time.monotonic() - budget.t0
    res.save()
    return part


def fused_agreement(problem, num_samples: int) -> dict:
    """The fused kernel's losses against the unfused kernel's on the same draws (one block of ``num_samples``, the
    4-sigma ladder, both directions), on this device: the largest difference per sigma and the loss-error bound
    ``eta`` it must stay within (docs/soundness.md). ``within_bound`` is what lets ``auto`` pick the fused kernel."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from mcacct.engine.kernel_choice import fused_block_ladder
    from mcacct.engine.losses import ladder_losses
    from mcacct.engine.systematic import loss_error_bound
    key, sigmas = jax.random.key(11), jnp.asarray(LADDER, jnp.float64)
    fused = np.asarray(jax.jit(lambda k: fused_block_ladder(problem, k, sigmas, num_samples))(key))
    unfused = np.asarray(jax.jit(lambda k: ladder_losses(problem.mechanism(), k, sigmas, num_samples))(key))
    rows = [{"sigma": float(s), "max_abs_difference": float(np.max(np.abs(fused[j] - unfused[j]))),
             "loss_error_bound": float(loss_error_bound(problem, float(s)))} for j, s in enumerate(LADDER)]
    return {"samples": int(num_samples), "per_sigma": rows,
            "within_bound": all(r["max_abs_difference"] <= r["loss_error_bound"] for r in rows)}


def _has_skips(node) -> bool:
    if isinstance(node, dict):
        return "skipped" in node or "status" in node or any(_has_skips(v) for v in node.values())
    return False


def _import_production(quick: bool = False):
    """benchmarks/production.py as a module, its §7.4 constants shrunk to :data:`PROD_QUICK` with ``quick``."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import production
    if quick:
        for k, v in PROD_QUICK.items():
            setattr(production, k, v)
    return production


def part_production(res: Results, args) -> dict:
    import numpy as np

    from mcacct.engine.problem import Problem
    from mcacct.core.rates import sampling_prob_from_batch_size
    from mcacct.strategies.banded import BandedToeplitz
    from mcacct.schemes.truncated import TruncatedBMinSep
    prod = _import_production(args.quick)
    shape = {"dataset_size": prod.M, "expected_batch": prod.BATCH, "min_sep": prod.B, "iterations": prod.N,
             "max_batch_size": prod.BMAX, "warm_start": True}
    chunk = args.chunk_size or (256 if args.quick else 16384)
    seconds = args.seconds
    settings = {"shape": shape, "seconds": seconds, "chunk_size": chunk, "ladder": list(prod.LADDER),
                "sigma": prod.SIGMA, "quick": args.quick}
    part = res.part("production", settings)
    p = sampling_prob_from_batch_size(prod.BATCH, prod.M, prod.B)
    part["shape"] = dict(shape, sampling_prob=p)
    part["samples_7_4"] = prod.SAMPLES_7_4
    part["notes"] = {
        "engine_ladder": ("draws/s of the 4-sigma ladder over both directions on shared draws by the engine's chunk "
                          "program (ladder_chunk_statistics: vmap over blocks on accelerators), the program "
                          "calibrate runs, every loss computed; evaluations/s = draws/s x 8"),
        "engine_ladder_skips": ("the same program with the provably zero contributions at epsilon 10 skipped, as "
                                "the runner does at that epsilon (both directions; on accelerators the blocks whose "
                                "draws need the exact recursions are gathered: kernels.control.rare_cond)"),
        "engine_ladder_skips_screened": ("accelerators only: engine_ladder_skips with the counts screened as on CPUs "
                                         "(schemes.truncated.screen; AUTO_SCREEN says every sample's chain there): "
                                         "the A/B of that choice since rare_cond gathers rare elements (kernel 16)"),
        "engine_ladder_skips_screened_big": ("accelerators only: engine_ladder_skips_screened at a chunk of 2^20 "
                                             "(4x in --quick): the counts of all its blocks are drawn ahead in one "
                                             "batch (one chain for all their flagged samples), then the losses 16 "
                                             "blocks at a time (engine.runner.map_chunk_blocks, engine.problem."
                                             "BATCH_ELEMENTS)"),
        "engine_ladder_skips_fused_big": ("accelerators only, c = ones: engine_ladder_skips_screened_big with the "
                                          "remove bound of the fused kernel (kernels.fused_bound: each sub-block's "
                                          "noise drawn by counter inside one Pallas Triton kernel, never in memory, "
                                          "where the skip lets the draws go; FUSED_BOUND_AUTO)"),
        "engine_ladder_skips_table_big": ("accelerators only: engine_ladder_skips_screened_big with the remove bound "
                                          "from table normals (kernels.normal_table: float32 within alpha of the "
                                          "draws, the float64 noise redrawn by column only for the draws not let go; "
                                          "TABLE_SCREEN_AUTO, on CPUs since kernels 17 and 18)"),
        "production_ladder": "production.py's _mcacct_ladder (lax.map over the chunk's blocks), for comparison",
        "single": "production.py's _mcacct_single: sigma 0.47, direction remove",
        "reference_truncated": "jax-privacy's NumPy reference on the host CPU (production.py's _reference)",
        "estimate": "SAMPLES_7_4 / engine ladder draws/s on one device (every candidate to the end)",
        "screened_counts": ("samples/s of the screened counts alone (schemes.truncated.block_counts.count_draws, warm "
                            "start, the chunk's engine blocks under vmap as the engine runs them, the truncated "
                            "flags summed): block_pass_true draws each block of b - 1 rounds without a branch per "
                            "round, block_pass_false round by round (SCREEN_BLOCK_PASS); the same counts"),
        "count_chain": ("samples/s of the law of r alone (kernels.counts.other_counts_t, warm start, one (n, chunk) "
                        "batch) per unroll of its lookup rounds' scan (kernels.counts.COUNT_CHAIN_UNROLL)"),
    }
    budget = Budget(args.part_seconds, args.grace_seconds)
    chain = part.setdefault("count_chain", {})   # first: short, and it says where the truncated scheme's time goes
    from mcacct.schemes.truncated.counts import COUNT_CHAIN_UNROLL
    from mcacct.core.platform import target_platform
    unrolls = ([int(u) for u in args.count_unrolls.split(",") if u] if args.count_unrolls
               else [COUNT_CHAIN_UNROLL.get(target_platform(), 1)])
    for unroll in unrolls:
        _entry(res, chain, f"unroll_{unroll}", budget, seconds + (5 if args.quick else 30),
               lambda unroll=unroll: _measure_count_chain(prod, p, chunk, seconds, unroll),
               f"count chain unroll {unroll}")
    rows = part.setdefault("results", {})
    kinds = ("ones",) if args.quick else ("ones", "mse")
    problems = {}

    def problem_of(kind):  # the truncated problem with this c (built once per run)
        if kind not in problems:
            row, t0 = rows[kind], time.perf_counter()
            c = np.asarray(prod._c_col(kind), np.float64)
            row["c"] = "ones(256)/16" if kind == "ones" else "MSE-optimised, 256 bands, n=7200"
            if args.quick:
                row["c"] = f"{kind}, quick shape b={prod.B}, n={prod.N}"
            row["c_seconds"] = time.perf_counter() - t0
            strategy = BandedToeplitz(tuple(float(v) for v in c))
            problems[kind] = (c, Problem(TruncatedBMinSep(p, prod.B, prod.N, prod.M, prod.BMAX, True), strategy))
        return problems[kind]

    need = seconds + (5 if args.quick else 60)
    big_chunk = 4 * chunk if args.quick else max(chunk, 1 << 20)   # counts of all its blocks drawn ahead at once
    # the ladders (what calibrate runs) and the reference of both c first, then the single-sigma figures
    for stage in ("ladder", "single"):
        if stage == "single":   # after the ladders: the screened counts alone, round by round and by blocks
            screened = part.setdefault("screened_counts", {})
            for block_pass in (True, False):
                _entry(res, screened, f"block_pass_{str(block_pass).lower()}", budget,
                       seconds + (5 if args.quick else 40),
                       lambda block_pass=block_pass: _measure_screened_counts(prod, p, chunk, seconds, block_pass),
                       f"screened counts block_pass={block_pass}")
        for kind in kinds:
            row = rows.setdefault(kind, {})
            if kind == "mse" and stage == "ladder" and "c" not in row and budget.left() < 0.4 * args.part_seconds:
                row["skipped"] = "the part's time budget was spent; run the part again"
                continue
            row.pop("skipped", None)
            keys = (("engine_ladder", "engine_ladder_skips", "reference_truncated") if stage == "ladder"
                    else ("single", "production_ladder"))
            if stage == "ladder" and target_platform() != "cpu":
                keys += ("engine_ladder_skips_screened", "engine_ladder_skips_screened_big")
                keys += ("engine_ladder_skips_fused_big",) if kind == "ones" else ()
                keys += ("engine_ladder_skips_table_big",)
            if all(isinstance(row.get(k), dict) and not ({"skipped", "status"} & set(row[k])) for k in keys):
                continue                                     # measured in an earlier run
            c, trunc = problem_of(kind)
            if stage == "ladder":
                # the default first (both skips at epsilon 10, as calibrate runs section 7.4), then on accelerators
                # its likeliest successor (screened counts drawn ahead for a chunk of 2^20), then the other A/Bs
                _entry(res, row, "engine_ladder_skips", budget, need,
                       lambda: _measure_ladder(trunc, chunk, seconds, prod.LADDER, (prod.EPSILON,), True),
                       f"{kind} engine_ladder_skips")
                if target_platform() != "cpu":   # the counts screened as on CPUs (AUTO_SCREEN's other choice)
                    _entry(res, row, "engine_ladder_skips_screened_big", budget, need,
                           lambda: _screened(lambda: _measure_ladder(trunc, big_chunk, seconds, prod.LADDER,
                                                                     (prod.EPSILON,), True)),
                           f"{kind} engine_ladder_skips_screened_big (chunk {big_chunk})")
                if target_platform() != "cpu" and kind == "ones":   # and the fused remove bound (constant c)
                    _entry(res, row, "engine_ladder_skips_fused_big", budget, need,
                           lambda: _fused(lambda: _screened(lambda: _measure_ladder(
                               trunc, big_chunk, seconds, prod.LADDER, (prod.EPSILON,), True))),
                           f"{kind} engine_ladder_skips_fused_big (chunk {big_chunk})")
                _entry(res, row, "engine_ladder", budget, need,
                       lambda: _measure_ladder(trunc, chunk, seconds, prod.LADDER), f"{kind} engine_ladder")
                if target_platform() != "cpu":
                    _entry(res, row, "engine_ladder_skips_screened", budget, need,
                           lambda: _screened(lambda: _measure_ladder(trunc, chunk, seconds, prod.LADDER,
                                                                     (prod.EPSILON,), True)),
                           f"{kind} engine_ladder_skips_screened")
                    # and the remove bound from table normals (the CPUs' choice)
                    _entry(res, row, "engine_ladder_skips_table_big", budget, need,
                           lambda: _tabled(lambda: _screened(lambda: _measure_ladder(
                               trunc, big_chunk, seconds, prod.LADDER, (prod.EPSILON,), True))),
                           f"{kind} engine_ladder_skips_table_big (chunk {big_chunk})")
                _entry(res, row, "reference_truncated", budget, seconds + 10,
                       lambda: prod._reference(p, c, True, 1, min(seconds, 3.0), 4 if args.quick else 16),
                       f"{kind} reference_truncated")
            else:
                _entry(res, row, "single", budget, need,
                       lambda: dict(prod._mcacct_single(trunc, chunk, 1, seconds), chunk_size=chunk),
                       f"{kind} single")
                if target_platform() == "cpu":   # on accelerators it ran at 1/14-1/23 of the engine's form (H200)
                    _entry(res, row, "production_ladder", budget, need,
                           lambda: dict(prod._mcacct_ladder(trunc, chunk, 1, seconds), chunk_size=chunk),
                           f"{kind} production_ladder")
                else:
                    row["production_ladder"] = {"not_measured": "lax.map form; on accelerators the engine's vmap "
                                                                "form (engine_ladder) is the one calibrate runs"}
            row["estimate_7_4_one_device"] = _production_estimate(prod, row)
            res.save()
    ests = rows.get("ones", {}).get("estimate_7_4_one_device", {})
    best = [ests[k]["hours"] for k in ("engine_ladder", "engine_ladder_skips", "engine_ladder_skips_screened",
                                       "engine_ladder_skips_screened_big", "engine_ladder_skips_fused_big",
                                       "engine_ladder_skips_table_big")
            if k in ests]
    if best:
        part["estimate_hours_one_device"] = min(best)
    part["complete"] = not _has_skips({k: rows.get(k) for k in kinds}) and not _has_skips(chain)
    part["finished_at"] = _now()
    part["wall_s"] = time.monotonic() - budget.t0
    res.save()
    return part


def _production_estimate(prod, row: dict) -> dict:
    """The §7.4 verification's time on one device from a row's measured ladders, and the engine ladder's draws/s
    against the reference running the ladder's ``2 J`` jobs."""
    est = {}
    for key in ("engine_ladder", "engine_ladder_skips", "engine_ladder_skips_screened",
                "engine_ladder_skips_screened_big", "engine_ladder_skips_fused_big", "engine_ladder_skips_table_big",
                "production_ladder"):
        draws = row.get(key, {}).get("draws_per_s") if isinstance(row.get(key), dict) else None
        if draws:
            est[key] = {"seconds": prod.SAMPLES_7_4 / draws, "hours": prod.SAMPLES_7_4 / draws / 3600.0,
                        "days": prod.SAMPLES_7_4 / draws / 86400.0}
    ref = row.get("reference_truncated", {})
    if "engine_ladder" in est and isinstance(ref, dict) and ref.get("per_s"):
        est["ladder_draws_vs_reference_8_jobs"] = (row["engine_ladder"]["draws_per_s"]
                                                   / (ref["per_s"] / (2 * len(prod.LADDER))))
    return est


def _measure_count_chain(prod, p: float, chunk: int, seconds: float, unroll: int) -> dict:
    """Samples/s of the truncated scheme's law of r alone (``kernels.counts.other_counts_t``, warm start) at the
    §7.4 shape, one ``(n, chunk)`` batch, its lookup rounds' scan unrolled ``unroll`` times."""
    from mcacct.schemes.truncated.counts import other_counts_t

    def make(ch):
        return lambda key: other_counts_t(key, prod.M - 1, prod.B, p, True, prod.N, ch, unroll=unroll).sum(axis=0)

    out = _with_oom_retry(lambda ch: _timed(lambda: make(ch), ch, seconds, "samples"), chunk)
    out["unroll"] = unroll
    return out


def _measure_screened_counts(prod, p: float, chunk: int, seconds: float, block_pass: bool) -> dict:
    """Samples/s of the screened counts alone at the §7.4 shape (warm start): the chunk's engine blocks (4096
    samples, fewer in a smaller chunk) under ``vmap``, ``screened_counts_t`` by blocks or round by round."""
    import jax

    from mcacct.schemes.truncated import screen
    from mcacct.schemes.truncated.block_counts import count_draws

    def make(ch):
        size = min(4096, ch)

        def fn(key):
            def one(k):
                return count_draws(k, prod.M - 1, prod.B, p, True, prod.N, prod.BMAX, size, screen=True).truncated
            return jax.vmap(one)(jax.random.split(key, ch // size)).sum()
        return fn

    with _platform_setting(screen.SCREEN_BLOCK_PASS, bool(block_pass)):
        out = _with_oom_retry(lambda ch: _timed(lambda: make(ch), ch, seconds, "samples"), chunk)
    out["block_pass"] = bool(block_pass)
    return out


def _roof_fn(n: int, b: int, chunk: int, with_work: bool):
    """RNG (+ sliding sums + one exp per element) over the engine's blocks of a chunk of the (n, b) problem."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from mcacct.engine.problem import block_keys, block_size
    from mcacct.kernels.normal import standard_normal
    from mcacct.kernels.sliding import sliding_dot_t
    from mcacct.core.platform import target_platform
    problem, _ = _bminsep_problem(n, b, (1793, 14_745_600) if b > 1 else (1, 256), "float64", "unfused")
    bsize = block_size(problem, chunk)
    c = tuple(float(v) for v in np.ones(b) / np.sqrt(b))

    def one(k):
        z = standard_normal(k, (n, bsize))
        if with_work:
            z = jnp.exp(sliding_dot_t(z, c))
        return jnp.sum(z, axis=0)

    def fn(key):
        keys = block_keys(key, problem, chunk)
        out = jax.lax.map(one, keys) if target_platform() == "cpu" else jax.vmap(one)(keys)
        return out.reshape(-1)[:chunk]
    return fn


def part_roofline(res: Results, args) -> dict:
    n, b, chunk = ROOF_QUICK if args.quick else ROOF
    chunk = args.chunk_size or chunk
    seconds = args.seconds
    part = res.part("roofline", {"iterations": n, "min_sep": b, "chunk_size": chunk, "seconds": seconds,
                                 "quick": args.quick})
    part["notes"] = {
        "rng_sliding_exp": ("float64 standard normals (standard_normal) of the (n, block) blocks, sliding sums with "
                            "c = ones(b)/sqrt(b) (sliding_dot_t, the platform's method), one exp per element, a sum "
                            "per sample: the least work a sample of the loss kernels does"),
        "rng_only": "the normals and a sum per sample",
        "fractions": "kernel samples/s (or draws/s) / rng_sliding_exp samples/s, same device, throughput part's file",
    }
    budget = Budget(args.part_seconds, args.grace_seconds)
    meas = part.setdefault("measured", {})
    need = seconds + (5 if args.quick else 20)
    for key, work in (("rng_sliding_exp", True), ("rng_only", False)):
        _entry(res, meas, key, budget, need,
               lambda work=work: _with_oom_retry(
                   lambda ch: _timed(lambda: _roof_fn(n, b, ch, work), ch, seconds, "samples"), chunk))
    roof = meas.get("rng_sliding_exp", {}).get("samples_per_s") if isinstance(meas.get("rng_sliding_exp"), dict) \
        else None
    thr = res.data["parts"].get("throughput", {}).get("table", {})
    name = f"n{n}_b{b}"
    fractions = {}
    if roof and name in thr:
        for kind, unit in (("single", "samples_per_s"), ("ladder", "draws_per_s")):
            for label, entry in thr[name].get(kind, {}).items():
                if isinstance(entry, dict) and entry.get(unit):
                    fractions[f"{kind}_{label}"] = entry[unit] / roof
        part["fractions_of_roofline"] = fractions
    else:
        part["fractions_of_roofline"] = f"no throughput row {name} in this file: run --part throughput first"
    part["complete"] = not _has_skips(meas)
    part["finished_at"] = _now()
    part["wall_s"] = time.monotonic() - budget.t0
    res.save()
    return part


def part_plan(res: Results, args) -> dict:
    prod = _import_production(args.quick)
    part = res.part("plan", {"quick": args.quick, "shape": {"iterations": prod.N, "min_sep": prod.B,
                                                            "dataset_size": prod.M, "expected_batch": prod.BATCH,
                                                            "max_batch_size": prod.BMAX}})
    part["command"] = ("production.py _plan_only: python -m mcacct calibrate ... --plan-only --json (default chunk: "
                       "--chunk-size auto, engine.problem.auto_chunk_size)")
    budget = Budget(args.part_seconds, args.grace_seconds)
    kinds = part.setdefault("plan_only", {})
    kinds_run = ("ones",) if args.quick else ("ones", "mse")
    for kind in kinds_run:
        if kind == "mse" and budget.left() < 0.5 * args.part_seconds:
            kinds.setdefault(kind, {"skipped": "the part's time budget was spent; run the part again"})
            continue
        _entry(res, kinds, kind, budget, 30, lambda kind=kind: prod._plan_only(prod._c_col(kind)))
    # the job as a user runs it: the plan written, then one shard job of it (sample --plan), timed steady
    shards = part.setdefault("shard_vs_plan", {})
    _entry(res, shards, "ones", budget, 30,
           lambda: prod._shard_vs_plan(prod._c_col("ones"), 16 if args.quick else 32))
    est = res.data["parts"].get("production", {}).get("results", {})
    part["production_estimate"] = {k: v.get("estimate_7_4_one_device") for k, v in est.items()
                                   if isinstance(v, dict) and v.get("estimate_7_4_one_device")} or \
        "no production part in this file: run --part production"
    part["expected_hours_plan_only"] = {k: v["expected_seconds_at_most"]["verification"] / 3600.0
                                        for k, v in kinds.items()
                                        if isinstance(v, dict) and "expected_seconds_at_most" in v}
    part["complete"] = not _has_skips({**{k: kinds.get(k) for k in kinds_run}, "shard": shards.get("ones")})
    part["finished_at"] = _now()
    part["wall_s"] = time.monotonic() - budget.t0
    res.save()
    return part


#: fused_bound part: (block, tile, num_warps) of the fused kernel, in the order they are worth a compile
FUSED_BOUND_VARIANTS = ((32, 128, 4), (16, 128, 4), (16, 64, 2), (32, 256, 8))
FUSED_BOUND_QUICK_VARIANTS = ((16, 64, 4),)


def _bound_fn(n: int, b: int, p: float, chunk: int, variant: tuple, with_u: bool = False):
    """A function of a key: the remove bound ``U`` of a chunk of the §7.4 draws (c = ones(b)/16, the production
    ladder) by ``variant`` (``("xla", block)``: the materialised noise and ``remove_loss_bound_from_draws_t``;
    ``("fused", block, tile, warps)``: ``fused_remove_bound_from_key``; ``("noise",)``: only the normals, summed),
    reduced to the count of draws it would skip at epsilon 10 (and ``U`` with ``with_u``)."""
    import jax
    import jax.numpy as jnp
    from mcacct.kernels.const_column import remove_loss_bound_from_draws_t
    from mcacct.kernels.fused_bound import fused_remove_bound_from_key
    from mcacct.kernels.normal import standard_normal
    from mcacct.kernels.output import standardised_blocks_t
    from mcacct.kernels.participation import participation_blocks_t, participation_cap
    from mcacct.schemes.bminsep import expected_participation_rate
    prod = _import_production()
    c = (1.0 / 16.0,) * b
    rate = expected_participation_rate(p, b)
    sig = jnp.asarray(prod.LADDER)
    err = jnp.full(len(prod.LADDER), 1e-9)
    thr = prod.EPSILON - 1e-6

    def fn(key):
        if variant[0] == "noise":
            return jnp.sum(standard_normal(jax.random.split(key)[1], (n, chunk)), axis=0)[:8]
        if variant[0] == "xla":
            tau, z = standardised_blocks_t(key, n, b, p, True, rate, chunk)
            u = remove_loss_bound_from_draws_t(tau, z, sig, err, n, b, p, True, c, variant[1])
        else:
            kx, kz = jax.random.split(key)
            tau = participation_blocks_t(kx, n, b, p, True, chunk, participation_cap(n, b, rate))
            u = fused_remove_bound_from_key(jax.random.key_data(kz), tau, sig, err, n, b, p, True, c, chunk,
                                            variant[2], variant[1], num_warps=variant[3])
        count = jnp.sum(jnp.all(u <= thr, axis=0))
        return (count, u) if with_u else count
    return fn


def part_fused_bound(res: Results, args) -> dict:
    """Issue #39 shortcut 4: the fused remove bound (mcacct.kernels.fused_bound) against the XLA path it replaces
    for the draws that the skip lets go (the noise materialised, then its prefix sums' block extremes), at the §7.4
    shape with c = ones(256)/16, and the normals alone; first the numbers (both bounds on the same chunk: their
    largest difference and how many draws each lets go), then draws/s."""
    import jax
    import numpy as np
    from mcacct.core.rates import sampling_prob_from_batch_size
    prod = _import_production(args.quick)
    n, b = prod.N, prod.B
    p = sampling_prob_from_batch_size(prod.BATCH, prod.M, b)
    chunk = args.chunk_size or (1024 if args.quick else 65536)
    variants = FUSED_BOUND_QUICK_VARIANTS if args.quick else FUSED_BOUND_VARIANTS
    part = res.part("fused_bound", {"iterations": n, "min_sep": b, "sampling_prob": p, "chunk_size": chunk,
                                    "seconds": args.seconds, "ladder": list(prod.LADDER), "epsilon": prod.EPSILON,
                                    "variants": [list(v) for v in variants], "quick": args.quick})
    budget = Budget(args.part_seconds, args.grace_seconds)
    need = args.seconds + (5 if args.quick else 30)

    def agreement():
        key = jax.random.key(7)
        xla = jax.jit(_bound_fn(n, b, p, chunk, ("xla", variants[0][0]), with_u=True))(key)
        fused = jax.jit(_bound_fn(n, b, p, chunk, ("fused",) + variants[0], with_u=True))(key)
        u_x, u_f = np.asarray(xla[1]), np.asarray(fused[1])
        fin = np.isfinite(u_x) & np.isfinite(u_f)
        return {"draws": chunk, "max_abs_diff": float(np.max(np.abs(u_x - u_f)[fin])) if fin.any() else None,
                "not_finite": int((~fin).sum()), "skipped_xla": int(xla[0]), "skipped_fused": int(fused[0]),
                "block": variants[0][0], "ok": bool(fin.all() and np.max(np.abs(u_x - u_f)) <= 1e-9 * (
                    1 + np.max(np.abs(u_x))))}

    _entry(res, part, "agreement", budget, need, agreement)
    meas = part.setdefault("measured", {})
    order = [("fused",) + variants[0], ("xla", 16), ("noise",)] + [("fused",) + v for v in variants[1:]]
    for variant in order:
        label = "_".join(str(v) for v in variant)
        _entry(res, meas, label, budget, need, lambda variant=variant: _timed(
            lambda: _bound_fn(n, b, p, chunk, variant), chunk, args.seconds, "draws"), label=f"fused_bound {label}")
    rates = {k: v["draws_per_s"] for k, v in meas.items() if isinstance(v, dict) and v.get("draws_per_s")}
    if rates:
        part["hours_for_7_5e9_bounds"] = {k: prod.SAMPLES_7_4 / r / 3600.0 for k, r in rates.items()}
    part["complete"] = not _has_skips(meas)
    part["finished_at"] = _now()
    part["wall_s"] = time.monotonic() - budget.t0
    res.save()
    return part


RUNNERS = {"throughput": part_throughput, "production": part_production, "roofline": part_roofline,
           "plan": part_plan, "fused_bound": part_fused_bound}


#: The bar series of :func:`plot_throughput`: (table kind, entry, rate field, legend).
PLOT_SERIES = (("single", "unfused_f64", "samples_per_s", "1 σ, 1 direction, unfused f64 (samples/s)"),
               ("single", "unfused_f32", "samples_per_s", "1 σ, 1 direction, unfused f32 (samples/s)"),
               ("ladder", "unfused_f64", "draws_per_s", "4-σ ladder, both directions, unfused f64 (draws/s)"),
               ("ladder", "unfused_f32", "draws_per_s", "4-σ ladder, both directions, unfused f32 (draws/s)"),
               ("ladder", "fused_f64", "draws_per_s", "4-σ ladder, both directions, fused f64 (draws/s)"))


def throughput_title(data: dict) -> str:
    """Title of the throughput figure: device, jax and the part's settings.

    Parameters
    ----------
    data:
        The results file's content.

    Returns
    -------
    str
        Two lines: device and jax; σ, the ladder, the timing per entry and the chunk size.
    """
    part = data.get("parts", {}).get("throughput", {})
    st = part.get("settings", {})
    ladder = ", ".join(f"{v:g}" for v in st.get("ladder", LADDER))
    chunk = f"chunk {st['chunk_size']:,}" if st.get("chunk_size") else "chunk per configuration"
    quick = " (--quick)" if st.get("quick") else ""
    return (f"mcacct throughput on {data.get('device_kind', data.get('device', '?'))}, jax {data.get('jax', '?')}"
            f"{quick}\nσ = {st.get('sigma', SIGMA):g} (1-σ series); ladder σ ∈ {{{ladder}}}; "
            f"{st.get('seconds', '?')} s timed per entry; {chunk}")


def _throughput_bars(ax, table: dict) -> list:
    """One bar per (configuration, series) with a rate; the reason (refused, error, skipped) where none.
    Returns the legend handles (a patch per series, also for a series with no bar)."""
    from matplotlib.patches import Patch
    names, handles = list(table), []
    width = 0.8 / len(PLOT_SERIES)
    for i, (kind, label, unit, legend) in enumerate(PLOT_SERIES):
        xs, ys = [], []
        for j, name in enumerate(names):
            entry = table[name].get(kind, {}).get(label)
            x = j + (i - (len(PLOT_SERIES) - 1) / 2) * width
            if isinstance(entry, dict) and entry.get(unit):
                xs.append(x)
                ys.append(entry[unit])
            else:
                why = next((k for k in ("refused", "error", "skipped") if isinstance(entry, dict) and k in entry),
                           "n/a" if isinstance(entry, str) else "missing")
                ax.annotate(why, (x, 0.02), xycoords=("data", "axes fraction"), rotation=90, ha="center",
                            va="bottom", fontsize=7)
        ax.bar(xs, ys, width=width, color=f"C{i}")
        handles.append(Patch(color=f"C{i}", label=legend + ("" if xs else ": none measured")))
    return handles


def plot_throughput(data: dict, png: str) -> str | None:
    """A grouped bar chart of the throughput table (log scale), next to the JSON; the title carries the device
    and the part's settings, each tick its configuration's n, b and sampling probability p."""
    table = data.get("parts", {}).get("throughput", {}).get("table")
    if not table:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(12, 5))
    handles = _throughput_bars(ax, table)
    ax.set_yscale("log")
    ax.set_xticks(range(len(table)))
    ax.set_xticklabels([f"{k}\n(n = {r.get('iterations')}, b = {r.get('min_sep')}, p = "
                        + (f"{r['sampling_prob']:.3g})" if isinstance(r.get("sampling_prob"), float) else "?)")
                        for k, r in table.items()], fontsize=8)
    ax.set_xlabel("configuration (c = ones(b)/sqrt(b); the fused kernel is float64 only: no fused f32)")
    ax.set_ylabel("samples/s or draws/s (see legend; log scale)")
    ax.set_title(throughput_title(data), fontsize=10)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def run_parts(args) -> int:
    # no preallocation of 75% of the device's memory: the plan part's calibrate subprocess needs the device too
    # (set before JAX starts its backend; an explicit setting in the environment wins)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    from mcacct.core.precision import x64_scope
    meta = _device_meta()
    from mcacct.core.platform import target_platform
    import jax
    if os.environ.get(PLATFORM_ENV) and target_platform() != ("gpu" if jax.default_backend() in ("cuda", "rocm", "gpu")
                                                            else jax.default_backend()):
        raise SystemExit(f"{PLATFORM_ENV}={os.environ[PLATFORM_ENV]} is for exporting only (--lower-only); unset it "
                         f"to measure on this {jax.default_backend()} backend")
    meta["xla_python_client_preallocate"] = os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"]
    slug = _device_slug()
    out_dir = args.out_dir or RESULTS
    path = os.path.join(out_dir, f"accelerator_{slug}{'_quick' if args.quick else ''}.json")
    res = Results(path, meta, args.redo, args.retry_errors)
    if args.part == "all":
        parts = [p for p in PARTS if not (res.data["parts"].get(p) or {}).get("complete")]
    else:
        parts = [args.part]
    print(f"device {meta['device']}; parts {', '.join(parts) or '(none missing)'}; file {path}", file=sys.stderr)
    with x64_scope():
        for name in parts:
            t0 = time.perf_counter()
            print(f"[{name}]", file=sys.stderr, flush=True)
            RUNNERS[name](res, args)
            print(f"[{name}] {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
            res.data = json.loads(json.dumps(res.data, default=float))   # plain JSON types
            res.redo = False
    png = plot_throughput(res.data, os.path.splitext(path)[0] + ".png")
    print(path)
    if png:
        print(png)
    return 0


# -------------------------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lower-only", action="store_true",
                    help="lowering checks only (no device): export for cuda and tpu, one fresh process each")
    ap.add_argument("--platform", choices=LOWER_PLATFORMS, default="",
                    help="with --lower-only: check this platform only, in this process")
    ap.add_argument("--out", default="", help="with --lower-only: write the results as JSON to this file")
    ap.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--part", choices=PARTS + ("all",), default="",
                    help="device part to run: throughput, production, roofline, plan, fused_bound, or all (the missing ones)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny shapes and budgets (smoke test on CPU); writes accelerator_<device>_quick.json")
    ap.add_argument("--out-dir", default="", help="directory of the results JSON and PNG (default benchmarks/results)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="timing seconds per configuration (default 3; 0.2 with --quick)")
    ap.add_argument("--part-seconds", type=float, default=None,
                    help="a part starts no new configuration after this many seconds (default 420; 120 with --quick)")
    ap.add_argument("--grace-seconds", type=float, default=None,
                    help=("a configuration still running this long after --part-seconds is recorded as timed out "
                          "and the process ends, exit status 3 (default 60)"))
    ap.add_argument("--chunk-size", type=int, default=0, help="samples per chunk (default: per configuration)")
    ap.add_argument("--configs", default="",
                    help=("throughput: comma list of configurations to run (default all: "
                          f"{','.join(CONFIGS)}; with --quick {','.join(QUICK_CONFIGS)})"))
    ap.add_argument("--count-unrolls", default="",
                    help="production: comma list of the count chain's unrolls to time (default: the platform's)")
    ap.add_argument("--redo", action="store_true", help="measure the part again instead of resuming it")
    ap.add_argument("--retry-errors", action="store_true",
                    help="measure again the configurations that failed or timed out (the others are kept)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.lower_only:
        return _lower_only(args)
    if not args.part:
        ap.error("give --lower-only or --part (see --help)")
    if args.seconds is None:
        args.seconds = 0.2 if args.quick else 3.0
    if args.part_seconds is None:
        args.part_seconds = 120.0 if args.quick else 420.0
    if args.grace_seconds is None:
        args.grace_seconds = 60.0
    return run_parts(args)


if __name__ == "__main__":
    sys.exit(main())
