#!/usr/bin/env bash
# Every device part of benchmarks/accelerator.py in ONE command of at most ~9 minutes, for a session that is
# lent an accelerator for a short time (one start, one call):
#
#     bash benchmarks/device_session.sh            # on the device machine, in the repository root
#
# Parts run in the order of their value (production, plan, throughput, roofline), each under `timeout` with a
# budget that leaves the next ones their turn; a part cut short keeps what it measured (the results file is
# written after every configuration) and a later call resumes it. The results file and its PNG are copied to
# $OUT (when set) after every part, together with the log, so that they come back even if the call is cut.
#
# Environment: PYTHON (default python3), SESSION_SECONDS (default 540: the whole script's budget), EXTRA_ARGS (added
# to every accelerator.py call; e.g. "--quick --out-dir /tmp/smoke" smoke-tests this script on a CPU). If a folder
# .whl of wheels travelled with the checkout (e.g. jax-privacy and dp-accounting for the production part's
# reference), they are installed into /tmp/site first (no index, no dependencies). To make that folder (and keep
# it out of git: `echo /.whl/ >> .git/info/exclude`), for the device's Python 3.12:
#   python3 -m pip download -d .whl --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     jax-privacy==2.0.0 dp-accounting==0.6.0 dm-tree pydantic pydantic-core annotated-types typing-inspection
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
{
  date -u
  nvidia-smi -L 2>/dev/null || true
  $PY -c "import jax, sys; print('python', sys.version.split()[0], 'jax', jax.__version__, jax.devices())"
} 2>&1 | tee -a "$LOG"

left() { echo $(( BUDGET - ($(date +%s) - T0) )); }

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
  if [ -n "$DEST" ]; then cp benchmarks/results/accelerator_*.json benchmarks/results/accelerator_*.png "$DEST"/ \
    2>/dev/null; fi
}

run_part production 240 40 --seconds 2
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
    cp "$f" "benchmarks/results/$(basename "$f" .json)_chunk65536.json"
    if [ -n "$DEST" ]; then cp "$f" "$DEST/$(basename "$f" .json)_chunk65536.json"; fi
  done
fi
echo "== done after $(( $(date +%s) - T0 ))s" | tee -a "$LOG"
