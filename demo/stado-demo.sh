#!/bin/sh
# The fleet part of `make demo`: a few stado jobs in a local-directory store of the demo's own (under the
# repository's .cache/, never the user's own store: an agent there would run whatever the user queued), one
# producing an artifact that another takes as input, a local agent that runs them until the queue is idle,
# the results downloaded and verified, and `stado status`. Needs `stado` on PATH (.venv/bin).
set -eu
command -v stado >/dev/null 2>&1 || { echo "stado is not on PATH: run make install and put .venv/bin on PATH" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
work="$(cd "$here/.." && pwd)/.cache/demo/stado"
rm -rf "$work"
mkdir -p "$work"
printf '[store]\nurl = "file://%s/store"\n' "$work" > "$work/stado.toml"
export STADO_CONFIG="$work/stado.toml"
results="$work/results"

echo "== stado: submitting three jobs to the demo's store ($work/store)"
producer=$(stado submit --name demo-produce 'seq 1 100 > numbers.txt; echo "produced $(wc -l < numbers.txt) numbers"; $STADO_BIN artifact put numbers.txt')
consumer=$(stado submit --name demo-consume --input demo-produce:numbers.txt \
  'awk "{ s += \$1 } END { print s }" numbers.txt > sum.txt; echo "inputs: $WC_ARTIFACT_INPUTS_JSON"; echo "sum: $(cat sum.txt)"; $STADO_BIN artifact put sum.txt')
hello=$(stado submit --name demo-hello --cores 2 'echo "hello from job $WC_JOB_ID (CARGO_BUILD_JOBS=$CARGO_BUILD_JOBS)"')
echo "producer $producer"
echo "consumer $consumer (takes demo-produce:numbers.txt as input)"
echo "hello    $hello"

echo "== stado: a local agent runs them, then exits once the queue is idle"
stado agent --slots 2 --poll-seconds 0.2 --until-idle --work-root "$work/work"

echo "== stado: output of demo-consume (stado job watch exits with the job's status)"
stado job watch "$consumer"

echo "== stado: results downloaded and verified"
stado results demo-consume "$results"
echo "sum.txt says: $(cat "$results/sum.txt")"

echo "== stado status"
stado status
echo "== stado machine status demo-consume"
stado machine status demo-consume
echo
echo "Inspect further with: STADO_CONFIG=$STADO_CONFIG stado status"
