#!/usr/bin/env bash
# The test suite in two lanes at once (make test): the integration tests, which mostly wait on
# the processes and servers they start, beside the unit tests and then the slow tests that CI
# runs. On a 2-core machine this takes about the longer lane instead of the sum of all three.
# The second lane's output is kept in a file and printed when the first lane ends; the status
# is non-zero when either lane failed (pytest's 5, no test collected, counts as a failure).
#   scripts/test_lanes.sh PYTHON SLOW_TEST_FILE...
set -uo pipefail
py=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT

start=$SECONDS
( "$py" -m pytest tests/unit && "$py" -m pytest -m slow "$@" ) >"$log" 2>&1 &
second=$!
"$py" -m pytest tests --ignore=tests/unit
first_status=$?
first_seconds=$((SECONDS - start))
wait "$second"
second_status=$?

echo
echo "---------- lane 2: tests/unit, then the slow tests $* ----------"
cat "$log"
echo
echo "lane 1 (integration): exit $first_status after ${first_seconds} s;" \
    "lane 2 (unit, slow): exit $second_status; both done after $((SECONDS - start)) s"
if ((first_status != 0 || second_status != 0)); then
    echo "FAILED: a lane exited non-zero (pytest exits 5 when it collected no test)" >&2
    exit 1
fi
