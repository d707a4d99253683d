#!/usr/bin/env bash
# Stage what scripts/gpu/bench.sh needs on the GPU machine, beyond the repository:
#   1. ONNX Runtime's CUDA build and the shared libraries of the binaries, by
#      scripts/gpu/stage.sh, in .gpu1 .. .gpuN (skipped with --no-libs);
#   2. bin/visiond, bin/visiond-bench, bin/pipeline.test (stripped), the model and the sample
#      media, xz-packed and split into .gpubench1 .. .gpubenchM (55 MB each; .gitignore has /.gpu*/);
#      with them the INT8 and FP16 models of the cameras-per-box parts (bench.sh cpu-scale,
#      gpu-scale) as build/models/yolov8n-{int8,fp16}.onnx: $INT8_MODEL and $FP16_MODEL when
#      given, else made here by `bin/visiond model quantize` (calibrated on vtest.avi) and
#      `bin/visiond model fp16` unless build/models has them already; a model that cannot be
#      made is left out (its part then says so).
# Then it prints the calls to make. Run from the repository root after scripts/setup.sh.
#   [INT8_MODEL=q.onnx] [FP16_MODEL=h.onnx] scripts/gpu/bench-pack.sh [--no-libs]
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
$GO build -ldflags='-s -w' -o bin/visiond ./cmd/visiond
$GO build -ldflags='-s -w' -o bin/visiond-bench ./cmd/visiond-bench
$GO test -c -ldflags='-s -w' -o bin/pipeline.test ./pipeline
if [ "${1:-}" != --no-libs ]; then
  scripts/gpu/stage.sh bin/visiond bin/visiond-bench bin/pipeline.test
fi
mkdir -p build/models
models=()
for kind in int8 fp16; do
  dst=build/models/yolov8n-$kind.onnx
  given=$([ $kind = int8 ] && echo "${INT8_MODEL:-}" || echo "${FP16_MODEL:-}")
  if [ -n "$given" ] && [ "$given" != "$dst" ]; then
    cp "$given" "$dst"
  elif [ ! -f "$dst" ]; then
    if [ $kind = int8 ]; then
      made=(bin/visiond model quantize -model third_party/yolov8n.onnx -out "$dst" -calib third_party/media/vtest.avi)
    else
      made=(bin/visiond model fp16 -model third_party/yolov8n.onnx -out "$dst")
    fi
    echo "bench-pack: ${made[*]}" >&2
    "${made[@]}" >&2 || { echo "bench-pack: no $kind model (the command above failed): bench.sh's $kind part will say so" >&2; rm -f "$dst"; }
  fi
  if [ -f "$dst" ]; then models+=("$dst"); fi
done
m=$(scripts/gpu/pack-parts.sh .gpubench bin/visiond bin/visiond-bench bin/pipeline.test third_party/yolov8n.onnx \
  third_party/media/vtest.h264.ts third_party/media/messi5.jpg third_party/media/basketball1.png "${models[@]}")
n=$( (ls -d .gpu[0-9]* 2>/dev/null || true) | wc -l)
echo "bench-pack: $n library part(s) in .gpu1..$n, $m bench part(s) in .gpubench1..$m ($(du -ch .gpubench* | tail -1 | cut -f1))"
echo "On the GPU machine, one call per folder, back to back (the machine goes back when idle):"
for k in $(seq 1 "$n"); do echo "  carry [\".gpu$k\"]:      mkdir -p /tmp/gpustage && cp .gpu$k/* /tmp/gpustage/"; done
for k in $(seq 1 "$m"); do echo "  carry [\".gpubench$k\"]: mkdir -p /tmp/gpubench && cp .gpubench$k/* /tmp/gpubench/"; done
echo "then, each within the 10 minutes of a call:"
echo "  source /tmp/gpustage/activate.sh && scripts/gpu/bench.sh env cpu-scale peer-scale     # cameras per box: 16 CPU cores"
echo "  source /tmp/gpustage/activate.sh && scripts/gpu/bench.sh gpu-scale                    # cameras per box: the GPU"
echo "(the older parts, when there is time: env selftest pipeline scale; peer soak)"
echo "and here: mkdir -p docs/bench/gpu && tar -xzf FILES_AT/gpu-bench.tar.gz -C docs/bench/gpu && make bench-report GPU=docs/bench/gpu"
