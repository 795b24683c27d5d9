/* One-sided scenario shared by rma_device.c and rma_host.c: every RMA communication call in a
 * fence, a PSCW, a lock/unlock and a lock_all/flush epoch, each rank the origin of operations on
 * the next rank's window (created over the memory, or a dynamic window it is attached to). A run records (struct trace) the whole window of this rank and every
 * result buffer after each epoch, so a run on device memory can be compared byte for byte with
 * the same run on host memory. Result buffers start poisoned; the window starts as the owner's
 * pattern, stored locally (which the separate model must publish before peers read it).
 *
 * Layout of the window (WIN_BYTES per rank, REGION bytes per origin rank, offsets within an
 * origin's region):
 *   0     MPI_Put, 64 int               256   MPI_Rput, 64 int (passive epochs)
 *   512   MPI_Accumulate SUM, 64 int    768   MPI_Raccumulate SUM, 32 double (passive)
 *   1024  MPI_Get_accumulate SUM, 64 int   1280  MPI_Rget_accumulate BXOR, 32 long long (passive)
 *   1536  MPI_Fetch_and_op SUM, int     1540  MPI_Compare_and_swap int (equal: swaps)
 *   1544  MPI_Compare_and_swap long long (not equal: keeps)
 *   1600  MPI_Put of a vector (8 blocks of 2 int, stride 4) from and to a vector
 *   2048  MPI_Accumulate MAX 64 float   2304  MIN 64 short   2432  SUM 128 unsigned char
 *   2560  BXOR 32 uint64                2816  REPLACE 64 int
 *   1560  MPI_Fetch_and_op NO_OP (reads the owner's store)
 *   3072..4096 read only: MPI_Get 64 int at 3072 (into a vector result with gaps at 3328),
 *               MPI_Rget 64 int at 3584 (passive)
 *   4096  MPI_Put_c  4352 MPI_Accumulate_c  4608 MPI_Get_accumulate_c  (where the symbol exists)
 *   6144..6400 read only: MPI_Get_c
 */
#ifndef RMA_OPS_H
#define RMA_OPS_H

#define REGION 8192
#define NREGION 4 /* regions per window: origin ranks 0..3 */
#define WIN_BYTES (REGION * NREGION)
#define RESULT_BYTES 8192

enum epoch { EPOCH_FENCE, EPOCH_PSCW, EPOCH_LOCK, EPOCH_LOCK_ALL, N_EPOCHS };
static const char *epoch_name[] = {"fence", "pscw", "lock", "lock_all"};

typedef int (*put_c_fn)(const void *, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win);
typedef int (*get_c_fn)(void *, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Win);
typedef int (*acc_c_fn)(const void *, MPI_Count, MPI_Datatype, int, MPI_Aint, MPI_Count, MPI_Datatype, MPI_Op, MPI_Win);
typedef int (*getacc_c_fn)(const void *, MPI_Count, MPI_Datatype, void *, MPI_Count, MPI_Datatype, int, MPI_Aint,
                           MPI_Count, MPI_Datatype, MPI_Op, MPI_Win);

/* Where the target's window starts, as an origin names it: 0 for a window created over its
 * memory, the target's MPI_Get_address of the attached memory for a dynamic window. */
static MPI_Aint rma_target_base = 0;

/* Whether cudampi maps a window created over device memory on `comm` into every rank of it
 * (all of them on one node, as MPI_Get_processor_name tells, however few, and IPC not turned
 * off): it is then MPI_WIN_UNIFIED. Collective over `comm`. */
static int windows_mapped(MPI_Comm comm)
{
    const char *ipc = getenv("CUDAMPI_IPC");
    int off = ipc && (!strcmp(ipc, "0") || !strcmp(ipc, "no") || !strcmp(ipc, "off") || !strcmp(ipc, "false"));
    char name[MPI_MAX_PROCESSOR_NAME] = {0}, first[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0, same, all = 0;
    MPI_CHECK(MPI_Get_processor_name(name, &len));
    memcpy(first, name, sizeof first);
    MPI_CHECK(MPI_Bcast(first, (int)sizeof first, MPI_CHAR, 0, comm));
    same = strcmp(first, name) == 0;
    MPI_CHECK(MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, comm));
    return shim_loaded() && !host_mode() && !off && all;
}

/* Whether cudampi carries out the operations on a window created over device memory on `comm`
 * itself: mapped inside a node, or served by the parts' owners elsewhere unless
 * CUDAMPI_RMA_RING=0 keeps a public copy. Such a window is MPI_WIN_UNIFIED, its synchronisations
 * cost no copy of it, and its accumulates combine with the library's MPI_Reduce_local.
 * Collective over `comm`. */
static int windows_carried(MPI_Comm comm)
{
    const char *ring = getenv("CUDAMPI_RMA_RING");
    int public_copy = ring && !strcmp(ring, "0");
    int mapped = windows_mapped(comm);
    return mapped || (shim_loaded() && !host_mode() && !public_copy);
}

/* The large-count functions, looked up by symbol: MPI-3 headers (Open MPI) do not declare
 * them, and a library without them gets them from cudampi. */
static void *rma_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

/* Issues every operation of this rank on `target`'s window. `origin` holds RESULT_BYTES of
 * origin data, `result` RESULT_BYTES of (poisoned) result space. */
static void rma_issue(MPI_Win win, int target, char *origin, char *result, int passive, MPI_Request *reqs, int *nreq)
{
    MPI_Aint base = MPI_Aint_add(rma_target_base, (MPI_Aint)REGION * t_rank);
    MPI_Datatype vec;
    MPI_CHECK(MPI_Type_vector(8, 2, 4, MPI_INT, &vec));
    MPI_CHECK(MPI_Type_commit(&vec));
    MPI_CHECK(MPI_Put(origin, 64, MPI_INT, target, base + 0, 64, MPI_INT, win));
    MPI_CHECK(MPI_Accumulate(origin + 256, 64, MPI_INT, target, base + 512, 64, MPI_INT, MPI_SUM, win));
    MPI_CHECK(MPI_Get_accumulate(origin + 512, 64, MPI_INT, result, 64, MPI_INT, target, base + 1024, 64, MPI_INT,
                                 MPI_SUM, win));
    MPI_CHECK(MPI_Fetch_and_op(origin + 768, result + 256, MPI_INT, target, base + 1536, MPI_SUM, win));
    /* Compare with the target's own initial value (its pattern), known to the origin only as
     * bytes read earlier: swap when equal. The host and device runs issue the same bytes. */
    MPI_CHECK(MPI_Compare_and_swap(origin + 772, origin + 776, result + 260, MPI_INT, target, base + 1540, win));
    MPI_CHECK(MPI_Compare_and_swap(origin + 784, origin + 792, result + 264, MPI_LONG_LONG, target, base + 1544, win));
    MPI_CHECK(MPI_Put(origin + 1024, 1, vec, target, base + 1600, 1, vec, win));
    MPI_CHECK(MPI_Accumulate(origin + 2048, 64, MPI_FLOAT, target, base + 2048, 64, MPI_FLOAT, MPI_MAX, win));
    MPI_CHECK(MPI_Accumulate(origin + 2304, 64, MPI_SHORT, target, base + 2304, 64, MPI_SHORT, MPI_MIN, win));
    MPI_CHECK(MPI_Accumulate(origin + 2432, 128, MPI_UNSIGNED_CHAR, target, base + 2432, 128, MPI_UNSIGNED_CHAR,
                             MPI_SUM, win));
    MPI_CHECK(MPI_Accumulate(origin + 2560, 32, MPI_UINT64_T, target, base + 2560, 32, MPI_UINT64_T, MPI_BXOR, win));
    MPI_CHECK(MPI_Accumulate(origin + 2816, 64, MPI_INT, target, base + 2816, 64, MPI_INT, MPI_REPLACE, win));
    MPI_CHECK(MPI_Fetch_and_op(NULL, result + 272, MPI_INT, target, base + 1560, MPI_NO_OP, win));
    MPI_CHECK(MPI_Get(result + 512, 64, MPI_INT, target, base + 3072, 64, MPI_INT, win));
    /* A result datatype with gaps: the poisoned gaps must survive. */
    MPI_CHECK(MPI_Get(result + 1024, 1, vec, target, base + 3328, 16, MPI_INT, win));
    MPI_CHECK(MPI_Type_free(&vec));

    put_c_fn put_c = (put_c_fn)rma_sym("MPI_Put_c");
    acc_c_fn acc_c = (acc_c_fn)rma_sym("MPI_Accumulate_c");
    getacc_c_fn getacc_c = (getacc_c_fn)rma_sym("MPI_Get_accumulate_c");
    get_c_fn get_c = (get_c_fn)rma_sym("MPI_Get_c");
    if (put_c) MPI_CHECK(put_c(origin + 3072, 64, MPI_INT, target, base + 4096, 64, MPI_INT, win));
    if (acc_c) MPI_CHECK(acc_c(origin + 3328, 64, MPI_INT, target, base + 4352, 64, MPI_INT, MPI_SUM, win));
    if (getacc_c)
        MPI_CHECK(getacc_c(origin + 3584, 64, MPI_INT, result + 2048, 64, MPI_INT, target, base + 4608, 64, MPI_INT,
                           MPI_SUM, win));
    if (get_c) MPI_CHECK(get_c(result + 2304, 64, MPI_INT, target, base + 6144, 64, MPI_INT, win));

    if (!passive) return;
    MPI_CHECK(MPI_Rput(origin + 4096, 64, MPI_INT, target, base + 256, 64, MPI_INT, win, &reqs[(*nreq)++]));
    MPI_CHECK(MPI_Raccumulate(origin + 4352, 32, MPI_DOUBLE, target, base + 768, 32, MPI_DOUBLE, MPI_SUM, win,
                              &reqs[(*nreq)++]));
    MPI_CHECK(MPI_Rget_accumulate(origin + 4608, 32, MPI_LONG_LONG, result + 3072, 32, MPI_LONG_LONG, target,
                                  base + 1280, 32, MPI_LONG_LONG, MPI_BXOR, win, &reqs[(*nreq)++]));
    MPI_CHECK(MPI_Rget(result + 3584, 64, MPI_INT, target, base + 3584, 64, MPI_INT, win, &reqs[(*nreq)++]));
}

/* Stores the owner's pattern into its window (a local store) and poisons the result space. */
static void rma_reset(char *winbuf, char *origin, char *result, int epoch)
{
    mem_pattern(winbuf, WIN_BYTES, t_rank, 100 + epoch);
    mem_pattern(origin, RESULT_BYTES, t_rank, 200 + epoch);
    /* The compare-and-swap compare values: the target's initial bytes (equal: swaps) and bytes
     * that differ from them (keeps). */
    int target = (t_rank + 1) % t_size;
    unsigned char *tw = pattern_new(WIN_BYTES, target, 100 + epoch);
    unsigned char *o = mem_fetch(origin, RESULT_BYTES);
    memcpy(o + 776, tw + (size_t)REGION * t_rank + 1540, 4);
    memcpy(o + 792, tw + (size_t)REGION * t_rank + 1544, 8);
    o[792] ^= 0x40;
    mem_put(origin, o, RESULT_BYTES);
    free(o);
    free(tw);
    mem_poison(result, RESULT_BYTES);
}

/* One epoch of every operation; records this rank's window and results in `t`. */
static void rma_epoch(struct trace *t, MPI_Win win, char *winbuf, char *origin, char *result, int epoch)
{
    int target = (t_rank + 1) % t_size, source = (t_rank + t_size - 1) % t_size;
    MPI_Request reqs[8];
    int nreq = 0;
    char label[64];
    rma_reset(winbuf, origin, result, epoch);
    switch (epoch) {
    case EPOCH_FENCE:
        MPI_CHECK(MPI_Win_fence(0, win));
        rma_issue(win, target, origin, result, 0, reqs, &nreq);
        /* A local store during the epoch to bytes no peer touches (this rank's own region):
         * the closing fence must keep it, not restore the public copy's older bytes. */
        mem_pattern(winbuf + (size_t)REGION * t_rank + 64, 512, t_rank, 300 + epoch);
        MPI_CHECK(MPI_Win_fence(0, win));
        break;
    case EPOCH_PSCW: {
        MPI_Group world, to, from;
        MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
        MPI_CHECK(MPI_Group_incl(world, 1, &target, &to));
        MPI_CHECK(MPI_Group_incl(world, 1, &source, &from));
        MPI_CHECK(MPI_Win_post(from, 0, win));
        MPI_CHECK(MPI_Win_start(to, 0, win));
        rma_issue(win, target, origin, result, 0, reqs, &nreq);
        /* A local store during the exposure epoch between bytes the peer updates: MPI_Win_wait
         * must bring the peer's updates without undoing it. */
        mem_pattern(winbuf + (size_t)REGION * source + 1800, 128, t_rank, 400 + epoch);
        MPI_CHECK(MPI_Win_complete(win));
        MPI_CHECK(MPI_Win_wait(win));
        MPI_Group_free(&world);
        MPI_Group_free(&to);
        MPI_Group_free(&from);
        break;
    }
    case EPOCH_LOCK:
        /* The owner's stores become public when it unlocks its own window. */
        MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win));
        MPI_CHECK(MPI_Win_unlock(t_rank, win));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win));
        rma_issue(win, target, origin, result, 1, reqs, &nreq);
        MPI_CHECK(MPI_Win_unlock(target, win));
        /* The unlock completed the request-based operations: their results are in place
         * before the requests are. */
        snprintf(label, sizeof label, "%s: rget result after unlock", epoch_name[epoch]);
        trace_mem(t, label, result + 3584, 256, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
        MPI_CHECK(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        /* Remote updates become private when the owner locks its window. */
        MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t_rank, 0, win));
        MPI_CHECK(MPI_Win_unlock(t_rank, win));
        break;
    case EPOCH_LOCK_ALL:
        MPI_CHECK(MPI_Win_lock_all(0, win));
        MPI_CHECK(MPI_Win_sync(win));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        rma_issue(win, target, origin, result, 1, reqs, &nreq);
        MPI_CHECK(MPI_Win_flush(target, win));
        /* Completed at the origin by the flush: a get's result is in the buffer now. */
        snprintf(label, sizeof label, "%s: get result after flush", epoch_name[epoch]);
        trace_mem(t, label, result + 512, 256, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
        snprintf(label, sizeof label, "%s: rget result after flush", epoch_name[epoch]);
        trace_mem(t, label, result + 3584, 256, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
        MPI_CHECK(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
        MPI_CHECK(MPI_Win_flush_local_all(win));
        MPI_CHECK(MPI_Win_flush_all(win));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_CHECK(MPI_Win_sync(win));
        MPI_CHECK(MPI_Win_unlock_all(win));
        break;
    }
    snprintf(label, sizeof label, "%s: window", epoch_name[epoch]);
    trace_mem(t, label, winbuf, WIN_BYTES, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    snprintf(label, sizeof label, "%s: results", epoch_name[epoch]);
    trace_mem(t, label, result, RESULT_BYTES, NULL, MPI_DATATYPE_NULL, MPI_SUCCESS);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Checks computed from the operations themselves, so that the host run is an oracle that can
 * fail too: put, accumulate SUM on int, get and fetch results. */
static const struct trace_rec *rma_record(const struct trace *t, int epoch, const char *what)
{
    char label[64];
    snprintf(label, sizeof label, "%s: %s", epoch_name[epoch], what);
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->r[i].label, label) == 0) return &t->r[i];
    DIE("no record %s", label);
    return NULL;
}

static void rma_expect(const struct trace *t, int epoch)
{
    int target = (t_rank + 1) % t_size, source = (t_rank + t_size - 1) % t_size;
    const struct trace_rec *w = rma_record(t, epoch, "window");
    const struct trace_rec *r = rma_record(t, epoch, "results");
    unsigned char *mine = pattern_new(WIN_BYTES, t_rank, 100 + epoch);
    unsigned char *theirs = pattern_new(WIN_BYTES, target, 100 + epoch);
    unsigned char *sent = pattern_new(RESULT_BYTES, source, 200 + epoch);
    unsigned char *msent = pattern_new(RESULT_BYTES, t_rank, 200 + epoch);
    size_t in = (size_t)REGION * source, out = (size_t)REGION * t_rank;
    check_bytes(w->bytes + in, sent, 256, "%s: MPI_Put landed", epoch_name[epoch]);
    for (int i = 0; i < 64; i++) {
        uint32_t a, b, got;
        memcpy(&a, mine + in + 512 + 4 * i, 4);
        memcpy(&b, sent + 256 + 4 * i, 4);
        memcpy(&got, w->bytes + in + 512 + 4 * i, 4);
        CHECK(got == a + b, "%s: MPI_Accumulate SUM element %d: %u, expected %u", epoch_name[epoch], i, got, a + b);
    }
    check_bytes(r->bytes, theirs + out + 1024, 256, "%s: MPI_Get_accumulate result", epoch_name[epoch]);
    check_bytes(r->bytes + 512, theirs + out + 3072, 256, "%s: MPI_Get result", epoch_name[epoch]);
    check_bytes(r->bytes + 272, theirs + out + 1560, 4, "%s: MPI_Fetch_and_op NO_OP result", epoch_name[epoch]);
    if (epoch == EPOCH_LOCK_ALL) {
        check_bytes(rma_record(t, epoch, "get result after flush")->bytes, theirs + out + 3072, 256,
                    "%s: MPI_Get result at the flush", epoch_name[epoch]);
        check_bytes(rma_record(t, epoch, "rget result after flush")->bytes, theirs + out + 3584, 256,
                    "%s: MPI_Rget result at the flush", epoch_name[epoch]);
    }
    if (epoch == EPOCH_LOCK)
        check_bytes(rma_record(t, epoch, "rget result after unlock")->bytes, theirs + out + 3584, 256,
                    "%s: MPI_Rget result at the unlock", epoch_name[epoch]);
    if (epoch == EPOCH_LOCK || epoch == EPOCH_LOCK_ALL)
        check_bytes(r->bytes + 3584, theirs + out + 3584, 256, "%s: MPI_Rget result", epoch_name[epoch]);
    check_bytes(r->bytes + 260, theirs + out + 1540, 4, "%s: MPI_Compare_and_swap result", epoch_name[epoch]);
    check_bytes(w->bytes + in + 1540, sent + 772, 4, "%s: MPI_Compare_and_swap swapped", epoch_name[epoch]);
    check_bytes(w->bytes + in + 1544, mine + in + 1544, 8, "%s: MPI_Compare_and_swap kept", epoch_name[epoch]);
    /* The vector get: blocks of 8 bytes every 16, gaps poisoned. */
    for (int b = 0; b < 8; b++) {
        check_bytes(r->bytes + 1024 + 16 * b, theirs + out + 3328 + 8 * b, 8, "%s: vector MPI_Get block %d",
                    epoch_name[epoch], b);
        if (b < 7) check_all(r->bytes + 1024 + 16 * b + 8, POISON_BYTE, 8, "%s: vector MPI_Get gap %d", epoch_name[epoch], b);
    }
    if (epoch == EPOCH_FENCE) {
        unsigned char *store = pattern_new(512, t_rank, 300 + epoch);
        check_bytes(w->bytes + out + 64, store, 512, "%s: local store during the epoch", epoch_name[epoch]);
        free(store);
    }
    if (epoch == EPOCH_PSCW) {
        unsigned char *store = pattern_new(128, t_rank, 400 + epoch);
        check_bytes(w->bytes + in + 1800, store, 128, "%s: local store during the epoch", epoch_name[epoch]);
        free(store);
    }
    /* Locations no peer touched keep the owner's stores. */
    check_bytes(w->bytes + in + 3072, mine + in + 3072, 1024, "%s: read-only part", epoch_name[epoch]);
    (void)msent;
    free(mine);
    free(theirs);
    free(sent);
    free(msent);
}

/* The window bytes the MPI_BXOR accumulates leave, computed from the operations: 32 uint64 at
 * 2560 in every epoch, 32 long long at 1280 in the passive ones (MPI_Rget_accumulate). `fixed`
 * becomes a copy of `ref` with those bytes; the answer is how many of them the library's own
 * run had otherwise. Open MPI 5.0.11's one-sided MPI_BXOR on 64-bit integers leaves zeros in
 * host windows without cudampi too; a window cudampi maps combines with the library's
 * MPI_Reduce_local, which gets them right, so such a run is compared against these bytes. */
static int rma_bxor_fixed(const struct trace *ref, struct trace *fixed)
{
    int differ = 0, source = (t_rank + t_size - 1) % t_size;
    size_t in = (size_t)REGION * source;
    fixed->n = fixed->cap = ref->n;
    fixed->r = (struct trace_rec *)xmalloc(sizeof *fixed->r * (size_t)(ref->n ? ref->n : 1));
    for (int i = 0; i < ref->n; i++) {
        fixed->r[i] = ref->r[i];
        fixed->r[i].bytes = (unsigned char *)xmalloc(ref->r[i].n ? ref->r[i].n : 1);
        memcpy(fixed->r[i].bytes, ref->r[i].bytes, ref->r[i].n);
        int epoch = -1;
        for (int e = 0; e < N_EPOCHS; e++) {
            char label[64];
            snprintf(label, sizeof label, "%s: window", epoch_name[e]);
            if (strcmp(ref->r[i].label, label) == 0) epoch = e;
        }
        if (strcmp(ref->r[i].label, "window after MPI_Win_free") == 0) epoch = EPOCH_LOCK_ALL;
        if (epoch < 0) continue;
        unsigned char *mine = pattern_new(WIN_BYTES, t_rank, 100 + epoch);
        unsigned char *sent = pattern_new(RESULT_BYTES, source, 200 + epoch);
        int passive = epoch == EPOCH_LOCK || epoch == EPOCH_LOCK_ALL;
        for (size_t k = 0; k < 256; k++) {
            unsigned char *w = fixed->r[i].bytes + in;
            unsigned char x = mine[in + 2560 + k] ^ sent[2560 + k];
            differ += w[2560 + k] != x;
            w[2560 + k] = x;
            if (!passive) continue;
            x = mine[in + 1280 + k] ^ sent[4608 + k];
            differ += w[1280 + k] != x;
            w[1280 + k] = x;
        }
        free(mine);
        free(sent);
    }
    return differ;
}

#endif
