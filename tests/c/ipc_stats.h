/* tests/c/ipc_stats.h -- the bytes cudampi has sent over CUDA IPC, for the tests that check which
 * messages took that path. cudampi_get_stats is looked up at run time, so that such a test also
 * builds and runs where cudampi is not loaded. */
#ifndef IPC_STATS_H
#define IPC_STATS_H

#include "common.h"
#include "../../include/cudampi.h"

typedef int (*stats_fn)(struct cudampi_stats *);

/* cudampi_get_stats, or NULL where cudampi is not loaded. */
T_UNUSED static stats_fn stats_lookup(void)
{
    return (stats_fn)dlsym(RTLD_DEFAULT, "cudampi_get_stats");
}

/* The bytes sent over IPC so far (0 without `get`). */
T_UNUSED static unsigned long long ipc_sent(stats_fn get)
{
    struct cudampi_stats s;
    memset(&s, 0, sizeof s);
    return get && get(&s) == 0 ? s.ipc_bytes_sent : 0;
}

#endif
