#!/usr/bin/env bash
# Build build/deb/visiond_<version>_<arch>.deb with dpkg-deb (no debhelper):
#   scripts/deb.sh amd64    from bin/visiond (make build) and third_party/libonnxruntime.so.1 (make setup)
#   scripts/deb.sh arm64    from bin/linux-arm64/visiond and third_party/linux-arm64/ (make arm64)
#
# The package:
#   /usr/bin/visiond                         the binary (debug info stripped)
#   /usr/lib/visiond/libonnxruntime.so.1     ONNX Runtime (CPU provider), what the example config's
#                                            workers.library names
#   /lib/systemd/system/visiond.service      systemd/visiond.service, ExecStart=/usr/bin/visiond
#   /etc/visiond/visiond.yaml                packaging/visiond.yaml (starts as it is), a conffile
#   /usr/share/doc/visiond/visiond.example.yaml  configs/visiond.yaml (every key documented)
#   /usr/share/visiond/fetch-model.sh        fetches the (AGPL, not shipped) yolov8n.onnx
#   /usr/share/doc/visiond/                  README, docs, copyright, changelog
#   /usr/share/man/man1/visiond.1.gz         packaging/visiond.1
#   /usr/share/lintian/overrides/visiond     packaging/lintian-overrides (what ONNX Runtime embeds)
#   postinst (the visiond system user, /var/lib/visiond, daemon-reload), prerm (stop, disable),
#   postrm (daemon-reload; purge: /var/lib/visiond). Depends from dpkg-shlibdeps: for arm64 it
#   reads the shlibs and symbols files that scripts/cross-arm64.sh collected in the sysroot.
#
# VISIOND_VERSION overrides the version (default 0.0~git<commit date>.<commit>, +dirty when the
# work tree has changes); VISIOND_MAINTAINER the Maintainer field (default: DEBFULLNAME and
# DEBEMAIL, else git's user.name and user.email).
set -euo pipefail

cd "$(dirname "$0")/.."
# build/ (git-ignored) holds sysroots and chroots: a go.mod there keeps it out of ./... patterns.
mkdir -p build && { [ -f build/go.mod ] || printf 'module visiond/build\n\n// Not code: the cross-build sysroot and packaging outputs. This go.mod keeps them out of ./...\n' >build/go.mod; }
ARCH=${1:?usage: scripts/deb.sh amd64|arm64}
TP=${VISIOND_THIRD_PARTY:-third_party}
SYSROOT=${VISIOND_SYSROOT_ARM64:-build/sysroot-arm64}
ORT_VERSION=1.29.0
case "$ARCH" in
amd64)
  BIN=bin/visiond ORT=$TP/libonnxruntime.so.1
  ORT_SHA256=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d # scripts/setup.sh
  MACHINE='Advanced Micro Devices X86-64' STRIP=strip
  ;;
arm64)
  BIN=bin/linux-arm64/visiond ORT=$TP/linux-arm64/libonnxruntime.so.1
  ORT_SHA256=a27d21126db312aa8f02f3d5eaebe466e991f51f469882e6d0407d5a8b64afda # scripts/cross-arm64.sh
  MACHINE=AArch64 STRIP=aarch64-linux-gnu-strip
  ;;
*) echo "deb: unknown architecture $ARCH (amd64 or arm64)" >&2; exit 2 ;;
esac

log() { echo "deb($ARCH): $*"; }
fail() { echo "deb($ARCH): $*" >&2; exit 1; }
t0=$(date +%s.%N)

[ -f "$BIN" ] || fail "$BIN missing (make build / make arm64)"
readelf -h "$BIN" | grep -q "Machine:.*$MACHINE" || fail "$BIN is not a $ARCH binary"
echo "$ORT_SHA256  $ORT" | sha256sum -c --status || fail "$ORT missing or not ONNX Runtime $ORT_VERSION (make setup / make arm64)"
command -v dpkg-shlibdeps >/dev/null || fail "dpkg-shlibdeps missing (apt install dpkg-dev)"
command -v "$STRIP" >/dev/null || fail "$STRIP missing"

if [ -n "${VISIOND_VERSION:-}" ]; then
  VERSION=$VISIOND_VERSION
else
  VERSION="0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)"
  [ -z "$(git status --porcelain --untracked-files=no)" ] || VERSION="$VERSION+dirty"
fi
# The Maintainer (and the changelog's signer): VISIOND_MAINTAINER (make deb MAINTAINER=...),
# else Debian's DEBFULLNAME and DEBEMAIL, else git's author identity of this clone.
if [ -n "${VISIOND_MAINTAINER:-}" ]; then
  MAINTAINER=$VISIOND_MAINTAINER
elif [ -n "${DEBEMAIL:-}" ]; then
  MAINTAINER="${DEBFULLNAME:-$(git config user.name || true)} <$DEBEMAIL>"
else
  MAINTAINER=$(git var GIT_AUTHOR_IDENT 2>/dev/null | sed 's/ [0-9]* [-+][0-9]*$//') || true
fi
[[ $MAINTAINER =~ ^[^\<\>]*[^\<\>\ ]\ \<[^@\<\>\ ]+@[^@\<\>\ ]+\.[^@\<\>\ ]+\>$ ]] ||
  fail "maintainer '$MAINTAINER' is not 'Full Name <user@host.domain>': set VISIOND_MAINTAINER (make deb MAINTAINER='Name <mail>') or DEBFULLNAME and DEBEMAIL"

OUTDIR=build/deb
STAGE=$OUTDIR/stage-$ARCH
DEB=$OUTDIR/visiond_${VERSION}_$ARCH.deb
rm -rf "$STAGE"
mkdir -p "$STAGE/DEBIAN"
umask 022

install -D -m 0755 "$BIN" "$STAGE/usr/bin/visiond"
"$STRIP" --remove-section=.comment --remove-section=.note --strip-unneeded "$STAGE/usr/bin/visiond"
install -D -m 0644 "$ORT" "$STAGE/usr/lib/visiond/libonnxruntime.so.1"
install -d "$STAGE/lib/systemd/system"
sed -e 's|/usr/local/bin/visiond|/usr/bin/visiond|g' systemd/visiond.service >"$STAGE/lib/systemd/system/visiond.service"
chmod 0644 "$STAGE/lib/systemd/system/visiond.service"
grep -q '^ExecStart=/usr/bin/visiond ' "$STAGE/lib/systemd/system/visiond.service" || fail "ExecStart not rewritten"
install -D -m 0644 packaging/visiond.yaml "$STAGE/etc/visiond/visiond.yaml"
install -D -m 0644 configs/visiond.yaml "$STAGE/usr/share/doc/visiond/visiond.example.yaml"
install -D -m 0755 packaging/fetch-model.sh "$STAGE/usr/share/visiond/fetch-model.sh"
install -D -m 0644 README.md "$STAGE/usr/share/doc/visiond/README.md"
for f in docs/*.md; do install -m 0644 "$f" "$STAGE/usr/share/doc/visiond/"; done
install -m 0644 packaging/copyright "$STAGE/usr/share/doc/visiond/copyright"
install -D -m 0644 packaging/lintian-overrides "$STAGE/usr/share/lintian/overrides/visiond"
install -d "$STAGE/usr/share/man/man1"
gzip -9n <packaging/visiond.1 >"$STAGE/usr/share/man/man1/visiond.1.gz"
chmod 0644 "$STAGE/usr/share/man/man1/visiond.1.gz"
{
  echo "visiond ($VERSION) unstable; urgency=medium"
  echo
  echo "  * Built from commit $(git rev-parse --short=12 HEAD)$( [[ $VERSION == *+dirty ]] && echo ' with local changes')."
  echo
  echo " -- $MAINTAINER  $(date -R)"
} | gzip -9n >"$STAGE/usr/share/doc/visiond/changelog.gz"
chmod 0644 "$STAGE/usr/share/doc/visiond/changelog.gz"
install -m 0755 packaging/postinst packaging/prerm packaging/postrm "$STAGE/DEBIAN/"
install -m 0644 packaging/conffiles "$STAGE/DEBIAN/conffiles"

# Depends of the binary and of the ONNX Runtime library, from the libraries' shlibs/symbols.
shl=$(mktemp -d)
trap 'rm -rf "$shl"' EXIT
mkdir -p "$shl/debian"
printf 'Source: visiond\n\nPackage: visiond\nArchitecture: any\n' >"$shl/debian/control"
files=("$(realpath "$STAGE/usr/bin/visiond")" "$(realpath "$STAGE/usr/lib/visiond/libonnxruntime.so.1")")
if [ "$ARCH" = arm64 ]; then
  [ -s "$SYSROOT/DEBIAN/shlibs" ] || fail "$SYSROOT/DEBIAN/shlibs missing (make arm64)"
  sr=$(realpath "$SYSROOT")
  depends=$(cd "$shl" && DEB_HOST_ARCH=arm64 dpkg-shlibdeps -O -S"$sr" "${files[@]}" 2>"$shl/err") ||
    { cat "$shl/err" >&2; fail "dpkg-shlibdeps failed"; }
else
  depends=$(cd "$shl" && dpkg-shlibdeps -O "${files[@]}" 2>"$shl/err") || { cat "$shl/err" >&2; fail "dpkg-shlibdeps failed"; }
fi
grep -v -e "binaries to analyze should already be installed" -e "could avoid a useless dependency" "$shl/err" >&2 || true
depends=${depends#shlibs:Depends=}
[ -n "$depends" ] || fail "dpkg-shlibdeps found no dependencies"

size=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
sed -e "s|@VERSION@|$VERSION|" -e "s|@ARCH@|$ARCH|" -e "s|@MAINTAINER@|$MAINTAINER|" \
  -e "s|@INSTALLED_SIZE@|$size|" -e "s|@DEPENDS@|$depends|" -e "s|@ORT_VERSION@|$ORT_VERSION|" \
  packaging/control.in >"$STAGE/DEBIAN/control"
(cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$STAGE/DEBIAN/md5sums"
chmod 0644 "$STAGE/DEBIAN/control" "$STAGE/DEBIAN/md5sums"

rm -f "$OUTDIR"/visiond_*_"$ARCH".deb
dpkg-deb --root-owner-group -Zxz --threads-max="$(nproc)" --build "$STAGE" "$DEB" >/dev/null
rm -rf "$STAGE"
log "$DEB: $(du -h "$DEB" | cut -f1), installed $((size / 1024)) MiB, built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }')"
log "Depends: $depends, adduser"
log "sha256 $(sha256sum "$DEB" | cut -d' ' -f1)"
