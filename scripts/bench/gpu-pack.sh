#!/usr/bin/env bash
# Stage what scripts/bench/gpu.sh needs on the GPU machine, beyond the repository:
#   1. ONNX Runtime's CUDA build and the shared libraries of the binaries, by
#      ../shared/gpu/stage.sh, in .gpu1 .. .gpuN (skipped with --no-libs);
#   2. bin/visiond, bin/visiond-bench, bin/pipeline.test (stripped), the model and the sample
#      media, xz-packed and split into .gpubench1 .. .gpubenchM (55 MB each; git ignores /.gpu*/).
# Then it prints the calls to make. Run from the repository root after scripts/setup.sh.
#   scripts/bench/gpu-pack.sh [--no-libs]
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
$GO build -ldflags='-s -w' -o bin/visiond ./cmd/visiond
$GO build -ldflags='-s -w' -o bin/visiond-bench ./cmd/visiond-bench
$GO test -c -ldflags='-s -w' -o bin/pipeline.test ./pipeline
if [ "${1:-}" != --no-libs ]; then
  ../shared/gpu/stage.sh bin/visiond bin/visiond-bench bin/pipeline.test
fi
rm -rf .gpubench[0-9]*
grep -qx '/.gpu\*/' .git/info/exclude 2>/dev/null || echo '/.gpu*/' >>.git/info/exclude
pack=$(mktemp)
tar -cf - bin/visiond bin/visiond-bench bin/pipeline.test third_party/yolov8n.onnx \
  third_party/media/vtest.h264.ts third_party/media/messi5.jpg third_party/media/basketball1.png |
  xz -T0 -6 >"$pack"
split -b 55000000 -d -a 1 "$pack" "$pack.part"
m=0
for part in "$pack".part*; do
  m=$((m + 1))
  mkdir -p ".gpubench$m"
  mv "$part" ".gpubench$m/part$m"
done
rm -f "$pack"
n=$(ls -d .gpu[0-9]* 2>/dev/null | wc -l)
echo "gpu-pack: $n library part(s) in .gpu1..$n, $m bench part(s) in .gpubench1..$m ($(du -ch .gpubench* | tail -1 | cut -f1))"
echo "On the GPU machine, one call per folder, back to back (the machine goes back when idle):"
for k in $(seq 1 "$n"); do echo "  carry [\".gpu$k\"]:      mkdir -p /tmp/gpustage && cp .gpu$k/* /tmp/gpustage/"; done
for k in $(seq 1 "$m"); do echo "  carry [\".gpubench$k\"]: mkdir -p /tmp/gpubench && cp .gpubench$k/* /tmp/gpubench/"; done
echo "then, each within the 10 minutes of a call:"
echo "  source /tmp/gpustage/activate.sh && scripts/bench/gpu.sh env selftest pipeline scale"
echo "  source /tmp/gpustage/activate.sh && scripts/bench/gpu.sh peer soak"
echo "and here: mkdir -p docs/bench/gpu && tar -xzf FILES_AT/gpu-bench.tar.gz -C docs/bench/gpu && make bench-report GPU=docs/bench/gpu"
