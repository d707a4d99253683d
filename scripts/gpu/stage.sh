#!/usr/bin/env bash
# ONNX Runtime's CUDA build and the shared libraries of the given binaries, staged for the GPU
# machine in carry folders .gpu1 .. .gpuN at the repository root (git-ignored: /.gpu*/):
#
#   scripts/gpu/stage.sh [BINARY ...]
#
# The GPU machine has CUDA 13 and cuDNN 9 but no ONNX Runtime with a GPU execution provider,
# and none of the OpenCV or FFmpeg libraries that a cgo binary built here links. This packs
# ONNX Runtime 1.29.0 (core from the npm package onnxruntime-node, CUDA 13 providers from
# com.github.asus4.onnxruntime.linux-x64-gpu 0.4.9; core and providers must be one version,
# each checked by sha256) and every library the binaries link beyond glibc and libstdc++,
# xz-packed and split by pack-parts.sh into folders of at most 55 MB, with activate.sh in
# .gpu1. The binaries themselves are not packed: carry them (scripts/gpu/README.md).
# The first run fetches about 300 MB with `npm pack` (scripts/setup.sh installs npm) and
# compresses for 2-3 minutes; later runs reuse $GPU_STAGE_CACHE (~/.cache/gpu-stage): the
# downloads, and the packed libraries while they are the same.
set -euo pipefail

ORT_VERSION=1.29.0
CORE_PKG=onnxruntime-node@$ORT_VERSION
CORE_SHA=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d
EP_PKG=com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9 # ORT 1.29.0 providers, CUDA 13
CUDA_SHA=56cf3254b118ad837ccc4ed8f6d1b23504bbf7ef91b34cbc0b289cb7f10b3037
SHARED_SHA=c6a12593396095f5670160e284c35d1700b7708cf3037b7042e2a5200ccae772

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${GPU_STAGE_CACHE:-$HOME/.cache/gpu-stage}
mkdir -p "$cache"

checked() { [[ -f $2 ]] && echo "$1  $2" | sha256sum -c --quiet 2>/dev/null; } # checked SHA FILE

if ! checked $CORE_SHA "$cache/libonnxruntime.so.1"; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$CORE_PKG" >/dev/null)
  tar -xzf "$tmp"/*.tgz -O package/bin/napi-v6/linux/x64/libonnxruntime.so.1 >"$cache/libonnxruntime.so.1.tmp"
  rm -rf "$tmp"
  echo "$CORE_SHA  $cache/libonnxruntime.so.1.tmp" | sha256sum -c --quiet
  mv "$cache/libonnxruntime.so.1.tmp" "$cache/libonnxruntime.so.1"
fi
if ! checked $CUDA_SHA "$cache/libonnxruntime_providers_cuda.so" || ! checked $SHARED_SHA "$cache/libonnxruntime_providers_shared.so"; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$EP_PKG" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so package/Plugins/Linux/x64/libonnxruntime_providers_shared.so
  mv "$tmp"/package/Plugins/Linux/x64/*.so "$cache"/
  rm -rf "$tmp"
  echo "$CUDA_SHA  $cache/libonnxruntime_providers_cuda.so" | sha256sum -c --quiet
  echo "$SHARED_SHA  $cache/libonnxruntime_providers_shared.so" | sha256sum -c --quiet
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
cp "$cache"/libonnxruntime.so.1 "$cache"/libonnxruntime_providers_cuda.so "$cache"/libonnxruntime_providers_shared.so "$stage/lib/"
for bin in "$@"; do
  ldd "$bin" | awk '/=> \//{print $3}' |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|libresolv|libutil)\.so' |
    while read -r lib; do cp -Ln "$lib" "$stage/lib/" 2>/dev/null || true; done
done

# The libraries change only with the system's packages or ONNX Runtime: their packed archive is
# kept in the cache under their checksums, so a later stage of new binaries skips the 2-3
# minutes of compression (20 and more on a busy 2-core box).
key=$(cd "$stage" && find lib -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
n=$(cd "$stage" && PACK_CACHE="$cache/lib-$key.tar.xz" "$here/pack-parts.sh" "$root/.gpu" lib)
cat >"$root/.gpu1/activate.sh" <<ACT
# source /tmp/gpustage/activate.sh on the GPU machine, after the $n staging calls.
d=/tmp/gpustage
if [ ! -f \$d/lib/libonnxruntime.so.1 ]; then
  for i in \$(seq 1 $n); do [ -f \$d/part\$i ] || { echo "gpu stage: part\$i missing: the machine was given back; stage again from .gpu1" >&2; return 1; }; done
  cat \$(for i in \$(seq 1 $n); do echo \$d/part\$i; done) | xz -d -T0 | tar -x -C \$d && rm -f \$d/part*
fi
export LD_LIBRARY_PATH=\$d/lib:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export ONNXRUNTIME_SHARED_LIBRARY_PATH=\$d/lib/libonnxruntime.so.1
ACT
echo "staged $n part(s): $(du -sh "$root"/.gpu[0-9]* | awk '{print $2" "$1}' | tr '\n' ' ')"
echo "on the GPU machine, one transfer per folder K in 1..$n: mkdir -p /tmp/gpustage && cp .gpuK/* /tmp/gpustage/"
echo "then before each command there: source /tmp/gpustage/activate.sh"
