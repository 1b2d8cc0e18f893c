#!/usr/bin/env bash
# Record real turn event logs as the web UI's test fixtures: for each scripted behaviour of the
# mock model, start `deepsolve-mock` and `deepsolve serve` against it (in a throwaway home), run
# one turn over HTTP, read its whole SSE stream and write the events as a JSON array to
# web/src/state/fixtures/<name>.json.
#
#   web/scripts/record-fixtures.sh [OUT_DIR]
#
# Binaries come from $DEEPSOLVE_BIN_DIR (default: the workspace's target/debug).
set -euo pipefail
# The servers started here read nothing of the caller's setup.
unset DEEPSOLVE_CONFIG DEEPSOLVE_DATABASE_URL DEEPSOLVE_ADDR DEEPSOLVE_INSTANCE_ID

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${DEEPSOLVE_BIN_DIR:-$root/target/debug}"
out="${1:-$root/web/src/state/fixtures}"
for exe in deepsolve deepsolve-mock; do
  [[ -x "$bin/$exe" ]] || { echo "record-fixtures: $bin/$exe is missing (build it, or set DEEPSOLVE_BIN_DIR)" >&2; exit 1; }
done
command -v curl >/dev/null || { echo "record-fixtures: curl is needed" >&2; exit 1; }
command -v node >/dev/null || { echo "record-fixtures: node is needed" >&2; exit 1; }
mkdir -p "$out"

tmp="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Wait until FILE has a line matching PATTERN (up to 20 s); print the first match.
wait_for_line() {
  local file=$1 pattern=$2
  for _ in $(seq 200); do
    if grep -m1 -o "$pattern" "$file" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "record-fixtures: timed out waiting for '$pattern' in $file" >&2
  cat "$file" "${file%.out}.err" >&2 2>/dev/null || true
  return 1
}

# Start a mock model with the given arguments and a server in front of it; sets $server.
start_pair() {
  local dir
  dir="$(mktemp -d "$tmp/pair.XXXX")"
  mkdir -p "$dir/home/.config" "$dir/home/.local/share" "$dir/home/.cache"
  "$bin/deepsolve-mock" --port 0 --quiet "$@" >"$dir/mock.out" 2>"$dir/mock.err" &
  pids+=($!)
  local mock
  mock="$(wait_for_line "$dir/mock.out" 'http://[0-9.:]*/v1')"
  HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/.config" XDG_DATA_HOME="$dir/home/.local/share" \
    XDG_CACHE_HOME="$dir/home/.cache" \
    "$bin/deepsolve" serve --addr 127.0.0.1:0 --database "sqlite://$dir/db.sqlite" \
    --base-url "$mock" --model mock >"$dir/serve.out" 2>"$dir/serve.err" &
  pids+=($!)
  server="$(wait_for_line "$dir/serve.out" 'http://[0-9.:]*')"
}

# POST a turn; prints its id.
start_turn() {
  local problem=$1 tools=$2 body
  body="$(node -e 'console.log(JSON.stringify({ problem: process.argv[1], tools: JSON.parse(process.argv[2]) }))' "$problem" "$tools")"
  curl -sf -X POST "$server/api/v1/turns" -H 'content-type: application/json' -d "$body" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).turn_id))'
}

# The SSE stream's data lines as a JSON array, one event a line (small diffs, easy to read).
sse_to_json() {
  node -e '
    const text = require("fs").readFileSync(process.argv[1], "utf8");
    const events = text.split("\n").filter((l) => l.startsWith("data:")).map((l) => JSON.parse(l.slice(5)));
    if (!events.length || events[events.length - 1].type !== "turn_finished") {
      console.error("record-fixtures: the stream did not end with turn_finished"); process.exit(1);
    }
    process.stdout.write("[\n" + events.map((e) => JSON.stringify(e)).join(",\n") + "\n]\n");
  ' "$1"
}

# record NAME PROBLEM TOOLS_JSON MOCK_ARGS...
record() {
  local name=$1 problem=$2 tools=$3
  shift 3
  start_pair "$@"
  local turn
  turn="$(start_turn "$problem" "$tools")"
  curl -sfN --max-time 60 "$server/api/v1/turns/$turn/events" >"$tmp/$name.sse"
  sse_to_json "$tmp/$name.sse" >"$out/$name.json"
  echo "recorded $name ($(grep -c '^data:' "$tmp/$name.sse") events)"
}

# A turn cancelled while the first step's narration streams (a paced mock, so the turn is
# still running then).
record_cancelled() {
  local name=$1
  start_pair --policy well-behaved --steps 3 --ttft-ms 200 --tokens-per-s 20
  local turn
  turn="$(start_turn "What is 2 + 2?" '["reason"]')"
  curl -sfN --max-time 60 "$server/api/v1/turns/$turn/events" >"$tmp/$name.sse" &
  local reader=$!
  wait_for_line "$tmp/$name.sse" '"type":"text_delta"' >/dev/null
  curl -sf -X POST "$server/api/v1/turns/$turn/cancel" >/dev/null
  wait "$reader"
  sse_to_json "$tmp/$name.sse" >"$out/$name.json"
  echo "recorded $name ($(grep -c '^data:' "$tmp/$name.sse") events)"
}

# A turn over a knowledge base that cites it: a KB with one Markdown file, ready before the turn
# starts; the answer event carries its sources.
record_kb_cite() {
  local name=$1
  start_pair --policy kb-cite
  curl -sf -X POST "$server/api/v1/knowledge-bases" -H 'content-type: application/json' -d '{"name":"notes"}' >/dev/null
  printf '# Limits\n\n## The squeeze theorem\n\nIf a_n <= b_n <= c_n and a_n, c_n both tend to L, so does b_n: sin(n)/n tends to 0.\n' >"$tmp/limits.md"
  curl -sf -X POST "$server/api/v1/knowledge-bases/notes/documents" -F "file=@$tmp/limits.md" >/dev/null
  for _ in $(seq 200); do
    curl -sf "$server/api/v1/knowledge-bases/notes" | grep -q '"status":"ready"' && break
    sleep 0.1
  done
  local body turn
  body='{"problem":"Use the squeeze theorem to find the limit of sin(n)/n","knowledge_bases":["notes"]}'
  turn="$(curl -sf -X POST "$server/api/v1/turns" -H 'content-type: application/json' -d "$body" |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).turn_id))')"
  curl -sfN --max-time 60 "$server/api/v1/turns/$turn/events" >"$tmp/$name.sse"
  sse_to_json "$tmp/$name.sse" >"$out/$name.json"
  echo "recorded $name ($(grep -c '^data:' "$tmp/$name.sse") events)"
}

record well-behaved-code "Sum the integers from 1 to 10." '["code_execution"]' \
  --policy well-behaved --steps 3 --work-tool code_execution
record well-behaved-reason "Why is the sky blue?" '["reason"]' --policy well-behaved --steps 2 --work-tool reason
record second-plan "Factor 391." '["reason"]' --policy second-plan --steps 2 --work-tool reason
record replan-past-budget "Prove that sqrt(2) is irrational." '["reason"]' --policy replan-past-budget --steps 2
record identical-loop "Is 91 prime?" '["reason"]' --policy identical-loop --steps 2
record parallel-flood "Tabulate squares." '["code_execution"]' --policy parallel-flood --steps 1 --work-tool code_execution
record answer-with-open-steps "Is 51 prime?" '["reason"]' --policy answer-with-open-steps --steps 2
record plan-skipper "Halve 10." '["reason"]' --policy plan-skipper --steps 1
record never-answers "Is 97 prime?" '["reason"]' --policy never-answers --steps 2
record tags "Add 2 and 3." '["reason"]' --policy tags --steps 2
record flaky-429 "Multiply 6 by 7." '["reason"]' --policy flaky-429 --steps 1
record reasoning-model "Square 12." '["reason"]' --policy reasoning-model --steps 1
record_cancelled cancelled
record_kb_cite kb-cite
