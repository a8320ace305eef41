/* Writes a 4 MiB buffer page by page for SECONDS, then puts itself under a seccomp filter of
 * its own (one that allows every system call) and executes PROGRAM. A tracer cannot know what
 * such a filter does with a system call it makes the program run, so Terrace refuses to make
 * one there: crates/terrace/tests/record.rs uses this to see a recording end at an exec it
 * cannot follow.
 *
 * usage: seccomp-exec SECONDS PROGRAM [ARG...] */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SECONDS PROGRAM [ARG...]\n", argv[0]);
        return 2;
    }
    double seconds = atof(argv[1]);
    size_t len = 4 << 20;
    volatile char *buf = malloc(len);
    if (!buf) {
        perror("malloc");
        return 2;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (size_t i = 0; i < len; i += 4096)
            buf[i]++;
    } while (since(&t0) < seconds);
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog filter = {.len = 1, .filter = allow};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter)) {
        perror("seccomp");
        return 2;
    }
    execvp(argv[2], argv + 2);
    perror("exec");
    return 127;
}
