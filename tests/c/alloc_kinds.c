// cudampi-test: ranks=2 without-shim=pass
/* MPI 4.1's memory allocation kinds and the CUDA-support queries. Without cudampi the
 * library's own answers are printed and only their consistency is checked. With cudampi:
 *   - MPIX_Query_cuda_support() is 1 and MPIX_GPU_query_support(CUDA) reports 1;
 *   - the info key mpi_memory_alloc_kinds of MPI_INFO_ENV (read with MPI_Info_get,
 *     MPI_Info_get_valuelen, MPI_Info_get_string where the library has it, through
 *     MPI_Info_get_nkeys/_nthkey, and from MPI_Info_dup), of MPI_Comm_get_info,
 *     MPI_Win_get_info and MPI_File_get_info lists cuda:device, cuda:host and cuda:managed,
 *     after every kind the library lists itself (compared with the run without cudampi, whose
 *     kinds are read from the same calls with CMTEST_MODE=noshim: here the library's kinds are
 *     those that do not start with "cuda:");
 *   - each kind appears once. */
#include "common.h"
#include <unistd.h>

static const char *KEY = "mpi_memory_alloc_kinds";

/* The value of KEY in info (""  when absent), through MPI_Info_get_valuelen + MPI_Info_get. */
static void value_of(MPI_Info info, char *out, int room)
{
    int len = 0, flag = 0;
    out[0] = 0;
    MPI_CHECK(MPI_Info_get_valuelen(info, KEY, &len, &flag));
    if (!flag) return;
    CHECK(len < room, "value of %d characters", len);
    MPI_CHECK(MPI_Info_get(info, KEY, room - 1, out, &flag));
    CHECK(flag, "MPI_Info_get does not find the key MPI_Info_get_valuelen found");
}

static int count_kind(const char *list, const char *kind)
{
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, kind) == 0) n++;
    return n;
}

static void check_kinds(const char *where, const char *v, int shim)
{
    if (t_rank == 0) note("%s: %s = \"%s\"", where, KEY, v);
    if (!shim) return;
    const char *cuda[] = {"cuda:device", "cuda:host", "cuda:managed"};
    for (int i = 0; i < 3; i++)
        CHECK(count_kind(v, cuda[i]) == 1, "%s: %s lists %s %d times: \"%s\"", where, KEY, cuda[i],
              count_kind(v, cuda[i]), v);
    /* the library's kinds come first, then cudampi's */
    const char *first_cuda = strstr(v, "cuda:");
    if (first_cuda) {
        char rest[1024];
        snprintf(rest, sizeof rest, "%s", first_cuda);
        for (char *save = NULL, *t = strtok_r(rest, ",", &save); t; t = strtok_r(NULL, ",", &save))
            CHECK(strncmp(t, "cuda:", 5) == 0, "%s: the library's kind %s comes after cudampi's: \"%s\"", where, t, v);
    }
}

typedef int (*get_string_fn)(MPI_Info, const char *, int *, char *, int *);
typedef int (*query_fn)(void);
typedef int (*gpu_query_fn)(int, int *);

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    int shim = shim_loaded();
    char v[1024], w[1024];

    query_fn q = (query_fn)dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    gpu_query_fn g = (gpu_query_fn)dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support");
    if (shim) {
        if (CHECK(q != NULL, "MPIX_Query_cuda_support is not exported")) CHECK(q() == 1, "MPIX_Query_cuda_support() = %d", q());
        int s = -1;
        if (CHECK(g != NULL, "MPIX_GPU_query_support is not exported")) {
            MPI_CHECK(g(0, &s));
            CHECK(s == 1, "MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) gives %d", s);
        }
    }

    value_of(MPI_INFO_ENV, v, sizeof v);
    check_kinds("MPI_INFO_ENV", v, shim);

    /* MPI_Info_get_string (MPI-4), served by cudampi where the library lacks it */
    get_string_fn gs = (get_string_fn)dlsym(RTLD_DEFAULT, "MPI_Info_get_string");
    if (gs) {
        int buflen = 0, flag = 0;
        char none[1] = {0x5A}; /* MPICH 4.0 refuses a null value even with buflen 0 */
        MPI_CHECK(gs(MPI_INFO_ENV, KEY, &buflen, none, &flag));
        CHECK(flag == (v[0] != 0), "MPI_Info_get_string finds the key: %d", flag);
        if (flag) {
            CHECK(buflen == (int)strlen(v) + 1, "MPI_Info_get_string: length %d, expected %d", buflen, (int)strlen(v) + 1);
            char s[1024];
            memset(s, 0x5A, sizeof s);
            buflen = sizeof s;
            MPI_CHECK(gs(MPI_INFO_ENV, KEY, &buflen, s, &flag));
            CHECK(flag && strcmp(s, v) == 0, "MPI_Info_get_string gives \"%s\", MPI_Info_get \"%s\"", s, v);
            /* a buffer too short: cut, NUL-terminated, the full length reported */
            memset(s, 0x5A, sizeof s);
            buflen = 6;
            MPI_CHECK(gs(MPI_INFO_ENV, KEY, &buflen, s, &flag));
            CHECK(strlen(v) < 5 || (strncmp(s, v, 5) == 0 && s[5] == 0), "MPI_Info_get_string into 6 bytes gives \"%.8s\"", s);
            CHECK(buflen == (int)strlen(v) + 1, "MPI_Info_get_string into 6 bytes reports %d", buflen);
        }
    } else if (t_rank == 0) {
        note("no MPI_Info_get_string");
    }

    /* the keys listed one by one name it; a duplicate carries it */
    int nkeys = 0, found = 0;
    MPI_CHECK(MPI_Info_get_nkeys(MPI_INFO_ENV, &nkeys));
    for (int i = 0; i < nkeys; i++) {
        char k[MPI_MAX_INFO_KEY + 1];
        MPI_CHECK(MPI_Info_get_nthkey(MPI_INFO_ENV, i, k));
        found += strcmp(k, KEY) == 0;
    }
    CHECK(found == (v[0] != 0), "MPI_Info_get_nthkey lists the key %d times", found);
    MPI_Info dup;
    MPI_CHECK(MPI_Info_dup(MPI_INFO_ENV, &dup));
    value_of(dup, w, sizeof w);
    CHECK(strcmp(v, w) == 0, "a duplicate of MPI_INFO_ENV has \"%s\", MPI_INFO_ENV \"%s\"", w, v);
    MPI_Info_free(&dup);

    /* communicators, windows, files */
    MPI_Info info;
    MPI_CHECK(MPI_Comm_get_info(MPI_COMM_WORLD, &info));
    value_of(info, w, sizeof w);
    check_kinds("MPI_Comm_get_info", w, shim);
    MPI_Info_free(&info);

    /* Windows may fail to be made at all (the GPU machine's Open MPI 4.1.6 chooses a one-sided
     * component that cannot run there): then there is nothing to ask. */
    int *base = NULL;
    MPI_Win win;
    MPI_Comm quiet;
    MPI_Comm_dup(MPI_COMM_WORLD, &quiet);
    MPI_Comm_set_errhandler(quiet, MPI_ERRORS_RETURN);
    int made = MPI_Win_allocate(64, 1, MPI_INFO_NULL, quiet, &base, &win) == MPI_SUCCESS, all = 0;
    MPI_Allreduce(&made, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) {
        MPI_CHECK(MPI_Win_get_info(win, &info));
        value_of(info, w, sizeof w);
        check_kinds("MPI_Win_get_info", w, shim);
        MPI_Info_free(&info);
    } else if (t_rank == 0) {
        note("MPI_Win_allocate fails with this library: MPI_Win_get_info not asked");
    }
    if (made) MPI_Win_free(&win);
    MPI_Comm_free(&quiet);

    char path[256];
    snprintf(path, sizeof path, "%s/cudampi-kinds-%d.dat", t_env("TMPDIR", "/tmp"), (int)getpid());
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                            MPI_INFO_NULL, &fh));
    MPI_CHECK(MPI_File_get_info(fh, &info));
    value_of(info, w, sizeof w);
    check_kinds("MPI_File_get_info", w, shim);
    MPI_Info_free(&info);
    MPI_File_close(&fh);
    return report_and_finalize();
}
