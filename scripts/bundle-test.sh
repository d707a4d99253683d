#!/usr/bin/env bash
# The bundle where it was not built (make bundle-test, after make bundle; as root):
#   A. the amd64 tarball unpacked into /opt/visiond of an Ubuntu 24.04 (noble) amd64 minbase root
#      (debootstrap from archive.ubuntu.com: none of Debian 12's libraries, glibc 2.39):
#      1. none of the bundled FFmpeg/OpenCV sonames is in the root; the root's own ldd resolves
#         every library of libexec/visiond inside /opt/visiond (GStreamer's in lib/gstreamer/)
#      2. `visiond check` on the embedded demo config (run from a folder holding the demo's
#         third_party/: the model copied in from this checkout for the test, and the sample video)
#      3. `visiond run -print` on the embedded demo, in a network namespace of its own: person
#         detections counted on its output (at least 5, within 5 minutes), the bundled GStreamer
#         in its maps (the root has none), ONNX Runtime from /opt/visiond/lib, clean exit on SIGTERM
#      4. the system's GStreamer: libgstreamer1.0-0 and gstreamer1.0-plugins-base installed in the
#         root from noble; the launcher now picks the system's (its maps), and a camera of kind
#         gstreamer (videotestsrc, a system plugin) has frames analysed (/metrics)
#   B. the same tarball in an Ubuntu 22.04 (jammy, JetPack 6's user space) amd64 minbase root,
#      glibc 2.35: when the bundle's floor is above it, the launcher's refusal naming both
#      versions, and the binary started without the launcher failing in the dynamic loader on
#      the same version (the floor is what the loader needs, not a guess); else the check of A.
#   C. the arm64 tarball in a Debian 11 (bullseye) arm64 root (debootstrap --foreign, glibc
#      2.31): the launcher runs under this machine's sh with the root's own getconf under
#      qemu-user (no binfmt_misc here: that is a setting of the whole machine), so that the
#      version it reads is the root's; expected: the refusal naming both versions, and the
#      loader's own error under qemu. A floor at or below 2.31 would need a check and an
#      inference there: not written (the bookworm build's floor is above it). Then the arm64
#      bundle on the arm64 sysroot's own glibc (2.36) under qemu: `check`, and the loader's trace
#      shows every library but glibc's loaded from the bundle.
#   D. the arm64 tarball built against Debian 11 (SUITE=bullseye; floor 2.31 or less) in the same
#      bullseye root under qemu-user: `check`, and one worker inference with the bundle's ONNX
#      Runtime (the qemu make cross-test fetches: run it first).
# Roots are made once and kept as build/bundle-test/<suite>-<arch>.tar; each run unpacks afresh.
# Ubuntu's archive key is not packaged for Debian 12 (no ubuntu-keyring candidate): the Ubuntu
# roots are made with --no-check-gpg, over plain http. Every step is timed.
#
#   scripts/bundle-test.sh
set -euo pipefail

self=$(realpath "$0")
cd "$(dirname "$0")/.."
mkdir -p build && { [ -f build/go.mod ] || printf 'module visiond/build\n\n// Not code: the cross-build sysroot and packaging outputs. This go.mod keeps them out of ./...\n' >build/go.mod; }
UBUNTU_MIRROR=${VISIOND_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
DEBIAN_MIRROR=${VISIOND_DEBIAN_MIRROR:-http://deb.debian.org/debian}
TP=${VISIOND_THIRD_PARTY:-third_party}
WORK=build/bundle-test

log() { echo "bundle-test: $*"; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
passed=0 failed=0
pass() { echo "bundle-test: PASS $*"; passed=$((passed + 1)); }
fail() { echo "bundle-test: FAIL $*"; failed=$((failed + 1)); }
die() { echo "bundle-test: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, namespaces)"
if [ -z "${VISIOND_BUNDLE_TEST_NS:-}" ]; then # mounts and network namespaces die with this one
  exec unshare --mount --propagation private env VISIOND_BUNDLE_TEST_NS=1 "$self" "$@"
fi
T_AMD64=$(ls build/bundle/visiond-*-linux-amd64.tar.gz 2>/dev/null | head -1 || true)
T_ARM64=$(ls build/bundle/visiond-*-linux-arm64.tar.gz 2>/dev/null | head -1 || true)
[ -n "$T_AMD64" ] || die "no amd64 bundle: run make bundle first"
for f in "$TP/yolov8n.onnx" "$TP/media/vtest.h264.ts"; do [ -f "$f" ] || die "$f missing: run make setup"; done
command -v debootstrap >/dev/null || die "debootstrap missing (apt install debootstrap)"
mkdir -p "$WORK"
t_all=$(now)

# base SUITE ARCH: build/bundle-test/SUITE-ARCH.tar, a minbase root, made once.
base() {
  local suite=$1 arch=$2 tar=$WORK/$1-$2.tar t0 opts=()
  [ -f "$tar" ] && return 0
  t0=$(now)
  local d=$WORK/$suite-$arch.d
  rm -rf --one-file-system "$d"
  case "$suite" in
  bullseye) opts=(--foreign --keyring=/usr/share/keyrings/debian-archive-keyring.gpg) mirror=$DEBIAN_MIRROR ;;
  *) opts=(--no-check-gpg) mirror=$UBUNTU_MIRROR ;;
  esac
  log "debootstrap --arch=$arch --variant=minbase ${opts[*]} $suite ($mirror)"
  debootstrap --arch="$arch" --variant=minbase "${opts[@]}" "$suite" "$d" "$mirror" \
    /usr/share/debootstrap/scripts/"$( [ "$suite" = bullseye ] && echo sid || echo gutsy)" >"$tar.log" 2>&1 ||
    { tail -20 "$tar.log" >&2; die "debootstrap $suite $arch failed (log: $tar.log)"; }
  tar -C "$d" -cf "$tar.tmp" .
  mv "$tar.tmp" "$tar"
  rm -rf --one-file-system "$d"
  log "root $suite $arch: $tar ($(du -h "$tar" | cut -f1)) made in $(took "$t0")"
}

# fresh SUITE ARCH TARBALL: a new root from the base with the bundle in /opt/visiond; prints its path.
fresh() {
  local root=$WORK/root-$1-$2
  for m in dev sys proc; do ! mountpoint -q "$root/$m" || umount -R "$root/$m"; done
  rm -rf --one-file-system "$root"
  mkdir -p "$root/opt/visiond"
  tar -C "$root" -xf "$WORK/$1-$2.tar"
  tar -C "$root/opt/visiond" --strip-components=1 -xzf "$3"
  # /proc as on any system: the loader expands the binary's $ORIGIN from /proc/self/exe (without
  # it the RPATH is dropped and nothing bundled is found), and the workers are /proc/self/exe.
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --rbind /dev "$root/dev"
  echo "$root"
}

glibc_of() { # ROOT: the glibc version of a root, from its libc's own banner
  strings "$(ls "$1"/usr/lib/*-linux-gnu/libc.so.6 "$1"/lib/*-linux-gnu/libc.so.6 2>/dev/null | head -1)" |
    sed -n 's/^GNU C Library.*version \([0-9.]*\)\.$/\1/p' | head -1
}

floor_of() { tar -xzOf "$1" --wildcards '*/share/visiond/glibc-floor'; }
ver_lt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }

# A demo folder in ROOT: the embedded demo's third_party/ (model for this test only: AGPL).
demo_dir() {
  install -D -m 0644 "$TP/yolov8n.onnx" "$1/root/demo/third_party/yolov8n.onnx"
  install -D -m 0644 "$TP/media/vtest.h264.ts" "$1/root/demo/third_party/media/vtest.h264.ts"
}

# start_daemon ROOT LOG ARGS...: the launcher with ARGS in the root's /root/demo, in a network
# namespace of its own (the demo's ports are fixed: 4222, 8080, 8554); sets $daemon.
start_daemon() {
  local root=$1 out=$2
  shift 2
  : >"$out" # now, not in the background job: the caller reads it next
  unshare --net --fork sh -c 'ip link set lo up && exec chroot "$0" sh -c "cd /root/demo && exec /opt/visiond/bin/visiond \"\$@\"" visiond "$@"' \
    "$root" "$@" >"$out" 2>&1 &
  daemon=$!
}
# main_pid: unshare's child, exec'd through chroot, sh and the launcher into libexec/visiond.
main_pid() { pgrep -P "$daemon" -x visiond | head -1; }
stop_daemon() { # $daemon: SIGTERM the daemon, wait; sets $rc to its exit status
  local pid
  pid=$(pgrep -P "$daemon" | head -1 || true)
  [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true
  rc=0
  wait "$daemon" || rc=$?
}

# --- A. Ubuntu 24.04 amd64 ---
t0=$(now)
base noble amd64
base jammy amd64
[ -z "$T_ARM64" ] || base bullseye arm64
log "roots ready ($(took "$t0"))"

t0=$(now)
R=$(fresh noble amd64 "$T_AMD64")
demo_dir "$R"
FLOOR=$(floor_of "$T_AMD64")
log "noble root: $(. "$R/etc/os-release" && echo "$PRETTY_NAME"), glibc $(glibc_of "$R"); bundle $(basename "$T_AMD64"), glibc floor $FLOOR ($(took "$t0"))"

# 1. No Debian library there; the root's loader finds all of ours.
t0=$(now)
present=
for so in libopencv_core.so.406 libavcodec.so.59 libgstreamer-1.0.so.0 libstdc++.so.6; do
  ls "$R"/usr/lib/x86_64-linux-gnu/$so >/dev/null 2>&1 && present="$present $so"
done
lddout=$(chroot "$R" env LD_LIBRARY_PATH=/opt/visiond/lib/gstreamer:/opt/visiond/lib/glib ldd /opt/visiond/libexec/visiond)
n_all=$(grep -c '=>' <<<"$lddout")
outside=$(grep '=>' <<<"$lddout" | grep -vE ' => /opt/visiond/(libexec/\.\./)?lib/' |
  grep -vE '^\s*(libc|libm|libpthread|libdl|librt|libresolv)\.so' || true)
if [ "$present" = " libstdc++.so.6" ] && ! grep -q 'not found' <<<"$lddout" && [ -z "$outside" ]; then
  pass "noble has none of the bundle's FFmpeg/OpenCV/GStreamer (its own libstdc++ only); its ldd resolves $n_all libraries, all inside /opt/visiond but glibc's ($(took "$t0"))"
else
  fail "noble: present:$present; not found: $(grep 'not found' <<<"$lddout" | tr -s ' \t' ' ' | tr '\n' ';'); outside /opt/visiond: $(tr -s ' \t' ' ' <<<"$outside" | tr '\n' ';')"
fi

# 2. check.
t0=$(now)
if out=$(chroot "$R" sh -c 'cd /root/demo && /opt/visiond/bin/visiond check' 2>&1) && grep -q ': ok (1 cameras, 1 enabled)' <<<"$out"; then
  pass "noble: visiond check: $out ($(took "$t0"))"
else
  fail "noble: visiond check: $out"
fi

# 3. The demo: person detections.
t0=$(now)
start_daemon "$R" "$WORK/noble-run.log" run -print
want=5 deadline=$(($(date +%s) + 300))
while [ "$(grep -c '/sample frame .* person [01]\.' "$WORK/noble-run.log" 2>/dev/null || true)" -lt "$want" ] && [ "$(date +%s)" -lt "$deadline" ] &&
  kill -0 "$daemon" 2>/dev/null; do
  sleep 2
done
t_first=$(took "$t0")
persons=$(grep -c '/sample frame .* person [01]\.' "$WORK/noble-run.log" || true)
pid=$(main_pid || true)
maps=
[ -z "$pid" ] || maps=$(cat "/proc/$pid/maps" 2>/dev/null || true)
workers=$( [ -z "$pid" ] || pgrep -P "$pid" -x visiond | head -1 || true)
wmaps=
[ -z "$workers" ] || wmaps=$(cat "/proc/$workers/maps" 2>/dev/null || true)
stop_daemon
Rabs=$(realpath "$R") # maps name files as this machine sees them
gst_lib=$(grep -o '/[^ ]*libgstreamer-1.0.so.0' <<<"$maps" | head -1 | sed "s|^$Rabs||" || true)
glib_lib=$(grep -o '/[^ ]*libglib-2.0.so.0' <<<"$maps" | head -1 | sed "s|^$Rabs||" || true)
ort_lib=$(grep -o '/[^ ]*libonnxruntime.so.1' <<<"$wmaps" | head -1 | sed "s|^$Rabs||" || true)
if [ "$persons" -ge "$want" ] && [ "$rc" = 0 ] && [ "$gst_lib" = /opt/visiond/lib/gstreamer/libgstreamer-1.0.so.0 ] && [ "$glib_lib" = /opt/visiond/lib/glib/libglib-2.0.so.0 ] && [ "$ort_lib" = /opt/visiond/lib/libonnxruntime.so.1 ]; then
  pass "noble: visiond run -print: $persons person detections ($want within $t_first), e.g. '$(grep -m1 '/sample frame .* person [01]\.' "$WORK/noble-run.log")'; GStreamer $gst_lib, GLib $glib_lib, worker's ONNX Runtime $ort_lib; exit $rc on SIGTERM ($(took "$t0"))"
else
  tail -20 "$WORK/noble-run.log" | sed 's/^/    /'
  fail "noble: visiond run: $persons person detections (want $want), exit $rc, GStreamer '${gst_lib}', GLib '${glib_lib}', worker ONNX Runtime '${ort_lib}' (log: $WORK/noble-run.log)"
fi

# 4. The system's GStreamer, with a camera of kind gstreamer on a system plugin.
t0=$(now)
cp /etc/resolv.conf "$R/etc/resolv.conf"
echo "deb $UBUNTU_MIRROR noble main" >"$R/etc/apt/sources.list"
if chroot "$R" apt-get update -q >"$WORK/noble-apt.log" 2>&1 &&
  chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libgstreamer1.0-0 gstreamer1.0-plugins-base >>"$WORK/noble-apt.log" 2>&1; then
  log "noble: installed $(chroot "$R" dpkg-query -W -f='${Package} ${Version}\n' libgstreamer1.0-0 gstreamer1.0-plugins-base | tr '\n' ' ')($(took "$t0"))"
  cat >"$R/root/demo/gst.yaml" <<'EOF'
# bundle-test: a camera of kind gstreamer on the system's videotestsrc (gstreamer1.0-plugins-base).
site: bundletest
workers:
  model: third_party/yolov8n.onnx
  pools: [{count: 1, provider: cpu}]
cameras:
  - id: gst
    kind: gstreamer
    fps: 5
    pipeline: >-
      videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=10/1 !
      videoconvert ! video/x-raw,format=BGR ! appsink drop=true max-buffers=1
EOF
  t0=$(now)
  start_daemon "$R" "$WORK/noble-gst.log" run -config gst.yaml
  analysed=0 deadline=$(($(date +%s) + 240))
  while [ "$analysed" -lt 10 ] && [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$daemon" 2>/dev/null; do
    sleep 3
    pid=$(main_pid || true)
    [ -n "$pid" ] || continue
    analysed=$(nsenter --net="/proc/$pid/ns/net" curl -sf http://127.0.0.1:8080/metrics 2>/dev/null |
      awk '/^visiond_camera_frames_analysed_total\{.*camera="gst"/ {print int($2)}' | head -1)
    analysed=${analysed:-0}
  done
  maps=
  [ -z "$pid" ] || maps=$(cat "/proc/$pid/maps" 2>/dev/null || true)
  chosen=$( [ -z "$pid" ] || tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^VISIOND_BUNDLE_GSTREAMER=//p')
  stop_daemon
  gst_lib=$(grep -o '/[^ ]*libgstreamer-1.0.so.0[^ ]*' <<<"$maps" | head -1 | sed "s|^$Rabs||" || true)
  glib_lib=$(grep -o '/[^ ]*libglib-2.0.so.0[^ ]*' <<<"$maps" | head -1 | sed "s|^$Rabs||" || true)
  if [ "$analysed" -ge 10 ] && [ "$chosen" = system ] && [[ $gst_lib == /usr/lib/x86_64-linux-gnu/* ]] && [[ $glib_lib == /usr/lib/x86_64-linux-gnu/* ]] && [ "$rc" = 0 ]; then
    pass "noble with its GStreamer: the launcher chose '$chosen' ($gst_lib, $glib_lib); a kind gstreamer camera on the system's videotestsrc: $analysed frames analysed; exit $rc ($(took "$t0"))"
  else
    tail -20 "$WORK/noble-gst.log" | sed 's/^/    /'
    fail "noble with its GStreamer: chose '$chosen', libgstreamer '$gst_lib', GLib '$glib_lib', $analysed frames analysed (want 10), exit $rc (log: $WORK/noble-gst.log)"
  fi
else
  tail -5 "$WORK/noble-apt.log"
  fail "noble: apt-get install of GStreamer failed (log: $WORK/noble-apt.log)"
fi

# 5. The .deb of the same tree, installed with dpkg in place of the unpacked tarball.
t0=$(now)
DEB_AMD64=$(ls build/bundle/visiond-bundle_*_amd64.deb 2>/dev/null | head -1 || true)
if [ -z "$DEB_AMD64" ]; then
  fail "noble: no build/bundle/visiond-bundle_*_amd64.deb (make bundle)"
else
  rm -rf "$R/opt/visiond"
  cp "$DEB_AMD64" "$R/root/"
  if chroot "$R" dpkg -i "/root/$(basename "$DEB_AMD64")" >"$WORK/noble-dpkg.log" 2>&1 &&
    out=$(chroot "$R" sh -c 'cd /root/demo && visiond check' 2>&1) && grep -q ': ok (1 cameras, 1 enabled)' <<<"$out" &&
    [ "$(readlink "$R/usr/bin/visiond")" = /opt/visiond/bin/visiond ]; then
    pass "noble: dpkg -i $(basename "$DEB_AMD64") (Depends: $(dpkg-deb -f "$DEB_AMD64" Depends)); /usr/bin/visiond -> /opt/visiond/bin/visiond; visiond check: $out ($(took "$t0"))"
  else
    tail -5 "$WORK/noble-dpkg.log" | sed 's/^/    /'
    fail "noble: the .deb: ${out:-dpkg -i failed} (log: $WORK/noble-dpkg.log)"
  fi
fi

# --- B. Ubuntu 22.04 amd64 (JetPack 6's user space) ---
t0=$(now)
R=$(fresh jammy amd64 "$T_AMD64")
demo_dir "$R"
have=$(glibc_of "$R")
if ver_lt "$have" "$FLOOR"; then
  set +e
  out=$(chroot "$R" sh -c 'cd /root/demo && /opt/visiond/bin/visiond check' 2>&1)
  rc=$?
  direct=$(chroot "$R" env LD_LIBRARY_PATH=/opt/visiond/lib/gstreamer:/opt/visiond/lib/glib /opt/visiond/libexec/visiond check 2>&1)
  set -e
  if [ "$rc" = 1 ] && grep -qF "glibc $have, but this bundle needs glibc $FLOOR or newer" <<<"$out" && grep -qF "GLIBC_$FLOOR' not found" <<<"$direct"; then
    pass "jammy (glibc $have): the launcher refuses (exit $rc): '$out'; without it the loader: '$(grep -m1 "GLIBC_$FLOOR" <<<"$direct")' ($(took "$t0"))"
  else
    fail "jammy (glibc $have, floor $FLOOR): launcher exit $rc: '$out'; binary alone: '$direct'"
  fi
else
  if out=$(chroot "$R" sh -c 'cd /root/demo && /opt/visiond/bin/visiond check' 2>&1) && grep -q ': ok ' <<<"$out"; then
    pass "jammy (glibc $have >= floor $FLOOR): visiond check: $out ($(took "$t0"))"
  else
    fail "jammy (glibc $have >= floor $FLOOR): visiond check: $out"
  fi
fi

# --- C. Debian 11 arm64 under qemu-user ---
if [ -z "$T_ARM64" ]; then
  fail "no arm64 bundle (make bundle ARCH=arm64): the bullseye step did not run"
else
  t0=$(now)
  R=$(fresh bullseye arm64 "$T_ARM64")
  have=$(glibc_of "$R")
  AFLOOR=$(floor_of "$T_ARM64")
  qemu=${VISIOND_QEMU_AARCH64:-$(command -v qemu-aarch64-static || true)}
  [ -n "$qemu" ] || die "qemu-aarch64-static missing (apt install qemu-user-static)"
  if ver_lt "$have" "$AFLOOR"; then
    shim=$WORK/arm64-tools
    mkdir -p "$shim"
    printf '#!/bin/sh\nexec %s -L %s %s/usr/bin/getconf "$@"\n' "$(realpath "$qemu")" "$(realpath "$R")" "$(realpath "$R")" >"$shim/getconf"
    chmod 755 "$shim/getconf"
    seen=$("$shim/getconf" GNU_LIBC_VERSION)
    set +e
    out=$(PATH="$(realpath "$shim"):$PATH" sh "$R/opt/visiond/bin/visiond" check 2>&1)
    rc=$?
    direct=$("$qemu" -L "$R" -E LD_LIBRARY_PATH=/opt/visiond/lib/gstreamer:/opt/visiond/lib/glib "$R/opt/visiond/libexec/visiond" check 2>&1)
    set -e
    if [ "$seen" = "glibc $have" ] && [ "$rc" = 1 ] && grep -qF "glibc $have, but this bundle needs glibc $AFLOOR or newer" <<<"$out" &&
      grep -q "GLIBC_2\.[0-9]*' not found" <<<"$direct"; then
      pass "bullseye arm64 (the root's getconf under qemu: '$seen'): the launcher refuses (exit $rc): '$out'; without it the loader: '$(grep -m1 'not found' <<<"$direct")' ($(took "$t0"))"
    else
      fail "bullseye arm64 (getconf '$seen', floor $AFLOOR): launcher exit $rc: '$out'; binary alone: '$direct'"
    fi
  else
    fail "bullseye arm64: the floor $AFLOOR is not above the root's glibc $have: the check and inference there are not written (docs/bundle.md)"
  fi
fi

# C2. The arm64 bundle where its floor holds: the sysroot's glibc (Debian 12's 2.36) under
# qemu-aarch64 -L, the bundle's libraries through its RPATH: `check` passes, and the loader's own
# trace (LD_DEBUG=libs) shows every library but glibc's initialised from the bundle. The sysroot
# holds Debian's copies of them too: the trace, not their absence, is the assertion here.
SYSROOT=${VISIOND_SYSROOT_ARM64:-build/sysroot-arm64}
if [ -n "$T_ARM64" ] && [ -f "$SYSROOT/.visiond-sysroot" ]; then
  t0=$(now)
  B=$(realpath -m "$WORK/arm64-bundle")
  rm -rf "$B" && mkdir -p "$B"
  tar -C "$B" --strip-components=1 -xzf "$T_ARM64"
  set +e
  out=$("$qemu" -cpu cortex-a76 -L "$(realpath "$SYSROOT")" -E LD_LIBRARY_PATH="$B/lib/gstreamer:$B/lib/glib" \
    -E LD_DEBUG=libs -E LD_DEBUG_OUTPUT="$WORK/arm64-ld" "$B/libexec/visiond" check 2>&1)
  rc=$?
  set -e
  inits=$(cat "$WORK"/arm64-ld.* 2>/dev/null | sed -n 's/.*calling init: //p' | sort -u)
  rm -f "$WORK"/arm64-ld.*
  ours=$(grep -c "^$B/" <<<"$inits" || true)
  others=$(grep -v "^$B/" <<<"$inits" | grep -vE '/(ld-linux-aarch64|libc|libm|libpthread|libdl|librt|libresolv)\.so' | tr '\n' ' ' || true)
  if [ "$rc" = 0 ] && grep -q ': ok ' <<<"$out" && [ "$ours" -ge 200 ] && [ -z "$others" ]; then
    pass "arm64 bundle on the sysroot's glibc $(glibc_of "$SYSROOT") under qemu: check: $out; $ours libraries initialised from the bundle, none but glibc's from elsewhere ($(took "$t0"))"
  else
    fail "arm64 bundle on the sysroot's glibc: exit $rc: $out; $ours from the bundle; from elsewhere: $others"
  fi
else
  fail "arm64 bundle on the sysroot's glibc: no arm64 bundle or no sysroot at $SYSROOT (VISIOND_SYSROOT_ARM64)"
fi

# D. The arm64 bundle built against Debian 11 (make bundle ARCH=arm64 SUITE=bullseye: the one for
# JetPack 6): its floor is at or below the bullseye root's glibc, so there, under qemu-user with
# the root as its / (-L), the binary through its RPATH runs `check` and one worker inference on
# the sample image with the bundle's own ONNX Runtime (scripts/worker-smoke.py: a person found).
# GStreamer: the minbase root has none, so the bundled fallback folders are on its library path,
# as the launcher would set them (the launcher itself cannot exec an arm64 binary here: no
# binfmt_misc). The emulator is the one make cross-test fetches (ONNX Runtime crashes under
# Debian 12's qemu 7.2: scripts/cross-test.sh).
T_ARM64B=$(ls build/bundle/visiond-*-linux-arm64-bullseye.tar.gz 2>/dev/null | head -1 || true)
QEMU_ORT=${VISIOND_QEMU_AARCH64:-build/qemu-backports/usr/bin/qemu-aarch64}
if [ -z "$T_ARM64B" ]; then
  fail "no Debian 11 arm64 bundle (make bundle ARCH=arm64 SUITE=bullseye)"
elif [ ! -x "$QEMU_ORT" ]; then
  fail "$QEMU_ORT missing: make cross-test fetches the qemu that ONNX Runtime runs under"
else
  t0=$(now)
  R=$(fresh bullseye arm64 "$T_ARM64B")
  have=$(glibc_of "$R")
  BFLOOR=$(floor_of "$T_ARM64B")
  if ver_lt "$have" "$BFLOOR"; then
    fail "Debian 11 arm64 bundle: its floor $BFLOOR is above the bullseye root's glibc $have"
  else
    RR=$(realpath "$R")
    Q=("$(realpath "$QEMU_ORT")" -cpu cortex-a76 -L "$RR" -E LD_LIBRARY_PATH=/opt/visiond/lib/gstreamer:/opt/visiond/lib/glib)
    set +e
    out=$("${Q[@]}" "$RR/opt/visiond/libexec/visiond" check 2>&1)
    rc=$?
    set -e
    if [ "$rc" != 0 ] || ! grep -q ': ok ' <<<"$out"; then
      fail "Debian 11 arm64 bundle in the bullseye root (glibc $have, floor $BFLOOR): check exit $rc: $out"
    elif scripts/worker-smoke.py --image "$TP/media/messi5.jpg" --model "$TP/yolov8n.onnx" \
      --library "$RR/opt/visiond/lib/libonnxruntime.so.1" --expect person --json "$WORK/arm64-bullseye.json" \
      -- "${Q[@]}" "$RR/opt/visiond/libexec/visiond" >"$WORK/arm64-bullseye-smoke.log" 2>&1; then
      pass "Debian 11 arm64 bundle in the bullseye root (glibc $have, floor $BFLOOR) under qemu: check ($out) and one worker inference: $(grep -c '^  [a-z]' "$WORK/arm64-bullseye-smoke.log" || true) detections, a person among them ($(took "$t0"))"
    else
      tail -20 "$WORK/arm64-bullseye-smoke.log" >&2
      fail "Debian 11 arm64 bundle in the bullseye root: the worker inference ($WORK/arm64-bullseye-smoke.log)"
    fi
  fi
fi

log "total $(took "$t_all")"
echo "bundle-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
