#!/usr/bin/env bash
# stado's walk-through on the local directory store: one host, two agents, no server to install.
# Run it from the repository's root after `make weed` (the tools; the SeaweedFS walk-through in docs/stado-guide.md
# uses its weed too) or `make install`:   bash docs/fleet-walkthrough.sh
# It works in a scratch directory of its own (its store, its agents' work roots) and removes it at the end;
# your own default store (~/.local/share/stado/store) is not touched. tests/test_docs.py runs it.
set -euo pipefail
command -v stado > /dev/null || export PATH="$PWD/.venv/bin:$PATH"   # the repository's venv, if stado is not on PATH
D=$(mktemp -d)
A= B=
cleanup() {
    [ -n "$A$B" ] && kill $A $B 2> /dev/null && wait $A $B 2> /dev/null
    rm -rf "$D"
}
trap cleanup EXIT

# 1. The store: a directory, for one host (its conditions hold with flock: never over NFS, SMB or sshfs).
cat > "$D/stado.toml" <<TOML
[store]
url = "file://$D/store"
TOML
export STADO_CONFIG="$D/stado.toml"
stado doctor                                   # every check: ok

# 2. Two agents, as two hosts would run them (each its own --host and work root); --poll-seconds 0.5 to be quick.
stado agent --host host-a --work-root "$D/work-a" --poll-seconds 0.5 > "$D/agent-a.log" 2>&1 & A=$!
stado agent --host host-b --work-root "$D/work-b" --poll-seconds 0.5 > "$D/agent-b.log" 2>&1 & B=$!

# 3. Work: a producer, a consumer of its artifact, and a few plain jobs.
stado submit 'echo hello > greeting.txt && $STADO_BIN artifact put greeting.txt' --name producer
for i in 1 2 3 4; do stado submit "echo job $i; sleep 1" --name "job-$i"; done
stado wait producer                            # exits 0 once it has run
stado submit 'cat greeting.txt; echo "my inputs: $WC_ARTIFACT_INPUTS_JSON" >&2' \
    --input producer:greeting.txt --name consumer
stado job watch consumer                       # prints "hello" (and its inputs), exits 0
stado wait job-1 job-2 job-3 job-4             # two agents: any may end last; exits 0 when all succeeded
stado results producer "$D/out"                # greeting.txt, downloaded and verified
stado status                                   # two live agents; six jobs completed on host-a and host-b

# 4. Stop: SIGTERM lets running jobs finish (a second SIGTERM stops them).
kill $A $B; wait $A $B; A= B=
echo "walk-through done"
