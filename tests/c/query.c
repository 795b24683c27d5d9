// cudampi-test: ranks=2 without-shim=pass
/* Support queries. Without the shim nothing is asserted (the MPI's own answers are printed).
 * With the shim loaded (cudampi_version is found):
 *   - cudampi_version() returns a non-empty string;
 *   - MPIX_Query_cuda_support() returns 1;
 *   - MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA = 0, &s), where that symbol exists (the
 *     MPICH family exports it), reports s = 1.
 * The functions are looked up with dlsym(RTLD_DEFAULT, ...) so this compiles against every MPI
 * (Open MPI declares MPIX_Query_cuda_support only in mpi-ext.h, MPICH in mpi.h). */
#include "common.h"

typedef const char *(*version_fn)(void);
typedef int (*query_fn)(void);
typedef int (*gpu_query_fn)(int, int *);

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int shim = shim_loaded();
    version_fn ver = (version_fn)dlsym(RTLD_DEFAULT, "cudampi_version");
    query_fn q = (query_fn)dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    gpu_query_fn g = (gpu_query_fn)dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support");

    const char *v = ver ? ver() : NULL;
    int qv = q ? q() : -1;
    int gs = -1, grc = -1;
    if (g) grc = g(0 /* MPIX_GPU_SUPPORT_CUDA */, &gs);

    if (t_rank == 0)
        note("shim %s; cudampi_version() = %s; MPIX_Query_cuda_support %s -> %d; "
             "MPIX_GPU_query_support %s -> rc %d, cuda supported %d",
             shim ? "loaded" : "not loaded", v ? v : "(absent)", q ? "found" : "absent", qv,
             g ? "found" : "absent", grc, gs);

    if (shim) {
        CHECK(v != NULL && v[0] != 0, "cudampi_version() returned an empty string");
        if (CHECK(q != NULL, "MPIX_Query_cuda_support not exported with the shim loaded"))
            CHECK(qv == 1, "MPIX_Query_cuda_support() returned %d", qv);
        if (g) {
            CHECK(grc == MPI_SUCCESS, "MPIX_GPU_query_support returned %d", grc);
            CHECK(gs == 1, "MPIX_GPU_query_support(CUDA) reports %d", gs);
        }
    }
    /* all ranks agree */
    int mine[2] = {qv, gs}, mn[2], mx[2];
    MPI_Allreduce(mine, mn, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, mx, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(mn[0] == mx[0] && mn[1] == mx[1], "ranks disagree about support");
    return report_and_finalize();
}
