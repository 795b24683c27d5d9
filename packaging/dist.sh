#!/usr/bin/env bash
# packaging/dist.sh OUTDIR — the release tarball and a Spack repository that builds it.
#
# OUTDIR/cudampi-<version>.tar.gz holds the files git tracks, as the working tree has them
# (bench/results and packaging/spack left out: measurements and the Spack recipe are not the
# build's), under cudampi-<version>/,
# with the crates the build needs in vendor/ and .cargo/config.toml pointing cargo at them, so
# that `make` builds it without a network, as Spack's build environments often must. Its bytes
# depend on the tracked files and the crates alone (sorted names, the last commit's time on
# every entry, no owner, gzip without a name or time): the same commit gives the same checksum.
#
# OUTDIR/spack/ is packaging/spack with releases.json naming that tarball (a file:// address)
# and its sha256: `spack repo add OUTDIR/spack && spack install cudampi` builds it. A site
# serves the tarball from its own mirror and puts that address in releases.json.
set -euo pipefail
out=${1:?usage: packaging/dist.sh OUTDIR}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 ||
    { echo "dist: needs a git checkout (the tarball holds the files git tracks)" >&2; exit 2; }
version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
name=cudampi-$version
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
top=$stage/$name
mkdir -p "$top"
git ls-files -z -- . ':!:bench/results' ':!:packaging/spack' | while IFS= read -r -d '' f; do
    [ -e "$f" ] || continue  # deleted in the working tree
    mkdir -p "$top/$(dirname "$f")"
    cp -p "$f" "$top/$f"
done
mkdir -p "$top/.cargo"
cargo vendor --quiet --locked --manifest-path "$top/Cargo.toml" "$top/vendor" >/dev/null
printf '%s\n' '# The crates of Cargo.lock, vendored by packaging/dist.sh: the build needs no network.' \
    '[source.crates-io]' 'replace-with = "vendored-sources"' '' '[source.vendored-sources]' \
    'directory = "vendor"' >"$top/.cargo/config.toml"
when=$(git log -1 --format=%ct)
tar --sort=name --mtime="@$when" --owner=0 --group=0 --numeric-owner --mode='u+rwX,go+rX,go-w' \
    -C "$stage" -cf - "$name" | gzip -9 -n >"$out/$name.tar.gz"
sum=$(sha256sum "$out/$name.tar.gz" | cut -d' ' -f1)
echo "$sum  $name.tar.gz" >"$out/$name.tar.gz.sha256"
rm -rf "$out/spack"
cp -r packaging/spack "$out/spack"
printf '[{"version": "%s", "url": "file://%s", "sha256": "%s"}]\n' "$version" "$out/$name.tar.gz" "$sum" \
    >"$out/spack/packages/cudampi/releases.json"
echo "$out/$name.tar.gz ($(du -k "$out/$name.tar.gz" | cut -f1) KiB, sha256 $sum)"
echo "$out/spack (spack repo add $out/spack)"
