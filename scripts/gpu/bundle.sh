#!/usr/bin/env bash
# The amd64 bundle on the GPU machine (Ubuntu 24.04, none of Debian 12's libraries; issue 24,
# item 3), in one call after the parts were carried over:
#   /tmp/bundle/part*    the tarball of make bundle, split (cat part* | tar -xz)
#   /tmp/gpustage/       ONNX Runtime's CUDA build, staged by scripts/gpu/stage.sh
#   third_party/yolov8n.onnx, third_party/media/ (carried), build/devrun/sources.test
# It runs, each into $OUT/bundle-gpu.txt with its command:
#   1. the machine: OS, glibc, GPU; that none of the bundled FFmpeg/OpenCV sonames is on it;
#      the root's own ldd resolving the bundled binary inside the bundle (glibc's aside)
#   2. bin/visiond check, then the embedded demo (the built-in sample camera) for 60 s with
#      -print: person detections counted; the CPU provider, the bundle's own ONNX Runtime
#   3. the same demo config with provider cuda (workers.library: the staged GPU build, through
#      ONNXRUNTIME_SHARED_LIBRARY_PATH, which the launcher leaves alone) and then also
#      decoder: cuda (NVDEC through the bundled libavcodec): detections, the worker's provider
#   4. the FFmpeg NVDEC tests of package sources (TestCameraDecoderCUDA,
#      TestDecoderCUDAMatchesCPU) against the bundle's libraries: the primary-context flag
#      of sources/decoder.go (25db1da) on a GPU
#   source /tmp/gpustage/activate.sh is not used for the bundle (it would put the staged
#   libraries first); only its unpacking, and /usr/local/cuda/lib64 for the CUDA provider.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/vb
R=$OUT/bundle-gpu.txt
repo=$(pwd)
say() { echo "$*" | tee -a "$R"; }
run() { say "\$ $*"; "$@" 2>&1 | tee -a "$R"; say "(exit ${PIPESTATUS[0]})"; }

cat /tmp/bundle/part* | tar -xz -C /tmp/vb || { say "no bundle parts in /tmp/bundle"; exit 1; }
B=$(ls -d /tmp/vb/visiond-*-linux-amd64)
( . /tmp/gpustage/activate.sh ) || { say "gpustage: parts missing"; exit 1; }
GPU_ORT=/tmp/gpustage/lib/libonnxruntime.so.1

say "## 1. the machine"
run sh -c '. /etc/os-release; echo "$PRETTY_NAME"; ldd --version | head -1; nvidia-smi -L'
run sh -c "ldconfig -p | grep -cE 'libavcodec|libopencv|libgstreamer' || true"
# The loader's view as the launcher sets it up here (no system GStreamer: the bundled fallback).
run sh -c "LD_LIBRARY_PATH=$B/lib/gstreamer:$B/lib/glib ldd $B/libexec/visiond | grep '=>' | grep -v '$B/lib' || true; echo \"\$(LD_LIBRARY_PATH=$B/lib/gstreamer:$B/lib/glib ldd $B/libexec/visiond | grep -c '$B/lib') libraries from the bundle\""
run cat "$B/share/visiond/glibc-floor"

demo=/tmp/demo
mkdir -p "$demo/third_party/media"
cp "$repo/third_party/yolov8n.onnx" "$demo/third_party/"
cp "$repo/third_party/media/vtest.h264.ts" "$demo/third_party/media/"
cd "$demo"

# demo NAME CONFIG ENV...: 60 s of visiond run -print; person detections and worker lines.
demo() {
  local name=$1 cfg=$2
  shift 2
  say "## $name"
  say "\$ env $* $B/bin/visiond run -print ${cfg:+-config $cfg}   (60 s, then SIGTERM)"
  env "$@" timeout -s TERM 60 "$B/bin/visiond" run -print ${cfg:+-config "$cfg"} >"$OUT/$name.log" 2>&1 &
  local t=$!
  sleep 30 # then what the running daemon has loaded, its cameras' state and the GPU's decoder use
  local pid wpid
  pid=$(pgrep -f "libexec/visiond run" | head -1)
  wpid=$(pgrep -f "libexec/visiond worker" | head -1)
  say "daemon $pid maps: $(grep -oE '/[^ ]*lib(gstreamer-1\.0|avcodec|opencv_videoio|nvcuvid|cuda)[^ ]*' "/proc/$pid/maps" | sort -u | tr '\n' ' ')"
  say "worker $wpid maps: $(grep -oE '/[^ ]*libonnxruntime[^ ]*' "/proc/$wpid/maps" | sort -u | tr '\n' ' ')"
  curl -s 127.0.0.1:8080/api/cameras >"$OUT/$name-cameras.json"
  say "nvidia-smi dmon (sm, mem, enc, dec %): $(nvidia-smi dmon -s u -c 3 | tail -3 | tr -s ' ' | tr '\n' ';')"
  wait $t
  say "(exit $?; 124: stopped by the timeout's SIGTERM)"
  say "person detections: $(grep -c '/sample frame .* person [01]\.' "$OUT/$name.log")"
  grep -m2 '/sample frame .* person [01]\.' "$OUT/$name.log" | tee -a "$R"
  grep -m3 -E 'worker ready|worker started|decoder|error|ERROR' "$OUT/$name.log" | cut -c1-400 | tee -a "$R"
}

say "## 2. check and the demo on the CPU"
run "$B/bin/visiond" check
demo demo-cpu ""

sed 's/{count: 1, provider: cpu}/{count: 1, provider: cuda}/' "$repo/configs/default.yaml" >cuda.yaml
sed 's/^    fps: 5$/    fps: 5\n    decoder: cuda/' cuda.yaml >cuda-nvdec.yaml
run diff "$repo/configs/default.yaml" cuda-nvdec.yaml
run "$B/bin/visiond" check -config cuda-nvdec.yaml
demo demo-cuda cuda.yaml ONNXRUNTIME_SHARED_LIBRARY_PATH=$GPU_ORT LD_LIBRARY_PATH=/usr/local/cuda/lib64
demo demo-cuda-nvdec cuda-nvdec.yaml ONNXRUNTIME_SHARED_LIBRARY_PATH=$GPU_ORT LD_LIBRARY_PATH=/usr/local/cuda/lib64

say "## 4. the NVDEC tests of package sources, on the bundle's libraries"
cd "$repo/sources"
run env LD_LIBRARY_PATH="$B/lib:$B/lib/gstreamer:$B/lib/glib:/usr/local/cuda/lib64" "$repo/build/devrun/sources.test" \
  -test.run 'TestCameraDecoderCUDA|TestDecoderCUDAMatchesCPU' -test.v -test.count=1
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv | tee -a "$R"
