/* A parent with live objects forks children while another thread allocates; each child checks
 * the parent's objects, frees some, allocates, grows and frees its own; the parent then checks
 * that its objects are intact and frees them. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 12
static unsigned char *obj[N];
static size_t len[N];
static volatile int stop;

static void fill(unsigned char *p, size_t n, int k) { for (size_t i = 0; i < n; i += 97) p[i] = (unsigned char)(k * 7 + i); }
static int check(const unsigned char *p, size_t n, int k) {
    for (size_t i = 0; i < n; i += 97) if (p[i] != (unsigned char)(k * 7 + i)) return 0;
    return 1;
}

static void *churn(void *arg) {
    (void)arg;
    unsigned long i = 0;
    while (!stop) {
        size_t n = 4096 + (i++ % 17) * 3000;
        unsigned char *p = malloc(n);
        if (p) { memset(p, 1, n); p = realloc(p, n * 2); free(p); }
        free(malloc(100));
    }
    return NULL;
}

static int child(int c) {
    int ok = 1;
    for (int k = 0; k < N; k++) ok &= check(obj[k], len[k], k);
    for (int k = c % 2; k < N; k += 2) { free(obj[k]); obj[k] = NULL; }
    for (int r = 0; r < 200; r++) {
        size_t n = (r % 3 == 0) ? 64 + r : 4096 * (1 + r % 9) + r;
        unsigned char *p = malloc(n);
        if (!p) return 0;
        fill(p, n, r);
        unsigned char *q = realloc(p, n * 3);
        if (!q) return 0;
        ok &= check(q, n, r);
        free(q);
    }
    for (int k = 0; k < N; k++) if (obj[k]) { ok &= check(obj[k], len[k], k); free(obj[k]); }
    return ok;
}

int main(void) {
    for (int k = 0; k < N; k++) {
        len[k] = (k % 3 == 0) ? 200 + k : 4096 * (k + 1) + 123 * k;
        obj[k] = malloc(len[k]);
        fill(obj[k], len[k], k);
    }
    pthread_t th;
    pthread_create(&th, NULL, churn, NULL);
    int good = 0;
    for (int c = 0; c < 6; c++) {
        pid_t pid = fork();
        if (pid == 0) _exit(child(c) ? 0 : 1);
        int st = 0;
        waitpid(pid, &st, 0);
        good += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    stop = 1;
    pthread_join(th, NULL);
    int ok = 1;
    for (int k = 0; k < N; k++) { ok &= check(obj[k], len[k], k); free(obj[k]); }
    char buf[128];
    int n = snprintf(buf, sizeof buf, "children ok %d of 6, parent %s\n", good, ok ? "ok" : "corrupt");
    write(1, buf, n);
    return !(ok && good == 6);
}
