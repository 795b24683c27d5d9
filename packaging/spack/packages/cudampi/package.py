# Spack package for cudampi. Its releases are read from releases.json beside this file:
# packaging/dist.sh writes the tarball and a copy of this repository whose releases.json names
# it; a site that serves the tarball from its own mirror lists that address there.
import json
import os

from spack.package import *


def _releases():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "releases.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return []


class Cudampi(MakefilePackage):
    """Makes any MPI library CUDA-aware without rebuilding it: libcudampi.so, preloaded under
    (or linked into) an MPI program, stages device buffers through pinned host memory, moves
    them GPU to GPU over CUDA IPC inside a node, and runs device collectives on NCCL, under an
    MPI built without CUDA support. The CUDA driver, NCCL and the MPI are found at run time."""

    license("MIT OR Apache-2.0")

    for _r in _releases():
        version(_r["version"], sha256=_r["sha256"], url=_r["url"])

    depends_on("c", type="build")
    depends_on("gmake", type="build")
    depends_on("rust@1.80:", type="build")

    def build(self, spec, prefix):
        # The tarball vendors its crates (.cargo/config.toml): no network.
        make("build", "CARGO=cargo --offline")

    def install(self, spec, prefix):
        make("install", "PREFIX={0}".format(prefix), "CARGO=cargo --offline")

    def setup_run_environment(self, env):
        # The module's LD_PRELOAD-ready path, as cudampi-run (on PATH) reads it:
        #   LD_PRELOAD=$CUDAMPI_LIB mpirun ...   or   cudampi-run -n 2 ./app
        env.set("CUDAMPI_LIB", join_path(self.prefix.lib, "libcudampi.so"))
