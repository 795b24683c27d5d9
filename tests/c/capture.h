/* What cudampi printed to stderr during a stretch of a test: capture_begin() sends stderr to a
 * pipe, capture_end(word) restores it, passes the text on, and counts the lines that start with
 * "cudampi" (and contain `word`, unless it is NULL). At most 16 KiB of text is looked at. */
#ifndef CUDAMPI_TEST_CAPTURE_H
#define CUDAMPI_TEST_CAPTURE_H
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int cap_pipe[2] = {-1, -1}, cap_saved = -1;

T_UNUSED static void capture_begin(void)
{
    fflush(stderr);
    if (pipe(cap_pipe) != 0) DIE("pipe: %s", strerror(errno));
    fcntl(cap_pipe[0], F_SETFL, O_NONBLOCK);
    cap_saved = dup(2);
    dup2(cap_pipe[1], 2);
}

T_UNUSED static int capture_end(const char *word)
{
    char buf[16384];
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    close(cap_pipe[1]);
    ssize_t n = read(cap_pipe[0], buf, sizeof buf - 1);
    close(cap_pipe[0]);
    buf[n > 0 ? n : 0] = 0;
    if (n > 0) fputs(buf, stderr);
    int lines = 0;
    for (char *l = buf; *l;) {
        char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (strncmp(l, "cudampi", 7) == 0 && (!word || memmem(l, len, word, strlen(word)))) lines++;
        l += len + (end != NULL);
    }
    return lines;
}

#endif
