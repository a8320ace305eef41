/* One call site allocates twice; between the two the test advises node 0 for that site. Prints
 * each object's memory policy (get_mempolicy MPOL_F_ADDR) and, after touching it, the node of
 * its first page (move_pages with no target). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_F_ADDR (1 << 1)

__attribute__((noinline)) static void *site(void) { void *p = malloc(65536); __asm__ volatile("" ::: "memory"); return p; }

int main(void) {
    void *p[2];
    char buf[256];
    /* One call instruction for both objects: a loop the compiler cannot peel into two calls. */
    volatile int rounds = 2;
#pragma GCC unroll 1
    for (int i = 0; i < rounds; i++) {
        p[i] = site();
        if (i == 0) {
            write(1, "ready\n", 6);
            if (read(0, buf, sizeof buf) <= 0) return 2;
        }
    }
    for (int i = 0; i < 2; i++) {
        int mode = -1;
        unsigned long mask[16] = {0};
        long r = syscall(SYS_get_mempolicy, &mode, mask, 1024, p[i], MPOL_F_ADDR);
        memset(p[i], 1, 65536);
        void *page = p[i];
        int status = -1;
        long m = syscall(SYS_move_pages, 0, 1, &page, NULL, &status, 0);
        int n = snprintf(buf, sizeof buf, "object %d rc %ld mode %d mask %lu node %d (rc %ld)\n", i, r, mode,
                         mask[0], status, m);
        write(1, buf, n);
        free(p[i]);
    }
    return 0;
}
