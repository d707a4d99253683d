# Sourced by scripts/cross-arm64.sh and scripts/cross-test.sh (not run): the Debian suites an
# arm64 cross build can be made against, and the environment that builds against a sysroot.
#
#   cross_suite SUITE      sets CROSS_SUFFIX (what the suite's sysroot, binary and work
#                          directories end with) and CROSS_GCC (the suite's gcc, whose C++
#                          runtime the binary links); fails naming the suites for another
#   cross_env SYSROOT      exports CGO_ENABLED, GOOS, GOARCH, CC, CXX and PKG_CONFIG_* for go
#                          build and go test -c against SYSROOT (after cross_suite)
#
# Why a suite other than bookworm needs more than --sysroot: Debian 12's cross compiler
# (gcc-aarch64-linux-gnu) searches its own arm64 glibc 2.36 and libstdc++ 12 (the
# libc6-dev-arm64-cross and libstdc++-12-dev-arm64-cross packages, in /usr/aarch64-linux-gnu)
# before the sysroot, headers, start files and libraries alike. For bookworm those are the
# sysroot's own versions; against bullseye (glibc 2.31, gcc 10) the link failed with
# libstdc++ 12 asking for stat@GLIBC_2.33, pthread_create@GLIBC_2.34, arc4random@GLIBC_2.36
# (what 2.31 has not). So there the compilers see only the sysroot's headers (-nostdinc, then
# gcc's own builtin headers and the sysroot's libstdc++ 10 and glibc), start files (-B) and
# libraries (-L first): a binary that asks for no more than the suite's glibc and libstdc++.

cross_suite() {
  case "$1" in
    bookworm) CROSS_SUFFIX= CROSS_GCC=12 ;;
    bullseye) CROSS_SUFFIX=-bullseye CROSS_GCC=10 ;;
    *) echo "VISIOND_SYSROOT_SUITE=$1: bookworm (Debian 12, the default) or bullseye (Debian 11)" >&2; return 2 ;;
  esac
  CROSS_SUITE=$1
}

cross_env() {
  local sr m=aarch64-linux-gnu gccinc cinc cxxinc ld
  sr=$(realpath "$1")
  export CGO_ENABLED=1 GOOS=linux GOARCH=arm64
  export PKG_CONFIG_SYSROOT_DIR="$sr" PKG_CONFIG_PATH=
  export PKG_CONFIG_LIBDIR="$sr/usr/lib/$m/pkgconfig:$sr/usr/share/pkgconfig"
  if [ "$CROSS_SUITE" = bookworm ]; then
    export CC="$m-gcc --sysroot=$sr" CXX="$m-g++ --sysroot=$sr"
    return
  fi
  gccinc=$("$m-gcc" -print-file-name=include) # stddef.h, arm_neon.h: the compiler's own
  cinc="-nostdinc -isystem $gccinc -isystem $sr/usr/include/$m -isystem $sr/usr/include"
  cxxinc="-isystem $sr/usr/include/c++/$CROSS_GCC -isystem $sr/usr/include/$m/c++/$CROSS_GCC -isystem $sr/usr/include/c++/$CROSS_GCC/backward"
  ld="-B$sr/usr/lib/$m/ -L$sr/usr/lib/gcc/$m/$CROSS_GCC -L$sr/usr/lib/$m"
  for f in "$sr/usr/include/c++/$CROSS_GCC/vector" "$sr/usr/lib/gcc/$m/$CROSS_GCC/libstdc++.so" "$sr/usr/lib/$m/Scrt1.o"; do
    [ -e "$f" ] || { echo "cross-env: $f missing from the sysroot (libstdc++-$CROSS_GCC-dev, libc6-dev)" >&2; return 1; }
  done
  export CC="$m-gcc --sysroot=$sr $cinc $ld"
  export CXX="$m-g++ --sysroot=$sr -nostdinc $cxxinc ${cinc#-nostdinc } $ld"
}
