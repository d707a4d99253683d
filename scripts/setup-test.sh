#!/usr/bin/env bash
# scripts/setup.sh's Go check (make setup-test, part of make test): with a Go older than the
# one go.mod names, or none, set-up exits 1 and says which version to get and where; with the
# Go in use it passes. Fast: every other step of set-up is already done when make test runs.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' go.mod)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "setup-test: FAIL $*"; failed=1; }

# Debian 12's golang-go, as `go` answers.
cat >"$tmp/go1.19" <<'GO'
#!/bin/sh
case "$1 $2" in
"env GOVERSION") echo go1.19.8 ;;
"version ") echo "go version go1.19.8 linux/amd64" ;;
*) exit 2 ;;
esac
GO
chmod +x "$tmp/go1.19"

for go in "$tmp/go1.19" "$tmp/no-such-go"; do
  set +e
  out=$(GO=$go scripts/setup.sh 2>&1)
  rc=$?
  set -e
  if [ "$rc" = 1 ] && grep -q "https://go.dev/dl/go$want.linux-" <<<"$out" && grep -q "go $want\|Go $want" <<<"$out"; then
    echo "setup-test: ok: GO=$(basename "$go"): exit 1, $(grep -m1 '^setup: ' <<<"$out" | cut -c1-120)..."
  else
    fail "GO=$(basename "$go"): want exit 1 naming go$want and go.dev/dl, got $rc: $out"
  fi
done

if out=$(GO=$GO scripts/setup.sh 2>&1); then
  echo "setup-test: ok: $(tail -1 <<<"$out")"
else
  fail "GO=$GO: $out"
fi
exit $failed
