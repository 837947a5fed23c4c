#!/usr/bin/env bash
# Runs each fuzz target (package:name ...) for FUZZTIME (see `make fuzz`).
#
# Go's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime ends while a worker is still in a call
# (go.dev/issue/75804, fixed in Go 1.27; this module builds with 1.26). That
# failure writes no failing input, so such a run is repeated once; a finding
# (a written input, a panic, a failed check) fails at once, and so does a
# second deadline failure in a row.
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-1m}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "$@"; do
	pkg=${t%%:*}; name=${t##*:}
	for attempt in 1 2; do
		echo "fuzz $pkg $name ($FUZZTIME)"
		if "$GO" test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
			break
		fi
		if [ "$attempt" -eq 1 ] && grep -q 'context deadline exceeded' "$out" &&
			! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$out"; then
			echo "fuzz $pkg $name: the coordinator's deadline race (go.dev/issue/75804), no failing input; once more"
			continue
		fi
		exit 1
	done
done
