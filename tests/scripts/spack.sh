# cudampi-test: mpis=ompi4 timeout=900
# The release tarball and the Spack package, as Spack would take them (Spack itself is not
# installed here): packaging/dist.sh twice gives the same bytes; the tarball holds the build
# (vendored crates, .cargo/config.toml) and not the measurements; package.py, loaded with a
# stand-in of Spack's `spack.package` that records its directives, declares the class Spack
# requires (a MakefilePackage with a docstring, build and install phases, the release of
# releases.json with the tarball's sha256 and address, rust as a build dependency) and gives
# the module CUDAMPI_LIB; then the tarball's own `make build` and `make install` with cargo
# offline, as package.py runs them, into a prefix whose library exports the MPI calls and
# tells its version. Run on one MPI (Open MPI 4.1 from Debian): nothing here depends on it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "not a git checkout: packaging/dist.sh packs the files git tracks"
    exit 77
fi
failed=0
fail() { echo "   -> FAILED: $*"; failed=1; }
version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
name=cudampi-$version

echo "== the tarball"
packaging/dist.sh "$SCRATCH/a" || { echo "packaging/dist.sh failed"; exit 1; }
packaging/dist.sh "$SCRATCH/b" >/dev/null || { echo "packaging/dist.sh failed the second time"; exit 1; }
tarball=$SCRATCH/a/$name.tar.gz
cmp -s "$tarball" "$SCRATCH/b/$name.tar.gz" || fail "two runs of packaging/dist.sh gave different tarballs"
list=$(tar tzf "$tarball")
for f in Cargo.toml Cargo.lock Makefile build.rs src/lib.rs include/cudampi.h scripts/cudampi-run .cargo/config.toml vendor/libc/Cargo.toml vendor/cudarc/Cargo.toml; do
    grep -qx "$name/$f" <<<"$list" || fail "$f is not in the tarball"
done
grep -q "^$name/bench/results/\|^$name/packaging/spack/\|^$name/target/\|^$name/build/" <<<"$list" &&
    fail "the tarball holds measurements, the Spack recipe or build outputs"
echo "   $(basename "$tarball"): $(grep -c . <<<"$list") entries, $(du -k "$tarball" | cut -f1) KiB"

echo "== package.py"
python3 - "$SCRATCH/a/spack/packages/cudampi/package.py" "$tarball" "$version" "packaging/spack/packages/cudampi/package.py" <<'PY' || failed=1
import hashlib, importlib.util, inspect, sys, types

made, tarball, version, source = sys.argv[1:5]
rec = {"versions": [], "depends": [], "license": []}
stub = types.ModuleType("spack.package")
class PackageBase:
    pass
class MakefilePackage(PackageBase):
    phases = ("edit", "build", "install")
stub.MakefilePackage = MakefilePackage
stub.version = lambda v, **kw: rec["versions"].append((v, kw))
stub.depends_on = lambda spec, **kw: rec["depends"].append((spec, kw.get("type")))
stub.license = lambda l, **kw: rec["license"].append(l)
stub.join_path = lambda *p: "/".join(p)
stub.make = lambda *a, **kw: None
spack = types.ModuleType("spack")
spack.package = stub
sys.modules["spack"] = spack
sys.modules["spack.package"] = stub

def load(path):
    spec = importlib.util.spec_from_file_location("cudampi_package", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

bad = []
# the repository's own file: no release listed, and it loads
rec["versions"].clear()
load(source)
if rec["versions"]:
    bad.append("the repository's releases.json lists releases: it names none until one is published")
for k in rec:
    rec[k].clear()
mod = load(made)
cls = getattr(mod, "Cudampi", None)
if cls is None or not issubclass(cls, MakefilePackage):
    bad.append("no class Cudampi(MakefilePackage)")
else:
    if not (cls.__doc__ or "").strip():
        bad.append("the class has no docstring (spack info shows it)")
    for phase in ("build", "install", "setup_run_environment"):
        if not callable(getattr(cls, phase, None)) or phase not in cls.__dict__:
            bad.append("no %s method" % phase)
    digest = hashlib.sha256(open(tarball, "rb").read()).hexdigest()
    want = [(version, {"sha256": digest, "url": "file://" + tarball})]
    if rec["versions"] != want:
        bad.append("versions %r, expected %r" % (rec["versions"], want))
    if not any(s.startswith("rust@") and t == "build" for s, t in rec["depends"]):
        bad.append("no build dependency on rust: %r" % rec["depends"])
    if rec["license"] != ["MIT OR Apache-2.0"]:
        bad.append("license %r" % rec["license"])
    class Env:
        def __init__(self):
            self.set_vars = {}
        def set(self, k, v):
            self.set_vars[k] = v
    pkg = cls.__new__(cls)
    pkg.prefix = types.SimpleNamespace(lib="/opt/cudampi/lib")
    env = Env()
    cls.setup_run_environment(pkg, env)
    if env.set_vars.get("CUDAMPI_LIB") != "/opt/cudampi/lib/libcudampi.so":
        bad.append("the module sets %r, not CUDAMPI_LIB to the prefix's library" % env.set_vars)
    src = inspect.getsource(cls.build) + inspect.getsource(cls.install)
    if "--offline" not in src:
        bad.append("the phases do not run cargo offline")
for b in bad:
    print("   -> FAILED: package.py: " + b)
if not bad:
    print("   package.py: MakefilePackage, release %s (sha256 of the tarball), rust build dependency, CUDAMPI_LIB" % version)
sys.exit(1 if bad else 0)
PY

echo "== the tarball built offline, as package.py builds it"
tree=$SCRATCH/tree
rm -rf "$tree" "$SCRATCH/prefix"
mkdir -p "$tree"
tar xzf "$tarball" -C "$tree"
if (cd "$tree/$name" && env -u CARGO_TARGET_DIR make build "CARGO=cargo --offline" && make install PREFIX="$SCRATCH/prefix" "CARGO=cargo --offline") >"$SCRATCH/build.log" 2>&1; then
    lib=$SCRATCH/prefix/lib/libcudampi.so
    n=$(nm -D --defined-only "$lib" | grep -c ' T MPI_')
    [ "$n" -gt 300 ] || fail "the installed library exports $n MPI_ functions"
    got=$(python3 -c 'import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); l.cudampi_version.restype = ctypes.c_char_p; print(l.cudampi_version().decode())' "$lib")
    case $got in *"$version"*) echo "   $lib: $n MPI_ functions, $got" ;; *) fail "cudampi_version() says $got" ;; esac
    [ -x "$SCRATCH/prefix/bin/cudampi-run" ] || fail "no bin/cudampi-run in the prefix"
else
    tail -20 "$SCRATCH/build.log"
    fail "make build/install of the tarball with cargo offline"
fi
rm -rf "$tree"

[ $failed = 0 ] && echo "PASS spack: the tarball, package.py, the offline build" && exit 0
echo "FAIL spack"
exit 1
