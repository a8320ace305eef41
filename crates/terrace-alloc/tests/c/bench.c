/* An allocation-heavy program for the runtime's overhead benchmark.
 *   bench churn OPS   replace random blocks of a 4096-slot working set OPS times (sizes: 90% of
 *                     16..1023 B, 9% 4..32 KiB, 1% 64..512 KiB), writing every byte of each new
 *                     block; prints the loop's time.
 *   bench records N   keeps N objects of 4..16 KiB live and prints the resident bytes of the
 *                     runtime's side table (the 32 MiB mapping in /proc/self/smaps). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static long table_rss_kb(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    long rss = -1;
    while (f && fgets(line, sizeof line, f)) {
        long kb;
        if (sscanf(line, "Size: %ld kB", &kb) == 1) in = (kb == 32768);
        else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1) { rss = kb; break; }
    }
    if (f) fclose(f);
    return rss;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    long n = atol(argv[2]);
    uint64_t s = 88172645463325252ull;
    if (strcmp(argv[1], "records") == 0) {
        char **p = malloc(n * sizeof *p);
        for (long i = 0; i < n; i++) { p[i] = malloc(4096 + rng(&s) % 12288); p[i][0] = 1; }
        printf("records %ld table_rss_kb %ld\n", n, table_rss_kb());
        for (long i = 0; i < n; i++) free(p[i]);
        free(p);
        return 0;
    }
    enum { LIVE = 4096 };
    static unsigned char *slot[LIVE];
    uint64_t sum = 0;
    double t0 = now();
    for (long op = 0; op < n; op++) {
        uint64_t r = rng(&s);
        unsigned j = r % LIVE;
        size_t sz;
        unsigned k = (r >> 12) % 100;
        if (k < 90) sz = 16 + (r >> 20) % 1008;
        else if (k < 99) sz = 4096 + (r >> 20) % 28672;
        else sz = 65536 + (r >> 20) % 458752;
        free(slot[j]);
        slot[j] = malloc(sz);
        memset(slot[j], (int)op, sz);
        sum += slot[j][sz - 1];
    }
    double t = now() - t0;
    for (unsigned j = 0; j < LIVE; j++) free(slot[j]);
    printf("churn ops %ld seconds %.6f sum %llu\n", n, t, (unsigned long long)sum);
    return 0;
}
