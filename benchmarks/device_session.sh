#!/usr/bin/env bash
# One device session in ONE command of at most ~9 minutes, for a session that is lent an accelerator for a short
# time (one start, one call): first correctness (issue #38), then every device part of benchmarks/accelerator.py
# with the time that is left:
#
#     bash benchmarks/device_session.sh            # on the device machine, in the repository root
#
# 1. Correctness, first: benchmarks/gpu_suite.py runs `tests/kernels tests/schemes tests/engine tests/evr -m "not
#    slow"` plus every `gpu`-marked test (pytest -n 8; about 4 minutes on an H100, at most SUITE_SECONDS) and writes
#    benchmarks/results/gpu_suite_<card>.txt (selection, versions, passed, failed, every skip with its reason);
#    benchmarks/gpu_checks.py runs the statistical end-to-end checks against the PLD and a CPU run made in the same
#    call (about 1 minute) and writes benchmarks/results/gpu_checks_<card>.json. Both are copied to $OUT at once,
#    with the suite's whole pytest log (gpu_suite.log).
# 2. Performance: the parts of benchmarks/accelerator.py run in the order of their value (production, fused_bound,
#    plan, throughput, roofline), each under `timeout` with a budget that leaves the next ones their turn; a part cut short
#    keeps what it measured (the results file is written after every configuration) and a later call resumes it.
#    The results file and its PNG are copied to $OUT (when set) after every part, together with the log, so that
#    they come back even if the call is cut. Only the files this call wrote are copied ($OUT takes 8 files at most).
#
# Environment: PYTHON (default python3), SESSION_SECONDS (default 540: the whole script's budget), SUITE_SECONDS
# (default 300: the test suite's share), CORRECTNESS_ONLY=1 (stop after part 1), SKIP_CORRECTNESS=1 (only part 2),
# EXTRA_ARGS (added to every accelerator.py call; its --quick and --out-dir also go to gpu_suite.py and
# gpu_checks.py, and --out-dir replaces benchmarks/results for every file this script writes). Smoke test on a CPU,
# writing nothing into benchmarks/results (about 2 minutes on a 2-core box):
#   EXTRA_ARGS="--quick --out-dir /tmp/smoke" SESSION_SECONDS=120 bash benchmarks/device_session.sh
#
# Wheels: if a folder .whl of wheels travelled with the checkout, they are installed into /tmp/site first (no index,
# no dependencies) and put on PYTHONPATH. The device (Python 3.12, JAX 0.11.2) already has pytest, pytest-xdist,
# pytest-timeout, hypothesis, mpmath, scipy, flax, scikit-learn and chex (/work/.library/device/KINDS.md), but not
# dp-accounting and jax-privacy, which the suite's reference tests (tests/engine/test_core.py,
# tests/schemes/test_schemes_extra.py, tests/evr/test_bounds.py, tests/evr/test_noise.py) and the production part
# import, nor their dependencies dm-tree and pydantic (with pydantic-core, annotated-types, typing-inspection, and
# typing-extensions >= 4.16 for pydantic-core). Make the folder here (and keep it out of git:
# `echo /.whl/ >> .git/info/exclude`), for the device's Python 3.12 (the versions of the CPU venv; ~3.4 MB):
#   python3 -m pip download -d .whl --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     jax-privacy==2.0.0 dp-accounting==0.6.0 dm-tree==0.1.10 pydantic==2.14.4 pydantic-core==2.50.5 \
#     annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
# and name it in the device call's carry: run(command="bash benchmarks/device_session.sh", carry=[".whl"],
# timeout_s=600).
set -u
PY=${PYTHON:-python3}
BUDGET=${SESSION_SECONDS:-540}
T0=$(date +%s)
DEST=${OUT:-}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
LOG=${DEST:-/tmp}/device_session.log
# where this script's files go: benchmarks/results, or the --out-dir of EXTRA_ARGS; --quick of EXTRA_ARGS also makes
# the correctness scripts quick
RESULTS=benchmarks/results
QUICK=
# shellcheck disable=SC2086
set -- ${EXTRA_ARGS:-}
while [ $# -gt 0 ]; do
  case $1 in
    --out-dir) RESULTS=${2:-$RESULTS}; shift ;;
    --out-dir=*) RESULTS=${1#--out-dir=} ;;
    --quick) QUICK=--quick ;;
  esac
  shift
done
mkdir -p "$RESULTS"
STAMP=$(mktemp /tmp/device_session_stamp.XXXXXX)   # files newer than this one were written by this call
{
  date -u
  nvidia-smi -L 2>/dev/null || true
  $PY -c "import jax, sys; print('python', sys.version.split()[0], 'jax', jax.__version__, jax.devices())"
} 2>&1 | tee -a "$LOG"

left() { echo $(( BUDGET - ($(date +%s) - T0) )); }

# copy to $OUT the files of $RESULTS whose names match $1 and that this call wrote
copy_new() {
  [ -n "$DEST" ] || return 0
  find "$RESULTS" -maxdepth 1 -name "$1" -newer "$STAMP" -exec cp {} "$DEST"/ \; 2>/dev/null
}

# --- 1. correctness (issue #38): the test suite on the device, then the statistical checks -------------------------
if [ "${SKIP_CORRECTNESS:-0}" != 1 ]; then
  rest=$(left)
  suite=${SUITE_SECONDS:-300}
  [ "$suite" -gt $(( rest - 150 )) ] && suite=$(( rest - 150 ))
  [ "$suite" -lt 30 ] && suite=30
  echo "== correctness: test suite, at most ${suite}s (${rest}s of the session left)" | tee -a "$LOG"
  timeout $(( suite + 60 )) $PY benchmarks/gpu_suite.py $QUICK --out-dir "$RESULTS" --timeout-seconds "$suite" \
    --log "${DEST:-/tmp}/gpu_suite.log" 2>&1 | tail -n 40 | tee -a "$LOG"
  echo "== correctness: test suite exit ${PIPESTATUS[0]} after $(( $(date +%s) - T0 ))s" | tee -a "$LOG"
  copy_new 'gpu_suite_*.txt'
  rest=$(left)
  checks=$(( rest - 30 )); [ "$checks" -gt 150 ] && checks=150
  if [ "$checks" -ge 20 ]; then
    echo "== correctness: statistical checks, at most ${checks}s" | tee -a "$LOG"
    timeout "$checks" $PY benchmarks/gpu_checks.py $QUICK --out-dir "$RESULTS" --cpu-timeout $(( checks - 15 )) \
      2>&1 | tee -a "$LOG"
    echo "== correctness: statistical checks exit ${PIPESTATUS[0]} after $(( $(date +%s) - T0 ))s" | tee -a "$LOG"
    copy_new 'gpu_checks_*.json'
  else
    echo "== correctness: statistical checks skipped, ${rest}s left" | tee -a "$LOG"
  fi
fi
if [ "${CORRECTNESS_ONLY:-0}" = 1 ]; then
  echo "== done after $(( $(date +%s) - T0 ))s (CORRECTNESS_ONLY)" | tee -a "$LOG"
  exit 0
fi

# --- 2. performance (benchmarks/accelerator.py) with the time that is left ------------------------------------------

# part, its start budget (s), the watchdog's grace (s), extra flags
run_part() {
  local part=$1 secs=$2 grace=$3; shift 3
  local rest; rest=$(left)
  if [ "$rest" -lt 30 ]; then echo "== $part: skipped, ${rest}s left" | tee -a "$LOG"; return; fi
  [ "$secs" -gt $(( rest - grace - 15 )) ] && secs=$(( rest - grace - 15 ))
  [ "$secs" -lt 10 ] && secs=10
  echo "== $part: --part-seconds $secs --grace-seconds $grace ($(left)s of the session left)" | tee -a "$LOG"
  # shellcheck disable=SC2086
  timeout $(( secs + grace + 20 )) $PY benchmarks/accelerator.py --part "$part" --part-seconds "$secs" \
    --grace-seconds "$grace" "$@" ${EXTRA_ARGS:-} 2>&1 | tee -a "$LOG"
  echo "== $part: exit ${PIPESTATUS[0]} after $(( $(date +%s) - T0 ))s" | tee -a "$LOG"
  copy_new 'accelerator_*.json'
  copy_new 'accelerator_*.png'
}

run_part production 240 40 --seconds 2
run_part fused_bound 90 30 --seconds 2
run_part plan 60 30
run_part throughput 120 30 --seconds 2
run_part roofline 30 20 --seconds 2
# if time is left: the production ladder at a 4x larger chunk (the count chain's 7200 sequential rounds are
# latency-bound on a GPU, so draws/s should grow with the chunk), in a file of its own
rest=$(left)
if [ "$rest" -gt 100 ]; then
  echo "== production at chunk 65536 (${rest}s left)" | tee -a "$LOG"
  # shellcheck disable=SC2086
  timeout $(( rest - 10 )) $PY benchmarks/accelerator.py --part production --chunk-size 65536 --seconds 2 \
    --part-seconds $(( rest - 70 )) --grace-seconds 40 ${EXTRA_ARGS:-} --out-dir /tmp/chunk65536 2>&1 | tee -a "$LOG"
  for f in /tmp/chunk65536/accelerator_*.json; do
    [ -f "$f" ] || continue
    cp "$f" "$RESULTS/$(basename "$f" .json)_chunk65536.json"
    if [ -n "$DEST" ]; then cp "$f" "$DEST/$(basename "$f" .json)_chunk65536.json"; fi
  done
fi
echo "== done after $(( $(date +%s) - T0 ))s" | tee -a "$LOG"
