"""cudampi's wheel: a PEP 517 build backend (pyproject.toml at the repository's root names it),
and the same build from the command line.

    pip wheel --no-deps -w DIST .                        (from the repository: cargo builds the library)
    python3 packaging/python/cudampi_build.py wheel DIST [--lib PATH]

The wheel holds the library cargo built, not a Python extension: `cudampi/lib/libcudampi.so`,
the headers under `cudampi/include` (`cudampi.h`, `cudampi-ext/mpi-ext.h`), `cudampi/bin/
cudampi-run` (the repository's script, which finds the library beside it), the package's
Python files, and a `cudampi-run` console script. A backend of its own rather than maturin or
setuptools: maturin packages Rust code that Python imports, which this library is not, and
both would need to be fetched into the build environment, where this needs nothing but the
standard library and cargo. The wheel is tagged `py3-none-manylinux_2_<N>_<arch>`, N being
the newest glibc symbol version the library needs (`objdump -T`); auditwheel confirms it
(tests/scripts/packages.sh).
"""
import base64
import csv
import hashlib
import io
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cudampi")
SUMMARY = "Makes any MPI CUDA-aware: device buffers through MPI built without CUDA"


def version():
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        for line in f:
            m = re.match(r'\s*version\s*=\s*"([^"]+)"', line)
            if m:
                return m.group(1)
    raise RuntimeError("cudampi_build: no version in Cargo.toml")


def built_library(lib=None):
    """The library to package: LIB, CUDAMPI_PREBUILT_LIB, or cargo's release build (made now)."""
    lib = lib or os.environ.get("CUDAMPI_PREBUILT_LIB")
    if lib:
        return os.path.abspath(lib)
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    if not os.path.exists(cargo):
        raise RuntimeError("cudampi_build: cargo is needed to build libcudampi.so (or set CUDAMPI_PREBUILT_LIB)")
    subprocess.check_call([cargo, "build", "--release"], cwd=ROOT, stdout=sys.stderr)
    return os.path.join(ROOT, "target", "release", "libcudampi.so")


def glibc_tag(lib):
    """manylinux_2_N_ARCH, N the newest GLIBC_2.N the library's dynamic symbols need."""
    out = subprocess.run(["objdump", "-T", lib], check=True, capture_output=True, text=True).stdout
    minors = [int(m) for m in re.findall(r"GLIBC_2\.(\d+)", out)] or [17]
    return "manylinux_2_%d_%s" % (max(minors), platform.machine())


def stripped_copy(lib, into):
    """The library without its symbol table and debug sections (the release profile keeps them;
    the dynamic symbols, which the loader and the MPI programs use, stay)."""
    dst = os.path.join(into, "libcudampi.so")
    shutil.copyfile(lib, dst)
    if shutil.which("strip"):
        subprocess.check_call(["strip", dst])
    return dst


def files(lib):
    """(path in the wheel, source path, executable) of everything the package holds."""
    out = [("cudampi/" + n, os.path.join(PKG, n), False) for n in sorted(os.listdir(PKG)) if n.endswith(".py")]
    out += [
        ("cudampi/lib/libcudampi.so", lib, True),
        ("cudampi/include/cudampi.h", os.path.join(ROOT, "include", "cudampi.h"), False),
        ("cudampi/include/cudampi-ext/mpi-ext.h", os.path.join(ROOT, "include", "cudampi-ext", "mpi-ext.h"), False),
        ("cudampi/bin/cudampi-run", os.path.join(ROOT, "scripts", "cudampi-run"), True),
    ]
    return out


def metadata(ver):
    return "\n".join([
        "Metadata-Version: 2.1",
        "Name: cudampi",
        "Version: " + ver,
        "Summary: " + SUMMARY,
        "License: MIT OR Apache-2.0",
        "Requires-Python: >=3.8",
        "Description-Content-Type: text/markdown",
        "",
        "libcudampi.so, preloaded under an MPI program (C, Fortran, Python with mpi4py), makes an MPI",
        "built without CUDA accept GPU device buffers. `cudampi-run -n 2 python3 prog.py` starts a",
        "program under it; `python -m cudampi info` says what it finds; `cudampi.library_path()` and",
        "`cudampi.include_path()` give its files.",
        "",
    ])


def write_wheel(directory, lib=None):
    ver = version()
    with tempfile.TemporaryDirectory() as tmp:
        so = stripped_copy(built_library(lib), tmp)
        tag = "py3-none-" + glibc_tag(so)
        name = "cudampi-%s-%s.whl" % (ver, tag)
        info = "cudampi-%s.dist-info" % ver
        extra = {
            info + "/METADATA": metadata(ver),
            info + "/WHEEL": "Wheel-Version: 1.0\nGenerator: cudampi_build\nRoot-Is-Purelib: false\nTag: %s\n" % tag,
            info + "/entry_points.txt": "[console_scripts]\ncudampi-run = cudampi:run_main\n",
        }
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        record = []
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:

            def add(arc, data, executable):
                zi = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
                zi.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append((arc, "sha256=" + digest, str(len(data))))

            for arc, src, executable in files(so):
                with open(src, "rb") as f:
                    add(arc, f.read(), executable)
            for arc, text in extra.items():
                add(arc, text.encode(), False)
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerows(record)
            w.writerow((info + "/RECORD", "", ""))
            zi = zipfile.ZipInfo(info + "/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = (0o644 | stat.S_IFREG) << 16
            z.writestr(zi, buf.getvalue())
    return name


# ---- PEP 517 ----------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return write_wheel(wheel_directory)


def main(argv):
    if len(argv) >= 2 and argv[0] == "wheel":
        lib = argv[argv.index("--lib") + 1] if "--lib" in argv else None
        print(os.path.join(argv[1], write_wheel(argv[1], lib)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
