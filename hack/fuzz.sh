#!/usr/bin/env bash
# Runs every fuzz target of the module for the same time: hack/fuzz.sh <time>, such as
# 5s or 3m. `go test -fuzz` takes one target of one package at a time, so this finds
# them (the Fuzz functions of the *_test.go files, listed by `go test -list`) and runs
# them one after the other; a new target is picked up without editing anything.
# FUZZ_FLAGS adds flags to each run (for example -parallel=1 on a shared machine).
# Each target runs to its end; the script fails if any of them failed, and a failing
# input is written to the package's testdata/fuzz/<target>/ as the go command does.
set -euo pipefail

fuzztime=${1:?usage: hack/fuzz.sh <time per target, such as 5s or 3m>}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Only the packages with a fuzz target are built and listed: listing runs each test
# binary, and the e2e suite has no business starting for it.
mapfile -t dirs < <(git ls-files --cached --others --exclude-standard -- '*_test.go' | xargs grep -l '^func Fuzz[A-Z]' | xargs -n1 dirname | sort -u)
if [ ${#dirs[@]} -eq 0 ]; then
  echo "no fuzz targets"
  exit 0
fi

targets=()
for dir in "${dirs[@]}"; do
  while IFS= read -r name; do
    targets+=("./$dir $name")
  done < <(go test -list '^Fuzz' "./$dir" | grep '^Fuzz')
done

# fuzz runs one target, its output also in $out. The minimization of a new input is
# capped, so that it cannot stall a short run.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fuzz() {
  # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" -fuzzminimizetime 10s ${FUZZ_FLAGS:-} "$1" 2>&1 | tee "$out"
  return "${PIPESTATUS[0]}"
}

failed=()
for target in "${targets[@]}"; do
  read -r pkg name <<<"$target"
  echo "=== $name ($pkg) for $fuzztime"
  if fuzz "$pkg" "$name"; then
    continue
  fi
  # The go command sometimes ends a short run with "context deadline exceeded" and no
  # failing input, when a worker did not stop in time on a loaded machine (twice in a
  # row, in make test's fuzz lane beside the bench): that is not a find. Such a run is
  # made again, twice at most; a failing input always fails.
  passed=false
  for again in 1 2; do
    if ! grep -q 'context deadline exceeded' "$out" || grep -q 'Failing input written' "$out"; then
      break
    fi
    echo "=== $name ($pkg): the run ended on its deadline without a failing input; again ($again of 2)"
    if fuzz "$pkg" "$name"; then
      passed=true
      break
    fi
  done
  if $passed; then
    continue
  fi
  failed+=("$name ($pkg)")
done

echo "ran ${#targets[@]} fuzz targets for $fuzztime each"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
