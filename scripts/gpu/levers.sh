#!/usr/bin/env bash
# The CUDA levers of batch=1 (issue 25 item 4), measured on the GPU machine in one call:
# TestDeviceIO (device I/O and a CUDA graph find what the host-tensor path finds) and
# BenchmarkCUDALevers (bare runs/s of N sessions in one process: host tensors, device I/O,
# device I/O + CUDA graph) for each model: FP32, uint8 prelude, FP16, FP16 + prelude.
#
# Here (after scripts/setup.sh and scripts/build.sh bin/visiond):
#   scripts/gpu/levers.sh pack      # .gpuw: the test binary, the models, messi5.jpg, this script
#   scripts/gpu/stage.sh bin/worker.test  # .gpu1..N: ONNX Runtime's CUDA build and the libraries
# There, one call per .gpuK (mkdir -p /tmp/gpustage && cp .gpuK/* /tmp/gpustage/), then with .gpuw:
#   source /tmp/gpustage/activate.sh && SESSIONS="4 8" bash .gpuw/levers.sh
# Knobs: SESSIONS ("1 4"), SECONDS_EACH (8), MODELS (every .onnx in .gpuw). Results in $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = pack ]; then
  cd "$here/../.."
  GO=${GO:-go}
  . scripts/gpu/build-env.sh
  $GO test -c -tags customenv -ldflags='-s -w' -o bin/worker.test ./infer/worker || exit 1
  rm -rf .gpuw && mkdir -p .gpuw
  cp bin/worker.test third_party/yolov8n.onnx third_party/media/messi5.jpg scripts/gpu/levers.sh .gpuw/
  export ONNXRUNTIME_SHARED_LIBRARY_PATH=$PWD/third_party/libonnxruntime.so.1
  bin/visiond model fp16 -model third_party/yolov8n.onnx -out .gpuw/y8-fp16.onnx >/dev/null || exit 1
  bin/visiond model prelude -model third_party/yolov8n.onnx -out .gpuw/y8-u8.onnx >/dev/null || exit 1
  bin/visiond model prelude -model .gpuw/y8-fp16.onnx -out .gpuw/y8-fp16-u8.onnx >/dev/null || exit 1
  du -sh .gpuw
  exit 0
fi
: "${ONNXRUNTIME_SHARED_LIBRARY_PATH:?source /tmp/gpustage/activate.sh first}"
OUT=${OUT:-/tmp/out}
w=/tmp/w
mkdir -p $w/infer/worker $w/third_party/media "$OUT"
cp "$here/worker.test" $w/infer/worker/
cp "$here"/*.onnx $w/third_party/
cp "$here/messi5.jpg" $w/third_party/media/
: >$w/go.mod # the tests find third_party/ at the module root
cd $w/infer/worker
VISIOND_TEST_GPU=1 ./worker.test -test.run 'TestDeviceIO' -test.v 2>&1 | tail -30 | tee "$OUT/test.txt"
models=${MODELS:-$(cd "$here" && ls *.onnx)}
for s in ${SESSIONS:-1 4}; do
  for m in $models; do
    VISIOND_BENCH_PROVIDER=cuda VISIOND_BENCH_SESSIONS=$s VISIOND_BENCH_SECONDS=${SECONDS_EACH:-8} VISIOND_BENCH_MODEL=$w/third_party/$m \
      ./worker.test -test.run '^$' -test.bench 'BenchmarkCUDALevers' -test.benchtime 1x 2>&1 | grep -v '^goos\|^goarch\|^pkg\|^cpu' | tee -a "$OUT/bench.txt"
  done
done
