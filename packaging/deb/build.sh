#!/usr/bin/env bash
# packaging/deb/build.sh [OUTDIR] — the Debian package of the library cargo built (make deb;
# OUTDIR defaults to build/dist): `make install` into a staging root with PREFIX=/usr and the
# library under /usr/lib/<multiarch>/, the library stripped of its debug sections, then
# dpkg-deb. It holds libcudampi.so(.0), /usr/include/cudampi.h and cudampi-ext/mpi-ext.h, the
# pkg-config file and /usr/bin/cudampi-run; it depends on the glibc the library needs and
# recommends an MPI (Open MPI or MPICH), which it does not require: cudampi works under
# whichever MPI the program uses.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-build/dist}
lib=target/release/libcudampi.so
[ -f "$lib" ] || { echo "deb: $lib is missing; run make first" >&2; exit 1; }
ver=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
arch=$(dpkg --print-architecture)
multi=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
root=$(mktemp -d)
chmod 755 "$root"
trap 'rm -rf "$root"' EXIT
make --no-print-directory install DESTDIR="$root" PREFIX=/usr LIBDIR="/usr/lib/$multi" >/dev/null
so=$root/usr/lib/$multi/libcudampi.so.0
strip "$so"
glibc=$(objdump -T "$so" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -t. -k2,2n | tail -n 1)
doc=$root/usr/share/doc/cudampi
install -d "$doc" "$root/DEBIAN"
install -m 644 README.md "$doc/README.md"
printf 'cudampi %s\nLicense: MIT OR Apache-2.0\n' "$ver" >"$doc/copyright"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: cudampi
Version: $ver
Architecture: $arch
Maintainer: cudampi developers <cudampi@users.noreply.github.com>
Installed-Size: $size
Depends: libc6 (>= $glibc)
Recommends: openmpi-bin | mpich
Suggests: libopenmpi-dev | libmpich-dev
Section: libs
Priority: optional
Description: makes any MPI CUDA-aware
 libcudampi.so, preloaded under an MPI program (C, Fortran, Python with
 mpi4py) or linked before -lmpi, lets an MPI built without CUDA take GPU
 device buffers: it stages them through pinned host memory, moves them GPU
 to GPU inside a node, and runs device collectives on NCCL where it is
 found. cudampi-run starts a program under it with either MPI family's
 mpirun.
CONTROL
mkdir -p "$out"
dpkg-deb --root-owner-group --build "$root" "$out/cudampi_${ver}_${arch}.deb" >/dev/null
echo "$out/cudampi_${ver}_${arch}.deb"
