#!/bin/sh
# Gate a CI job on a nexus run: create the run, let the agent drive it in the background,
# and let `nexus wait` decide the job's result.
set -u
RUN="ci-${CI_JOB_ID:-local}"
HOST='{"kind":"host","id":"ci-agent","sessionId":"'"$RUN"'"}'

cat > plan.json <<EOF
{"id": "$RUN", "maxParallel": 1, "config": {}, "tasks": [
  {"id": "build", "objective": "Build dist/app.txt.", "scope": ["dist"], "artifacts": ["dist/app.txt"],
   "checks": [{"id": "built", "command": "/bin/sh", "args": ["-c", "grep -q built dist/app.txt"], "timeoutMs": 60000}]},
  {"id": "docs", "objective": "Write docs/index.txt.", "dependsOn": ["build"], "scope": ["docs"],
   "artifacts": ["docs/index.txt"],
   "checks": [{"id": "written", "command": "/bin/sh", "args": ["-c", "test -s docs/index.txt"], "timeoutMs": 60000}]}
]}
EOF
nexus create --plan plan.json > /dev/null || exit 1

# The agent: start, work, record, verify, accept, one task after the other.
drive() {  # drive TASK COMMAND...
  task=$1; shift
  echo "{\"backend\": $HOST}" > "start-$task.json"
  attempt=$(nexus start "$RUN" "$task" --input "start-$task.json" --json |
    python3 -c 'import json, sys; t = [t for t in json.load(sys.stdin)["tasks"] if t["id"] == sys.argv[1]][0]; print(t["attempts"][-1]["id"])' "$task")
  if "$@"; then outcome=completed; else outcome=failed; fi
  echo "{\"attemptId\": \"$attempt\", \"backend\": $HOST, \"outcome\": \"$outcome\", \"summary\": \"agent finished $task\"}" > "record-$task.json"
  nexus record "$RUN" "$task" --input "record-$task.json" > /dev/null &&
    nexus verify "$RUN" "$task" > /dev/null &&
    nexus accept "$RUN" "$task" > /dev/null
}
( drive build sh -c 'mkdir -p dist && echo built > dist/app.txt' &&
  drive docs sh -c 'mkdir -p docs && echo "see dist/app.txt" > docs/index.txt' ) &

# The gate: block until the run settles. Events (then the --json summary) go to stdout,
# the events also to a new event log (an existing one is refused, never overwritten).
nexus wait "$RUN" --idle-timeout 300 --event-log "nexus-events-$RUN.jsonl" --json > nexus-wait.jsonl
status=$?
wait  # the background agent
case $status in
  0) echo "nexus: every task accepted" ;;
  3) echo "nexus: a task needs an operator"; nexus inspect "$RUN" ;;
  4) echo "nexus: a task spent its attempt budget" ;;
  6) echo "nexus: work awaits verify or accept" ;;
  124) echo "nexus: no progress for 5 minutes" ;;
  *) echo "nexus: the watcher failed" ;;
esac
tail -n 1 nexus-wait.jsonl   # the --json summary
exit $status
