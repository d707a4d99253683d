#!/usr/bin/env bash
# Packs files for the GPU machine, whose calls carry at most 64 MiB each: tar (symlinks
# followed) and xz, split into parts of 55 MB, part K in folder PREFIX<K>/partK (a git-ignored
# /.gpu*/ folder; older PREFIX<N> folders are removed first). Prints the number of parts.
# Run from where the FILEs are (the repository root for most):  scripts/gpu/pack-parts.sh PREFIX FILE...
# With PACK_CACHE=FILE.tar.xz, an archive already there is split instead of packing again (its
# name must say what it holds: stage.sh names it by the files' checksums); a new one is kept there.
# On the GPU machine, after one call per folder has copied its part into DIR:
#   cat $(ls DIR/part* | sort -V) | xz -d -T0 | tar -x
set -euo pipefail
prefix=$1
shift
rm -rf "$prefix"[0-9]*
pack=$(mktemp)
trap 'rm -f "$pack" "$pack".part*' EXIT
if [[ -n ${PACK_CACHE:-} && -s $PACK_CACHE ]]; then
  cp "$PACK_CACHE" "$pack"
else
  tar -chf - "$@" | xz -T0 -6 >"$pack"
  [[ -n ${PACK_CACHE:-} ]] && cp "$pack" "$PACK_CACHE.tmp" && mv "$PACK_CACHE.tmp" "$PACK_CACHE"
fi
split -b 55000000 -d -a 1 "$pack" "$pack.part"
m=0
for part in "$pack".part*; do
  m=$((m + 1))
  mkdir -p "$prefix$m"
  mv "$part" "$prefix$m/part$m"
done
echo "$m"
