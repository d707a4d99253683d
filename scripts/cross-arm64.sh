#!/usr/bin/env bash
# Cross-build visiond for linux/arm64 with cgo (OpenCV 4.6 or 4.5 through gocv, FFmpeg's libavcodec,
# libavutil and libswscale) on a Debian 12 amd64 box, and fetch ONNX Runtime's arm64 library.
#
#   scripts/cross-arm64.sh                                  (make arm64)
#   VISIOND_SYSROOT_SUITE=bullseye scripts/cross-arm64.sh   (make arm64 SUITE=bullseye)
#
# Two library generations: bookworm (Debian 12: FFmpeg 5.1, OpenCV 4.6, GStreamer 1.22, glibc
# 2.36), the default, into build/sysroot-arm64 and bin/linux-arm64/visiond; and bullseye
# (Debian 11: FFmpeg 4.3, OpenCV 4.5.1, GStreamer 1.18, glibc 2.31), the nearest stand-in that
# Debian's mirrors hold for JetPack 6's Ubuntu 22.04 (FFmpeg 4.4, OpenCV 4.5.4, GStreamer 1.20,
# glibc 2.35), into build/sysroot-arm64-bullseye and bin/linux-arm64-bullseye/visiond.
#
# What it does, each step skipped when its result is already there:
#   1. host tools from apt: debootstrap, gcc/g++-aarch64-linux-gnu, pkg-config, dpkg-dev
#   2. an arm64 Debian sysroot of that suite (git-ignored, about 1.2 GB):
#      `debootstrap --foreign --variant=minbase --merged-usr --include=<the -dev packages>`
#      (merged /usr: debootstrap's default for both suites, said so that it stays) downloads the
#      packages and their dependencies; every downloaded package is then extracted into the
#      sysroot (no maintainer script runs, so nothing arm64 is executed). Absolute symlinks are
#      made relative so that they resolve inside the sysroot, the BLAS/LAPACK alternatives that
#      update-alternatives would have made are linked by hand, and every package's shlibs and
#      symbols files are collected in build/sysroot-arm64/DEBIAN for dpkg-shlibdeps
#      (scripts/deb.sh). A stamp file records what the sysroot holds; a changed package list
#      rebuilds it.
#   3. ONNX Runtime's libonnxruntime.so.1 for linux/arm64 from the npm package onnxruntime-node
#      (the same release as scripts/setup.sh's x64 library), checked by sha256, into
#      third_party/linux-arm64/
#   4. scripts/build.sh (the shipped flags) with CGO_ENABLED=1 GOARCH=arm64, the cross compilers pointed at the sysroot and
#      pkg-config reading the sysroot's .pc files: bin/linux-arm64[-bullseye]/visiond
#
# Environment: VISIOND_SYSROOT_SUITE (bookworm, the default, or bullseye), VISIOND_SYSROOT_ARM64
# (default build/sysroot-arm64, or build/sysroot-arm64-bullseye), VISIOND_DEBIAN_MIRROR
# (default http://deb.debian.org/debian).
set -euo pipefail

cd "$(dirname "$0")/.."
# build/ (git-ignored) holds sysroots and chroots: a go.mod there keeps it out of ./... patterns.
mkdir -p build && { [ -f build/go.mod ] || printf 'module visiond/build\n\n// Not code: the cross-build sysroot and packaging outputs. This go.mod keeps them out of ./...\n' >build/go.mod; }
export PATH="/usr/local/go/bin:$PATH"
GO=${GO:-go}
MIRROR=${VISIOND_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=${VISIOND_SYSROOT_SUITE:-bookworm}
# Each suite its own sysroot and binary, so that a bullseye build leaves the bookworm one be.
. scripts/cross-env.sh
cross_suite "$SUITE" || exit 2
SYSROOT=${VISIOND_SYSROOT_ARM64:-build/sysroot-arm64$CROSS_SUFFIX}
MULTIARCH=aarch64-linux-gnu
TP=${VISIOND_THIRD_PARTY:-third_party}
OUT=bin/linux-arm64$CROSS_SUFFIX/visiond
ORT_VERSION=1.29.0
ORT_ARM64_SHA256=a27d21126db312aa8f02f3d5eaebe466e991f51f469882e6d0407d5a8b64afda
ORT_ARM64=$TP/linux-arm64/libonnxruntime.so.1

# What gocv v0.31.0 (pkg-config opencv4, every module) and sources/decoder.go (pkg-config
# libavcodec libavutil libswscale) link against, plus the C and C++ runtimes. GStreamer's
# libraries come in as dependencies of OpenCV's videoio module.
SYSROOT_PACKAGES=libc6-dev,libstdc++-$CROSS_GCC-dev,libopencv-dev,libavcodec-dev,libavutil-dev,libswscale-dev
STAMP="$SYSROOT/.visiond-sysroot"
STAMP_TEXT="suite=$SUITE arch=arm64 variant=minbase include=$SYSROOT_PACKAGES layout=2"

log() { echo "cross-arm64: $*"; }
sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# 1. Host tools.
t0=$(now)
need=()
for p in debootstrap gcc-aarch64-linux-gnu g++-aarch64-linux-gnu pkg-config dpkg-dev debian-archive-keyring; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing host tools: ${need[*]}"
  sudo_ apt-get update -q
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
log "host tools: $(took "$t0")"

# 2. The sysroot.
t0=$(now)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ]; then
  log "sysroot: cached in $SYSROOT ($(took "$t0"))"
else
  [ "$(id -u)" = 0 ] || { echo "cross-arm64: building the sysroot needs root (debootstrap): run as root or with sudo" >&2; exit 1; }
  tmp="$SYSROOT.tmp"
  rm -rf "$tmp" "$SYSROOT"
  mkdir -p "$(dirname "$SYSROOT")"
  log "sysroot: debootstrap --arch=arm64 --foreign --variant=minbase $SUITE ($MIRROR), with $SYSROOT_PACKAGES"
  debootstrap --arch=arm64 --foreign --variant=minbase --merged-usr --include="$SYSROOT_PACKAGES" \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg "$SUITE" "$tmp" "$MIRROR" >"$tmp.log" 2>&1 ||
    { tail -20 "$tmp.log" >&2; echo "cross-arm64: debootstrap failed (whole log: $tmp.log)" >&2; exit 1; }
  t1=$(now)
  log "sysroot: debootstrap (download, first stage) took $(took "$t0")"
  # merged /usr: /bin, /sbin and /lib are symlinks into /usr; keep them so while extracting.
  for d in bin sbin lib; do
    [ -L "$tmp/$d" ] || { echo "cross-arm64: $tmp/$d is not a symlink (merged /usr expected)" >&2; exit 1; }
  done
  debs=("$tmp"/var/cache/apt/archives/*.deb)
  log "sysroot: extracting ${#debs[@]} packages"
  mkdir -p "$tmp/DEBIAN" "$tmp.ctrl"
  : >"$tmp/DEBIAN/shlibs"
  : >"$tmp/DEBIAN/symbols"
  : >"$tmp/.visiond-packages"
  for deb in "${debs[@]}"; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$tmp"
    rm -rf "$tmp.ctrl"/*
    dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$tmp.ctrl"
    [ ! -f "$tmp.ctrl/shlibs" ] || cat "$tmp.ctrl/shlibs" >>"$tmp/DEBIAN/shlibs"
    [ ! -f "$tmp.ctrl/symbols" ] || cat "$tmp.ctrl/symbols" >>"$tmp/DEBIAN/symbols"
    dpkg-deb --show --showformat='${Package} ${Version} ${Architecture}\n' "$deb" >>"$tmp/.visiond-packages"
  done
  rm -rf "$tmp.ctrl"
  # Absolute symlinks (libm.so -> /lib/...) would point into the build machine: make them relative.
  find "$tmp" -type l -lname '/*' -print0 | while IFS= read -r -d '' l; do
    ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$tmp$(readlink "$l")")" "$l"
  done
  # What update-alternatives makes at configure time (OpenCV's core needs libblas.so.3 and
  # liblapack.so.3; the reference implementations are the ones debootstrap picked).
  for alt in blas/libblas.so.3 lapack/liblapack.so.3; do
    [ -e "$tmp/usr/lib/$MULTIARCH/$alt" ] || { echo "cross-arm64: $alt missing from the sysroot" >&2; exit 1; }
    ln -sfn "$alt" "$tmp/usr/lib/$MULTIARCH/$(basename "$alt")"
  done
  rm -f "$tmp"/var/cache/apt/archives/*.deb
  echo "$STAMP_TEXT" >"$tmp/.visiond-sysroot"
  mv "$tmp.log" "$tmp/.visiond-debootstrap.log"
  mv "$tmp" "$SYSROOT"
  log "sysroot: extraction took $(took "$t1"); $SYSROOT: $(du -sh "$SYSROOT" | cut -f1), $(wc -l <"$SYSROOT/.visiond-packages") packages; total $(took "$t0")"
fi

# 3. ONNX Runtime for linux/arm64.
t0=$(now)
if ! echo "$ORT_ARM64_SHA256  $ORT_ARM64" | sha256sum -c --status 2>/dev/null; then
  log "fetching ONNX Runtime $ORT_VERSION for linux/arm64 (npm onnxruntime-node)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "onnxruntime-node@$ORT_VERSION" >/dev/null)
  tar -xzf "$work"/onnxruntime-node-*.tgz -C "$work" package/bin/napi-v6/linux/arm64/libonnxruntime.so.1
  mkdir -p "$(dirname "$ORT_ARM64")"
  cp "$work/package/bin/napi-v6/linux/arm64/libonnxruntime.so.1" "$ORT_ARM64"
  echo "$ORT_ARM64_SHA256  $ORT_ARM64" | sha256sum -c
  rm -rf "$work"
fi
log "onnxruntime arm64: $ORT_ARM64 ($(took "$t0"))"

# 4. The build.
t0=$(now)
cross_env "$SYSROOT"
mkdir -p "$(dirname "$OUT")"
GO="$GO" scripts/build.sh "$OUT"
aarch64-linux-gnu-readelf -h "$OUT" | grep -q 'Machine:.*AArch64' || { echo "cross-arm64: $OUT is not an arm64 binary" >&2; exit 1; }
glibc=$(aarch64-linux-gnu-readelf -V "$OUT" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
log "build: $OUT ($(du -h "$OUT" | cut -f1); asks for $glibc at most, the sysroot has libc6 $(awk '$1 == "libc6" { print $2 }' "$SYSROOT/.visiond-packages")) in $(took "$t0")"
