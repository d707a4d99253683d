#!/usr/bin/env bash
# The systemd unit's sandbox, checked (make unit-check, part of make test): the exposure that
# `systemd-analyze security --offline=true` gives systemd/visiond.service must be at most
# $VISIOND_UNIT_MAX_EXPOSURE (default 2.5, "OK"; 0 is the most locked down, 10 none). Skipped,
# with a message, where systemd-analyze is missing (Debian 12 has it in the systemd package).
#
#   scripts/unit-check.sh [UNIT]      (default: systemd/visiond.service)
set -euo pipefail

cd "$(dirname "$0")/.."
UNIT=${1:-systemd/visiond.service}
MAX=${VISIOND_UNIT_MAX_EXPOSURE:-2.5}

[ -f "$UNIT" ] || { echo "unit-check: $UNIT: no such file" >&2; exit 2; }
if ! command -v systemd-analyze >/dev/null; then
  echo "unit-check: SKIP: systemd-analyze missing (apt install systemd), $UNIT not scored"
  exit 0
fi
# --offline needs systemd >= 250; an older one says so, and the check fails with its words.
out=$(systemd-analyze security --offline=true --no-pager "$UNIT" 2>&1) ||
  { echo "$out" >&2; echo "unit-check: systemd-analyze security --offline=true $UNIT failed" >&2; exit 1; }
score=$(sed -n 's/^→ Overall exposure level for .*: \([0-9.]*\) .*/\1/p' <<<"$out")
[ -n "$score" ] || { echo "$out" >&2; echo "unit-check: no exposure level in systemd-analyze's output" >&2; exit 1; }
if awk -v s="$score" -v m="$MAX" 'BEGIN { exit !(s <= m) }'; then
  echo "unit-check: $UNIT: exposure $score (at most $MAX): ok"
else
  grep '✗' <<<"$out" >&2 || true
  echo "unit-check: $UNIT: exposure $score is above $MAX: the settings marked ✗ above are what is left" >&2
  exit 1
fi
