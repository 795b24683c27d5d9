// cudampi-tool: not a test. Built by the harness as a shared library (tool=tests/c/pmpi_tool.c)
// and preloaded beside the shim in both orders; see p2p_tool.c.
/* A minimal PMPI tool, as profilers (mpiP, Score-P, TAU...) are built: it defines MPI_Send and
 * MPI_Recv, counts calls and bytes (size from PMPI_Type_size), and calls PMPI_Send/PMPI_Recv.
 * Exports pmpi_tool_calls() and pmpi_tool_bytes() for the test to read through dlsym.
 * Build: mpicc -shared -fPIC -o libpmpi_tool.so tests/c/pmpi_tool.c */
#include <mpi.h>

static int tool_calls;
static long long tool_bytes;

static void account(int count, MPI_Datatype dt)
{
    int sz = 0;
    if (count > 0 && PMPI_Type_size(dt, &sz) == MPI_SUCCESS)
        __atomic_add_fetch(&tool_bytes, (long long)count * sz, __ATOMIC_RELAXED);
    __atomic_add_fetch(&tool_calls, 1, __ATOMIC_RELAXED);
}

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    account(count, dt);
    return PMPI_Send(buf, count, dt, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    account(count, dt);
    return PMPI_Recv(buf, count, dt, source, tag, comm, status);
}

int pmpi_tool_calls(void) { return __atomic_load_n(&tool_calls, __ATOMIC_RELAXED); }
long long pmpi_tool_bytes(void) { return __atomic_load_n(&tool_bytes, __ATOMIC_RELAXED); }
