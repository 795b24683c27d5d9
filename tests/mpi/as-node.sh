#!/bin/sh
# tests/mpi/as-node.sh PROGRAM [ARGS...] — runs one rank of an MPI job as a node of its own:
# in a UTS namespace of its own whose host name is nodeR (R: the rank, from the launcher's
# variables), so that cudampi, which tells nodes apart by host name and boot id, takes its
# between-nodes path (chunks through pinned host memory; no CUDA IPC, no shared-memory
# agreement) while the MPI library, which learns the node layout from its launcher, still moves
# the bytes as on one machine. Needs `unshare -u` (root, or a user namespace).
#
#   mpirun -n 2 tests/mpi/as-node.sh build/tests/ompi4/ipc_p2p
#   tests/mpi/as-node.sh --check        exits 0 when this machine can run ranks so
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-}}}
if [ "${1:-}" = --check ]; then
    exec unshare -u sh -c 'hostname cudampi-node-check' >/dev/null 2>&1
fi
if [ -z "$r" ]; then
    echo "as-node: no rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK)" >&2
    exit 2
fi
exec unshare -u sh -c 'hostname "node$0" && exec "$@"' "$r" "$@"
