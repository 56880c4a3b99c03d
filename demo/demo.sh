#!/bin/sh
# make demo: real jobs through jobman (and stado, when its demo is present), start to finish.
# Runs with .venv/bin first on PATH (the Makefile sets it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work="$(cd "$here/.." && pwd)/.cache/demo"
rm -rf "$work"
mkdir -p "$work/pipeline"
export JOBMAN_HOME="$work/jobman"
echo "== jobman (state in $JOBMAN_HOME)"

# One job that succeeds and one that fails.
ok=$(jobman run --name hello -- sh -c 'echo "hello from $JOBMAN_JOB_ID"')
bad=$(jobman run --name broken -- sh -c 'echo "about to fail" >&2; exit 3')

# A pipeline: prepare, then an analysis that fails twice (exit 1) and succeeds on its
# third attempt, one second apart.
cat > "$work/pipeline/prepare_data.py" <<'PY'
import time
time.sleep(0.5)
with open("prepared.csv", "w") as f:
    f.write("x,y\n1,2\n3,4\n")
print("prepared 2 rows")
PY
cat > "$work/pipeline/analyze_data.py" <<'PY'
import pathlib, sys
counter = pathlib.Path("attempts")
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
if n < 3:
    print(f"attempt {n}: the cluster is busy, try again", file=sys.stderr)
    sys.exit(1)
rows = pathlib.Path("prepared.csv").read_text().splitlines()[1:]
print(f"attempt {n}: sum of x = {sum(int(r.split(',')[0]) for r in rows)}")
PY
cd "$work/pipeline"
jobman run --name prepare_data -- python prepare_data.py > /dev/null
analyze_id=$(jobman run --after-success prepare_data \
    --retries 2 --retryable-exit-code 1 --retry-delay 1s \
    -- python analyze_data.py)

# A small fan-out under a concurrency limit: four reports, at most two at a time.
jobman group set reports --limit 2 > /dev/null
reports=""
for part in 1 2 3 4; do
    reports="$reports $(jobman run --group reports --after-success "$analyze_id" --name "report-$part" \
        -- sh -c "sleep 0.5; echo report $part done")"
done
cd - > /dev/null

echo "-- submitted; waiting for all jobs"
jobman wait "$ok" "$analyze_id" $reports || true
jobman wait "$bad" > /dev/null || echo "(broken exited with $? as expected)"
echo
jobman list
echo
echo "-- jobman logs hello";     jobman logs hello
echo "-- jobman logs broken";    jobman logs broken
echo "-- jobman logs $analyze_id (three attempts)"; jobman logs "$analyze_id"
echo "-- jobman show $analyze_id (attempts)"
jobman show "$analyze_id" | sed -n '/^attempts:/,/^events:/p' | sed '$d'
echo
echo "Inspect further with: JOBMAN_HOME=$JOBMAN_HOME jobman show hello"

if [ -f "$here/stado-demo.sh" ]; then
    echo
    echo "== stado"
    sh "$here/stado-demo.sh"
fi
