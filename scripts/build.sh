#!/usr/bin/env bash
# Build the visiond binary as it is shipped (make build, scripts/cross-arm64.sh):
#   scripts/build.sh OUT       (GOARCH, CC, CXX and PKG_CONFIG_* from the environment)
#
#   - position-independent (-buildmode=pie), as Debian builds its binaries;
#   - linked against the OpenCV modules the code uses and no others: gocv's cgo directives
#     link every module pkg-config lists, highgui among them, which pulls in Qt 5 and OpenGL
#     (on a fresh Debian 12: 341 packages, 13 of them Qt, 202 MB to download, against 246
#     packages, no Qt, 165 MB with the four modules below). With gocv's customenv build tag the flags
#     come from here: OpenCV's include path from pkg-config, the modules in $OPENCV_MODULES,
#     and every C and C++ function in its own section so that the linker drops gocv's unused
#     wrappers (highgui, dnn, ...) with what they reference (-Wl,--gc-sections). A wrapper the
#     code calls into a module not listed fails the link, it does not fail at run time;
#   - hardened C: -D_FORTIFY_SOURCE=2 -O2 -fstack-protector-strong -fstack-clash-protection,
#     and full RELRO with immediate binding (-Wl,-z,relro,-z,now), as dpkg-buildflags'
#     hardening=+all sets them (hardening-check /usr/bin/visiond: all yes but CFI, which the
#     Go code has not).
# The tests (go test) keep gocv's default flags (every module): only the shipped binary is slim.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/build.sh OUT}
GO=${GO:-go}
# What the code calls: grep -rhoE 'gocv\.[A-Za-z]+' --include=*.go (Mat, CvtColor, Resize,
# Rectangle, PutText: core and imgproc; IMRead, IMEncode: imgcodecs; VideoCapture: videoio).
OPENCV_MODULES=${OPENCV_MODULES:-videoio imgcodecs imgproc core}

opencv_cflags=$(pkg-config --cflags opencv4) || { echo "build: pkg-config finds no opencv4 (apt install libopencv-dev)" >&2; exit 1; }
libs=
for m in $OPENCV_MODULES; do libs="$libs -lopencv_$m"; done
cflags="-g -O2 -fstack-protector-strong -fstack-clash-protection -ffunction-sections -fdata-sections"
export CGO_CPPFLAGS="$opencv_cflags -D_FORTIFY_SOURCE=2"
export CGO_CFLAGS="$cflags"
export CGO_CXXFLAGS="$cflags"
export CGO_LDFLAGS="-Wl,-z,relro,-z,now -Wl,--gc-sections$libs"
mkdir -p "$(dirname "$OUT")"
$GO build -tags customenv -buildmode=pie -o "$OUT" ./cmd/visiond
