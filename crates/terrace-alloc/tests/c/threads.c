/* Threads doing malloc/calloc/realloc/free and the aligned calls on mixed sizes, each checking
 * its blocks' contents, alignment and usable size. Output goes through write(2) so that stdio's
 * buffer is no object of its own: every block the program allocates, it frees. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 4
#define ITERS 6000
#define LIVE 48

struct blk { unsigned char *p; size_t n; unsigned char tag; };

static uint64_t rng(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

static size_t pick(uint64_t *s) {
    uint64_t r = rng(s);
    switch (r % 8) {
    case 0: case 1: case 2: return 1 + (r >> 8) % 2048;
    case 3: case 4: return 4096 + (r >> 8) % 61440;
    case 5: return 100000 + (r >> 8) % 200000;
    default: return 1 + (r >> 8) % 12288;
    }
}

static unsigned char val(unsigned char tag, size_t i) { return (unsigned char)(tag + i * 31); }

/* Marks the first and last 64 bytes and every 509th byte. */
static void fill(struct blk *b) {
    for (size_t i = 0; i < b->n; i = (i < 64 || i + 64 >= b->n) ? i + 1 : i + 509) b->p[i] = val(b->tag, i);
}

static int check(const struct blk *b, size_t upto) {
    size_t n = b->n < upto ? b->n : upto;
    for (size_t i = 0; i < n; i = (i < 64 || i + 64 >= b->n) ? i + 1 : i + 509)
        if (b->p[i] != val(b->tag, i)) return 0;
    return 1;
}

static int errors;
static uint64_t sums[THREADS];

static void *alloc_any(uint64_t *s, size_t n, int *zeroed) {
    void *p = NULL;
    size_t aligns[] = {16, 64, 4096, 8192, 65536};
    size_t a = aligns[rng(s) % 5];
    *zeroed = 0;
    switch (rng(s) % 7) {
    case 0: *zeroed = 1; return calloc(1, n);
    case 1: if (posix_memalign(&p, a, n) != 0) return NULL; break;
    case 2: p = aligned_alloc(a, (n + a - 1) / a * a); break;
    case 3: p = memalign(a, n); break;
    case 4: p = valloc(n); a = 4096; break;
    default: return malloc(n);
    }
    if (p && ((uintptr_t)p % a) != 0) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
    return p;
}

static void *worker(void *arg) {
    long t = (long)arg;
    uint64_t s = 0x9E3779B97F4A7C15ull * (t + 1);
    struct blk b[LIVE];
    memset(b, 0, sizeof b);
    for (int it = 0; it < ITERS; it++) {
        struct blk *x = &b[rng(&s) % LIVE];
        if (x->p) {
            if (!check(x, x->n)) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
            if (rng(&s) % 2) {
                size_t n = pick(&s);
                unsigned char *q = realloc(x->p, n);
                if (!q) { __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED); continue; }
                x->p = q;
                size_t keep = x->n < n ? x->n : n;
                if (!check(x, keep)) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
                x->n = n;
                fill(x);
                sums[t] += n;
                continue;
            }
            free(x->p);
            x->p = NULL;
            continue;
        }
        size_t n = pick(&s);
        int zeroed;
        x->p = alloc_any(&s, n, &zeroed);
        if (!x->p) { __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED); continue; }
        if (malloc_usable_size(x->p) < n) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        if (zeroed && (x->p[0] != 0 || x->p[n - 1] != 0 || x->p[n / 2] != 0))
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        x->n = n;
        x->tag = (unsigned char)rng(&s);
        fill(x);
        sums[t] += n;
    }
    for (int i = 0; i < LIVE; i++) {
        if (b[i].p && !check(&b[i], b[i].n)) __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        free(b[i].p);
    }
    return NULL;
}

int main(void) {
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (long t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    char buf[256];
    for (int t = 0; t < THREADS; t++) {
        int n = snprintf(buf, sizeof buf, "thread %d bytes %llu\n", t, (unsigned long long)sums[t]);
        write(1, buf, n);
    }
    int n = snprintf(buf, sizeof buf, "errors %d\n", errors);
    write(1, buf, n);
    return errors != 0;
}
