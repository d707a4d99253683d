#!/usr/bin/env bash
# On the GPU machine (../shared/gpu/README.md says how to stage ONNX Runtime's CUDA build):
# throughput of the daemon against a bare Detect loop, with 1, 2 and 4 CUDA workers on one
# GPU, every camera reading the 10 fps sample camera. Needs bin/pipeline.test
# (`go test -c -ldflags='-s -w' -o bin/pipeline.test ./pipeline`) and third_party's model,
# sample video and messi5.jpg. Writes $OUT/gpu-bench.txt.
#   scripts/gpu-bench.sh [CAMERAS] [SECONDS] [WORKERS...]
set -euo pipefail
cams=${1:-48} secs=${2:-20}
shift $(( $# > 2 ? 2 : $# ))
workers=("${@:-1 2 4}")
out=${OUT:-/tmp/out}
mkdir -p "$out"
: "${ONNXRUNTIME_SHARED_LIBRARY_PATH:?source activate.sh first}"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/pipeline"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  for w in ${workers[@]}; do
    VISIOND_BENCH_PROVIDER=cuda VISIOND_BENCH_CAMERAS=$cams VISIOND_BENCH_WORKERS=$w VISIOND_BENCH_SECONDS=$secs \
      ../bin/pipeline.test -test.run '^$' -test.bench ThroughputVsBareLoop -test.benchtime 1x 2>&1 |
      grep -E '^Benchmark|FAIL|panic' | sed "s/^/workers=$w cameras=$cams: /"
  done
} | tee "$out/gpu-bench.txt"
