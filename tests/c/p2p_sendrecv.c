// cudampi-test: ranks=2,4 without-shim=crash
/* MPI_Sendrecv and MPI_Sendrecv_replace around a ring, on device buffers and on mixed
 * placements (device send / host receive, per-rank parity mixes), each compared with the
 * same ring done on host buffers in the same run: received bytes (with poisoned slack after
 * the message) and statuses. */
#include "common.h"

#define SLACK_ELEMS 5 /* receive count exceeds the message: the extra stays poisoned */

static MPI_Comm comm;

/* placement configurations: kinds for (send, recv) on even ranks and on odd ranks */
struct cfg {
    const char *name;
    int even_s, even_r, odd_s, odd_r;
};
static const struct cfg cfgs[] = {
    {"H/H all (reference)", MEM_HOST, MEM_HOST, MEM_HOST, MEM_HOST},
    {"D/D all", MEM_DEVICE, MEM_DEVICE, MEM_DEVICE, MEM_DEVICE},
    {"D/H all", MEM_DEVICE, MEM_HOST, MEM_DEVICE, MEM_HOST},
    {"H/D all", MEM_HOST, MEM_DEVICE, MEM_HOST, MEM_DEVICE},
    {"even D/D odd H/H", MEM_DEVICE, MEM_DEVICE, MEM_HOST, MEM_HOST},
    {"even D/H odd H/D", MEM_DEVICE, MEM_HOST, MEM_HOST, MEM_DEVICE},
    {"managed/pinned", MEM_MANAGED, MEM_PINNED, MEM_PINNED, MEM_MANAGED},
};
#define NCFG ((int)(sizeof cfgs / sizeof cfgs[0]))

struct result {
    unsigned char *bytes;
    MPI_Status st;
};

static void ring_sendrecv(const struct cfg *c, MPI_Datatype dt, int count, int seed, struct result *r)
{
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    int odd = t_rank & 1;
    size_t es = type_size(dt), sb = (size_t)count * es, rb = (size_t)(count + SLACK_ELEMS) * es;
    void *s = mem_alloc(odd ? c->odd_s : c->even_s, sb);
    void *d = mem_alloc(odd ? c->odd_r : c->even_r, rb);
    mem_pattern(s, sb, t_rank, seed);
    mem_poison(d, rb);
    status_init(&r->st);
    MPI_CHECK(MPI_Sendrecv(s, count, dt, right, seed, d, count + SLACK_ELEMS, dt, left, seed, comm,
                           &r->st));
    r->bytes = mem_fetch(d, rb);
    /* the send buffer must be unchanged */
    unsigned char *sback = mem_fetch(s, sb), *sexp = pattern_new(sb, t_rank, seed);
    check_bytes(sback, sexp, sb, "Sendrecv %s: send buffer modified", c->name);
    free(sback);
    free(sexp);
    mem_free(s);
    mem_free(d);
}

static void ring_replace(int kind, MPI_Datatype dt, int count, int seed, struct result *r)
{
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    size_t es = type_size(dt), n = (size_t)count * es;
    void *b = mem_alloc(kind, n + 64);
    mem_pattern(b, n, t_rank, seed);
    mem_poison((char *)b + n, 64);
    status_init(&r->st);
    MPI_CHECK(MPI_Sendrecv_replace(b, count, dt, right, seed, left, seed, comm, &r->st));
    r->bytes = mem_fetch(b, n + 64);
    mem_free(b);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int left = (t_rank + t_size - 1) % t_size;
    MPI_Datatype types[3] = {MPI_CHAR, MPI_INT, MPI_DOUBLE};
    const int counts[] = {0, 1, 4097, 262147};
    int seed = 0;

    for (int ti = 0; ti < 3; ti++) {
        MPI_Datatype dt = types[ti];
        size_t es = type_size(dt);
        for (int ci = 0; ci < 4; ci++) {
            int count = counts[ci];
            size_t n = (size_t)count * es, rb = (size_t)(count + SLACK_ELEMS) * es;
            seed++;
            /* Sendrecv */
            unsigned char *exp = (unsigned char *)xmalloc(rb);
            pattern_fill(exp, n, left, seed);
            poison_fill(exp + n, rb - n);
            struct result ref, got;
            ring_sendrecv(&cfgs[0], dt, count, seed, &ref);
            check_bytes(ref.bytes, exp, rb, "Sendrecv %s count %d host ring", type_name(dt), count);
            check_status(&ref.st, dt, left, seed, count, "Sendrecv host ring");
            for (int c = 1; c < NCFG; c++) {
                ring_sendrecv(&cfgs[c], dt, count, seed, &got);
                check_bytes(got.bytes, ref.bytes, rb, "Sendrecv %s count %d %s vs host run",
                            type_name(dt), count, cfgs[c].name);
                check_bytes(got.bytes, exp, rb, "Sendrecv %s count %d %s vs pattern",
                            type_name(dt), count, cfgs[c].name);
                check_status_same(&ref.st, &got.st, dt, "Sendrecv %s count %d %s", type_name(dt),
                                  count, cfgs[c].name);
                free(got.bytes);
            }
            free(ref.bytes);
            free(exp);

            /* Sendrecv_replace */
            seed++;
            exp = (unsigned char *)xmalloc(n + 64);
            pattern_fill(exp, n, left, seed);
            poison_fill(exp + n, 64);
            ring_replace(MEM_HOST, dt, count, seed, &ref);
            check_bytes(ref.bytes, exp, n + 64, "Sendrecv_replace %s count %d host", type_name(dt),
                        count);
            check_status(&ref.st, dt, left, seed, count, "Sendrecv_replace host ring");
            const int kinds[4] = {MEM_DEVICE, (t_rank & 1) ? MEM_HOST : MEM_DEVICE, MEM_MANAGED,
                                  MEM_POOL};
            const char *kname[4] = {"device", "parity mix", "managed", "pool"};
            for (int k = 0; k < 4; k++) {
                ring_replace(kinds[k], dt, count, seed, &got);
                check_bytes(got.bytes, ref.bytes, n + 64, "Sendrecv_replace %s count %d %s vs host",
                            type_name(dt), count, kname[k]);
                check_bytes(got.bytes, exp, n + 64, "Sendrecv_replace %s count %d %s vs pattern",
                            type_name(dt), count, kname[k]);
                check_status_same(&ref.st, &got.st, dt, "Sendrecv_replace %s count %d %s",
                                  type_name(dt), count, kname[k]);
                free(got.bytes);
            }
            free(ref.bytes);
            free(exp);
        }
    }
    MPI_Comm_free(&comm);
    return report_and_finalize();
}
