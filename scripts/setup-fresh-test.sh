#!/usr/bin/env bash
# scripts/setup.sh on a fresh Debian 12 without Go or npm (make setup-fresh-test, as root):
# in a chroot unpacked from scripts/deb-test.sh's debootstrap base (build/chroot-amd64-base.tar,
# made by make deb-test or here), a copy of this tree, then scripts/setup.sh. It must install
# its apt packages, nodejs and npm from Debian (none there before), fetch ONNX Runtime, the
# model and the sample media, and then stop with exit 1 saying which Go to get from go.dev/dl
# (the chroot has none). About 10 minutes, most of it apt.
set -euo pipefail

self=$(realpath "$0")
cd "$(dirname "$0")/.."
MIRROR=${VISIOND_DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE=build/chroot-amd64-base.tar
ROOT=build/setup-fresh/root
log() { echo "setup-fresh-test: $*"; }
die() { echo "setup-fresh-test: FAIL $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (chroot, mounts)"
if [ -z "${VISIOND_SETUP_FRESH_NS:-}" ]; then
  exec unshare --mount --propagation private env VISIOND_SETUP_FRESH_NS=1 "$self" "$@"
fi
if [ ! -f "$BASE" ]; then
  command -v debootstrap >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
  mkdir -p build && rm -rf --one-file-system "$BASE.d"
  debootstrap --arch=amd64 bookworm "$BASE.d" "$MIRROR" >"$BASE.log" 2>&1 || die "debootstrap (log: $BASE.log)"
  tar -C "$BASE.d" -cf "$BASE" . && rm -rf --one-file-system "$BASE.d"
fi
rm -rf --one-file-system "$ROOT" && mkdir -p "$ROOT" && tar -C "$ROOT" -xf "$BASE"
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' "$MIRROR" "$MIRROR" "$MIRROR" >"$ROOT/etc/apt/sources.list"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d" && chmod 755 "$ROOT/usr/sbin/policy-rc.d"
mount -t proc proc "$ROOT/proc" && mount -t sysfs sysfs "$ROOT/sys" && mount --rbind /dev "$ROOT/dev"
for p in go npm node; do ! chroot "$ROOT" sh -c "command -v $p" >/dev/null || die "$p is already in the fresh root"; done
# The host's own certificate authorities (a machine behind a TLS proxy has one there): set-up's
# ca-certificates takes them in, and npm reaches its registry as it does from the host.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
fi
mkdir -p "$ROOT/src/visiond"
git ls-files -z | xargs -0 tar -cf - | tar -C "$ROOT/src/visiond" -xf -
t0=$(date +%s)
set +e
chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 bash -c 'cd /src/visiond && scripts/setup.sh' >build/setup-fresh/setup.log 2>&1
rc=$?
set -e
log "scripts/setup.sh exit $rc after $(( $(date +%s) - t0 )) s (log: build/setup-fresh/setup.log)"
tail -8 build/setup-fresh/setup.log | sed 's/^/    /'
[ "$rc" = 1 ] || die "want exit 1 (no Go), got $rc"
grep -q 'installing nodejs and npm' build/setup-fresh/setup.log || die "nodejs and npm were not installed by set-up"
chroot "$ROOT" sh -c 'command -v npm' >/dev/null || die "no npm after set-up"
for f in libonnxruntime.so.1 yolov8n.onnx media/vtest.h264.ts; do [ -s "$ROOT/src/visiond/third_party/$f" ] || die "third_party/$f not fetched"; done
grep -q "no Go ('go' is not on the PATH): get Go .* from https://go.dev/dl/" build/setup-fresh/setup.log || die "no clear message about Go"
log "PASS fresh Debian 12: apt packages, nodejs+npm from Debian, ONNX Runtime, model and media fetched; then: $(grep -m1 "^setup: no Go" build/setup-fresh/setup.log | cut -c1-120)..."
