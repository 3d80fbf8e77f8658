#!/usr/bin/env bash
# Runs make targets in lanes side by side, as make test does:
#   hack/lanes.sh <target> [<target> ...] -- <target> [<target> ...] [-- ...]
# Each lane runs its targets one after the other, every one of them even when one before
# failed. A target may carry make variables, quoted with it: 'test-fuzz FUZZ_FLAGS=-test.parallel=1'.
# Each target writes to its own log, .cache/test-logs/<target>.log (tail -f it to follow
# the suite), which is printed whole when the target ends; meanwhile a line every two
# minutes says which targets still run. It fails when any target failed, and names them.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
make=${MAKE:-make}
logs=.cache/test-logs
mkdir -p "$logs"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT

# run runs one target into its log and prints the log whole, under a lock so that two
# lanes' logs do not interleave; it records a failure in $state.
run() {
  local args name log start status
  read -r -a args <<<"$1"
  name=${args[0]}
  log=$logs/$name.log
  start=$(date +%s)
  touch "$state/running.$name"
  # The subshell's times are the CPU of the target's processes, each counted once it was
  # waited for (a fleet's processes by the test that started them): a lane's wall time
  # alone cannot tell a waiting suite from a busy one.
  if (
    "$make" --no-print-directory "${args[@]}" >"$log" 2>&1
    rc=$?
    times >"$state/times.$name"
    exit $rc
  ); then
    status=passed
  else
    status=FAILED
    touch "$state/failed.$name"
  fi
  rm -f "$state/running.$name"
  {
    flock 9
    echo "===== $name $status after $(($(date +%s) - start))s, $(cpu_seconds "$state/times.$name") s of CPU (log: $log) ====="
    cat "$log"
    echo "===== $name $status ====="
  } 9>"$state/print.lock"
}

# cpu_seconds prints the user and system CPU of a subshell's children, in whole seconds,
# from the output of bash's times (its second line, "1m2.5s 0m3.1s").
cpu_seconds() {
  sed -n 2p "$1" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] } printf "%d", t }'
}

lane() {
  for target in "$@"; do
    run "$target"
  done
}

if [ $# -eq 0 ]; then
  echo "usage: hack/lanes.sh <target> ... [-- <target> ...]" >&2
  exit 2
fi

begin=$(date +%s)
pids=()
# launch starts a lane of the targets given, in the background.
launch() {
  [ $# -gt 0 ] || return 0
  printf 'lane:'
  printf " '%s'" "$@"
  echo
  lane "$@" &
  pids+=($!)
}
current=()
for arg in "$@"; do
  if [ "$arg" = "--" ]; then
    launch "${current[@]}"
    current=()
  else
    current+=("$arg")
  fi
done
launch "${current[@]}"
(
  while sleep 120; do
    running=$(cd "$state" && ls running.* 2>/dev/null | sed 's/^running\.//' | tr '\n' ' ')
    echo "lanes: $((($(date +%s) - begin) / 60)) min; running: ${running:-none} (logs in $logs)"
  done
) &
ticker=$!
for pid in "${pids[@]}"; do
  wait "$pid"
done
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null

failed=$(cd "$state" && ls failed.* 2>/dev/null | sed 's/^failed\.//' | tr '\n' ' ')
if [ -n "$failed" ]; then
  echo "lanes: FAILED after $(($(date +%s) - begin))s: $failed"
  exit 1
fi
echo "lanes: every target passed in $(($(date +%s) - begin))s"
