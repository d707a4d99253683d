#!/usr/bin/env bash
# Build a relocatable bundle of visiond that runs where it was not built (issue 24, item 3):
#   scripts/bundle.sh amd64    from bin/visiond (make build) and this Debian 12 box's libraries
#   scripts/bundle.sh arm64    from bin/linux-arm64/visiond (make arm64) and the arm64 sysroot's
#   VISIOND_SYSROOT_SUITE=bullseye scripts/bundle.sh arm64   (make bundle ARCH=arm64 SUITE=bullseye)
#                              from the Debian 11 build (make arm64 SUITE=bullseye) and its
#                              sysroot: a glibc floor of 2.31 or less, under JetPack 6's 2.35
# writes build/bundle/visiond-<version>-linux-<arch>[-<suite>].tar.gz and, from the same tree,
# build/bundle/visiond-bundle_<version>_<arch>[-<suite>].deb (installs it under /opt/visiond).
#
# The tree (docs/bundle.md says why each piece is where it is):
#   bin/visiond           the launcher (packaging/bundle/visiond, POSIX sh): checks the glibc
#                         floor, sets ONNXRUNTIME_SHARED_LIBRARY_PATH, adds lib/gstreamer/ when
#                         the system has no GStreamer, execs libexec/visiond
#   libexec/visiond       the binary, stripped, DT_RPATH $ORIGIN/../lib (patchelf)
#   lib/                  every shared library the binary and ONNX Runtime need, glibc's own
#                         excepted, named by soname; libonnxruntime.so.1 (CPU provider)
#   lib/gstreamer/        GStreamer's libraries and what only they need, and lib/glib/ (GLib's):
#                         used only where the system has no GStreamer (never plugins: the
#                         system's plugins are the point)
#   share/visiond/        glibc-floor, libraries.txt (what is shipped, from which package),
#                         fetch-model.sh (the model is AGPL: not shipped), visiond.yaml
#   share/doc/visiond/    README.md, bundle.md, copyright, the bundled packages' copyright files
#
# Why DT_RPATH and not DT_RUNPATH: RUNPATH serves only the object's own DT_NEEDED, so
# libavcodec's libx264 would be looked up in the system's directories; the executable's RPATH
# serves every object loaded that has no RUNPATH of its own (checked below: none has).
#
# The closure is read from ELF headers (readelf -d: DT_NEEDED, RUNPATH) in the library
# directories of the root the binary was built against (/ or the sysroot), never by running
# the binary; for amd64 it is compared with ldd's answer. The glibc floor is the highest
# GLIBC_x.y symbol version any shipped ELF asks for (objdump -T).
#
# VISIOND_VERSION overrides the version (as scripts/deb.sh: 0.0~git<date>.<commit>[+dirty]).
set -euo pipefail

cd "$(dirname "$0")/.."
mkdir -p build && { [ -f build/go.mod ] || printf 'module visiond/build\n\n// Not code: the cross-build sysroot and packaging outputs. This go.mod keeps them out of ./...\n' >build/go.mod; }
ARCH=${1:?usage: scripts/bundle.sh amd64|arm64}
TP=${VISIOND_THIRD_PARTY:-third_party}
# shellcheck source=cross-env.sh
. scripts/cross-env.sh
SUITE=bookworm CROSS_SUFFIX=
if [ "$ARCH" = arm64 ]; then
  SUITE=${VISIOND_SYSROOT_SUITE:-bookworm}
  cross_suite "$SUITE" || exit 2
fi
SYSROOT=${VISIOND_SYSROOT_ARM64:-build/sysroot-arm64$CROSS_SUFFIX}
case "$ARCH" in
amd64)
  BIN=bin/visiond ORT=$TP/libonnxruntime.so.1 ROOT=
  ORT_SHA256=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d # scripts/setup.sh
  MACHINE='Advanced Micro Devices X86-64' STRIP=strip MULTIARCH=x86_64-linux-gnu LDSO=ld-linux-x86-64.so.2
  ;;
arm64)
  BIN=bin/linux-arm64$CROSS_SUFFIX/visiond ORT=$TP/linux-arm64/libonnxruntime.so.1
  ORT_SHA256=a27d21126db312aa8f02f3d5eaebe466e991f51f469882e6d0407d5a8b64afda # scripts/cross-arm64.sh
  MACHINE=AArch64 STRIP=aarch64-linux-gnu-strip MULTIARCH=aarch64-linux-gnu LDSO=ld-linux-aarch64.so.1
  [ -f "$SYSROOT/.visiond-sysroot" ] || { echo "bundle(arm64): $SYSROOT is not a finished sysroot (make arm64)" >&2; exit 1; }
  ROOT=$(realpath "$SYSROOT")
  ;;
*) echo "bundle: unknown architecture $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac

log() { echo "bundle($ARCH): $*"; }
fail() { echo "bundle($ARCH): $*" >&2; exit 1; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }
t_all=$(now)

[ -f "$BIN" ] || fail "$BIN missing (make build / make arm64 SUITE=$SUITE)"
readelf -h "$BIN" | grep -q "Machine:.*$MACHINE" || fail "$BIN is not a $ARCH binary"
echo "$ORT_SHA256  $ORT" | sha256sum -c --status || fail "$ORT missing or not the ONNX Runtime the scripts fetch (make setup / make arm64)"
# Host tools: patchelf is the one a fresh Debian 12 box lacks (binutils and dpkg come with
# build-essential; the arm64 strip with make arm64's cross compiler).
if ! command -v patchelf >/dev/null; then
  log "installing patchelf"
  sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  sudo_ apt-get update -q >/dev/null
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends patchelf >/dev/null
fi
for t in patchelf objdump readelf "$STRIP" dpkg-deb; do
  command -v "$t" >/dev/null || fail "$t missing (apt install patchelf binutils dpkg)"
done

if [ -n "${VISIOND_VERSION:-}" ]; then
  VERSION=$VISIOND_VERSION
else
  VERSION="0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)"
  [ -z "$(git status --porcelain --untracked-files=no)" ] || VERSION="$VERSION+dirty"
fi
FLAVOUR=$ARCH$CROSS_SUFFIX # arm64, or arm64-bullseye: which build, in the file names
NAME=visiond-${VERSION//\~/-}-linux-$FLAVOUR # no ~ in a file name that shells and URLs see
OUTDIR=build/bundle
STAGE=$OUTDIR/stage-$FLAVOUR/$NAME
TARBALL=$OUTDIR/$NAME.tar.gz

# glibc's own libraries: the one part of the system the bundle asks for (with the kernel).
is_glibc() {
  case "$1" in
  libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | libresolv.so.2 | libutil.so.1 | \
    libanl.so.1 | libmvec.so.1 | libBrokenLocale.so.1 | libthread_db.so.1 | libnsl.so.1 | libnss_*.so.2 | \
    libc_malloc_debug.so.0 | ld-linux*.so.* | ld64.so.*) return 0 ;;
  esac
  return 1
}

# The library directories of the root, in the dynamic loader's order (ld.so.conf, then the defaults).
search_dirs=()
for d in /usr/local/lib/$MULTIARCH /lib/$MULTIARCH /usr/lib/$MULTIARCH /usr/local/lib /lib /usr/lib; do
  [ -d "$ROOT$d" ] && search_dirs+=("$ROOT$d")
done

# resolve SONAME FROM: the path of SONAME as FROM's loader would find it (FROM's RPATH/RUNPATH
# with $ORIGIN, then the root's directories).
resolve() {
  local so=$1 from=$2 dirs=() rp d
  rp=$(readelf -d "$from" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p')
  if [ -n "$rp" ]; then
    IFS=: read -ra rps <<<"$rp"
    for d in "${rps[@]}"; do
      d=${d//\$ORIGIN/$(dirname "$from")}
      d=${d//\$\{ORIGIN\}/$(dirname "$from")}
      dirs+=("$d")
    done
  fi
  for d in "${dirs[@]}" "${search_dirs[@]}"; do
    if [ -e "$d/$so" ]; then
      echo "$d/$so"
      return 0
    fi
  done
  return 1
}

# 1. The closure, breadth first from the binary and ONNX Runtime. parents[so] lists who needs it.
t0=$(now)
declare -A path=() parents=()
queue=("$(realpath "$BIN")" "$(realpath "$ORT")")
declare -A seen_file=() soname_of=([$(realpath "$BIN")]=visiond [$(realpath "$ORT")]=libonnxruntime.so.1)
while [ ${#queue[@]} -gt 0 ]; do
  f=${queue[0]}
  queue=("${queue[@]:1}")
  [ -z "${seen_file[$f]:-}" ] || continue
  seen_file[$f]=1
  me=${soname_of[$f]}
  for so in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    is_glibc "$so" && continue
    parents[$so]="${parents[$so]:-} $me"
    [ -z "${path[$so]:-}" ] || continue
    p=$(resolve "$so" "$f") || fail "$so (needed by $me) is not in ${search_dirs[*]}"
    path[$so]=$p
    soname_of[$(realpath "$p")]=$so
    queue+=("$(realpath "$p")")
  done
done
log "closure: ${#path[@]} libraries besides glibc's ($(took "$t0"))"

if [ "$ARCH" = amd64 ]; then # the loader's own answer, for the native binary
  ldd_set=$(ldd "$BIN" | awk '$1 !~ /^linux-vdso/ && $1 !~ /^\// {print $1}' | while read -r so; do is_glibc "$so" || echo "$so"; done | sort)
  ours=$(printf '%s\n' "${!path[@]}" | grep -vx libonnxruntime.so.1 | sort)
  [ "$ldd_set" = "$ours" ] ||
    { diff <(echo "$ldd_set") <(echo "$ours") >&2 || true; fail "the ELF-header closure differs from ldd's (above: < ldd, > ours)"; }
  log "closure: the same $(echo "$ldd_set" | wc -l) libraries as ldd $BIN"
fi

# 2. GStreamer's part: what is reachable only through libgst*. A walk from the roots that does
# not enter libgst* finds the rest; the difference goes to lib/gstreamer/.
declare -A main=()
walk=(visiond libonnxruntime.so.1)
declare -A needs=()
for so in "${!path[@]}"; do
  for p in ${parents[$so]}; do needs[$p]="${needs[$p]:-} $so"; done
done
while [ ${#walk[@]} -gt 0 ]; do
  n=${walk[0]}
  walk=("${walk[@]:1}")
  for so in ${needs[$n]:-}; do
    case "$so" in libgst*) continue ;; esac
    [ -z "${main[$so]:-}" ] || continue
    main[$so]=1
    walk+=("$so")
  done
done
gst=()
for so in "${!path[@]}"; do [ -n "${main[$so]:-}" ] || gst+=("$so"); done
[ ${#gst[@]} -gt 0 ] || fail "no GStreamer library in the closure: did OpenCV's videoio change?"
printf '%s\n' "${gst[@]}" | grep -qx libgstreamer-1.0.so.0 || fail "libgstreamer-1.0.so.0 not among GStreamer's part: ${gst[*]}"
log "GStreamer's part (lib/gstreamer/): $(printf '%s\n' "${gst[@]}" | sort | tr '\n' ' ')"
# GLib goes with GStreamer: the system's GStreamer needs the system's GLib (noble's 1.24 calls
# g_string_free_and_steal, GLib 2.76; Debian 12's is 2.74), so GLib's own libraries are kept out
# of lib/ too, in lib/glib/, used with lib/gstreamer/ or not at all. The bundled libraries that
# link GLib (librsvg, pango, gdk-pixbuf: FFmpeg's and OpenCV's dependencies) then run on the
# system's, a newer one where the floor holds (GLib keeps its ABI).
declare -A glib=()
for so in libglib-2.0.so.0 libgobject-2.0.so.0 libgmodule-2.0.so.0 libgio-2.0.so.0 libgthread-2.0.so.0; do
  [ -z "${main[$so]:-}" ] || glib[$so]=1
done
log "GLib (lib/glib/): ${!glib[*]}"

# 3. The tree.
t0=$(now)
rm -rf "$OUTDIR/stage-$FLAVOUR"
umask 022
mkdir -p "$STAGE"/{bin,libexec,lib/gstreamer,lib/glib,share/visiond,share/doc/visiond/licenses}
install -m 0755 packaging/bundle/visiond "$STAGE/bin/visiond"
install -m 0755 "$BIN" "$STAGE/libexec/visiond"
"$STRIP" --remove-section=.comment --remove-section=.note --strip-unneeded "$STAGE/libexec/visiond"
# shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader
patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$STAGE/libexec/visiond"
install -m 0644 "$ORT" "$STAGE/lib/libonnxruntime.so.1"
manifest=$STAGE/share/visiond/libraries.txt
: >"$manifest.tmp"
declare -A pkgs=() pkg_of=()
# The Debian package of each: for amd64 from dpkg; for arm64 the same soname's package on this
# box (both are bookworm) when it is installed here. One dpkg -S for all (it is slow per call).
# Another suite's packages are not this box's: then every package of its sysroot gives its
# copyright file (more than the bundle holds, none missing), and libraries.txt names none.
if [ "$SUITE" = bookworm ]; then
  while IFS=: read -r pkg file; do
    pkg_of[$(basename "$file")]=${pkg%%:*}
  done < <(dpkg -S $(for so in "${!path[@]}"; do echo "/lib/x86_64-linux-gnu/$so /usr/lib/x86_64-linux-gnu/$so"; done) 2>/dev/null | sed 's/: /:/' || true)
else
  for c in "$ROOT"/usr/share/doc/*/copyright; do
    [ -f "$c" ] && pkgs[$(basename "$(dirname "$c")")]=1
  done
fi
for so in "${!path[@]}"; do
  [ "$so" != libonnxruntime.so.1 ] || continue
  dest=$STAGE/lib
  [ -n "${main[$so]:-}" ] || dest=$STAGE/lib/gstreamer
  [ -z "${glib[$so]:-}" ] || dest=$STAGE/lib/glib
  install -m 0644 "$(realpath "${path[$so]}")" "$dest/$so"
  pkg=${pkg_of[$so]:-}
  [ -n "$pkg" ] && [ -f "$ROOT/usr/share/doc/$pkg/copyright" ] && pkgs[$pkg]=1
  echo "${dest#"$STAGE"/}/$so ${pkg:-?} (needed by${parents[$so]})" >>"$manifest.tmp"
done
sort "$manifest.tmp" >"$manifest"
rm "$manifest.tmp"
for pkg in "${!pkgs[@]}"; do
  install -m 0644 "$ROOT/usr/share/doc/$pkg/copyright" "$STAGE/share/doc/visiond/licenses/$pkg.copyright"
done
n_lic=${#pkgs[@]}
install -m 0755 packaging/fetch-model.sh "$STAGE/share/visiond/fetch-model.sh"
install -m 0644 packaging/bundle/visiond.yaml "$STAGE/share/visiond/visiond.yaml"
install -m 0644 README.md docs/bundle.md packaging/copyright "$STAGE/share/doc/visiond/"

# No shipped library may carry a RUNPATH of its own (it would cut the binary's RPATH off for
# its dependencies) or an RPATH leading out of the bundle; $ORIGIN (ONNX Runtime's) is its
# own directory, where its dependencies are.
for f in "$STAGE"/lib/*.so* "$STAGE"/lib/gstreamer/*.so* "$STAGE"/lib/glib/*.so*; do
  rp=$(readelf -d "$f" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\1 \2/p')
  case "$rp" in
  "" | *" \$ORIGIN") ;;
  *) fail "$(basename "$f") has its own $rp: the binary's RPATH would not serve its dependencies" ;;
  esac
done
readelf -d "$STAGE/libexec/visiond" | grep -q '(RPATH).*\[\$ORIGIN/../lib\]' || fail "patchelf did not set the binary's RPATH"

# 4. The glibc floor: the highest GLIBC_x.y any shipped ELF asks for, and who asks.
floor=$(for f in "$STAGE/libexec/visiond" "$STAGE"/lib/*.so* "$STAGE"/lib/gstreamer/*.so* "$STAGE"/lib/glib/*.so*; do
  objdump -T "$f" | grep -oE '\(GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?\)' | tr -d '()' | sed 's/^GLIBC_//' | sort -uV | tail -1
done | sort -V | tail -1)
[ -n "$floor" ] || fail "no GLIBC_ symbol version found (objdump -T)"
askers=$(for f in "$STAGE/libexec/visiond" "$STAGE"/lib/*.so* "$STAGE"/lib/gstreamer/*.so* "$STAGE"/lib/glib/*.so*; do
  if objdump -T "$f" | grep -F "(GLIBC_$floor)" >/dev/null; then echo "${f#"$STAGE"/}"; fi
done | tr '\n' ' ')
echo "$floor" >"$STAGE/share/visiond/glibc-floor"
echo "$ARCH" >"$STAGE/share/visiond/arch"
log "glibc floor: $floor (asked by $askers)"
{
  echo "visiond $VERSION linux/$ARCH, built from commit $(git rev-parse --short=12 HEAD) on $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "glibc floor $floor (GLIBC_$floor asked by $askers)"
  echo "built against $( [ "$ARCH" = amd64 ] && echo "this box: $(. /etc/os-release && echo "$PRETTY_NAME")" || echo "the sysroot: $(head -1 "$ROOT/.visiond-sysroot")")"
} >"$STAGE/share/visiond/BUILD"

# 5. The tarball, owned by root, reproducible order and times.
size=$(du -sk "$STAGE" | cut -f1)
rm -f "$OUTDIR"/visiond-*-linux-"$FLAVOUR".tar.gz
mtime=$(git log -1 --format=%cI)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" -C "$(dirname "$STAGE")" -cf - "$NAME" | gzip -6n >"$TARBALL"
log "tree: $(find "$STAGE"/lib -name '*.so*' | wc -l) libraries ($(ls "$STAGE"/lib/gstreamer | wc -l) in lib/gstreamer/), $n_lic copyright files, $((size / 1024)) MiB ($(took "$t0"))"
log "$TARBALL: $(du -h "$TARBALL" | cut -f1)"

# 6. A .deb of the same tree: /opt/visiond, /usr/bin/visiond a link to the launcher, Depends on
# libc6 only (the floor). No unit, no user, no config in /etc: it is the tarball, installed.
t0=$(now)
DEBSTAGE=$OUTDIR/stage-$FLAVOUR/deb
mkdir -p "$DEBSTAGE/DEBIAN" "$DEBSTAGE/opt" "$DEBSTAGE/usr/bin"
cp -al "$STAGE" "$DEBSTAGE/opt/visiond"
ln -s /opt/visiond/bin/visiond "$DEBSTAGE/usr/bin/visiond"
cat >"$DEBSTAGE/DEBIAN/control" <<EOF
Package: visiond-bundle
Version: $VERSION
Architecture: $ARCH
Maintainer: visiond <visiond@localhost.invalid>
Installed-Size: $size
Depends: libc6 (>= $floor)
Conflicts: visiond
Section: video
Priority: optional
Description: video analytics daemon, self-contained (the release tarball as a package)
 visiond with every library it links (FFmpeg, OpenCV, ONNX Runtime's CPU
 library, libstdc++...) under /opt/visiond, asking only glibc $floor or newer.
 The system's GStreamer is used when installed (its plugins: nvv4l2decoder on
 a Jetson), else a bundled copy of GStreamer's libraries (no plugins).
 No model: /opt/visiond/share/visiond/fetch-model.sh fetches the AGPL-3.0
 YOLOv8n. No systemd unit or system user: see /opt/visiond/share/doc/visiond/bundle.md.
EOF
DEB=$OUTDIR/visiond-bundle_${VERSION}_$FLAVOUR.deb
rm -f "$OUTDIR"/visiond-bundle_*_"$FLAVOUR".deb
dpkg-deb --root-owner-group -Zgzip --build "$DEBSTAGE" "$DEB" >/dev/null
rm -rf "$OUTDIR/stage-$FLAVOUR"
log "$DEB: $(du -h "$DEB" | cut -f1), Depends: libc6 (>= $floor) ($(took "$t0"))"
log "done in $(took "$t_all")"
