/* Objects for the huge-page rule (docs/objects-runtime.md, "Huge pages"): two of 1 MiB from one
 * site (fresh mappings, which the kernel places side by side and merges into one VMA), one of
 * 3 MiB and one of 1 MiB aligned to 64 KiB. Touches every page, prints the four addresses, then
 * waits for a line on stdin before freeing them, so that the test can read /proc/PID/smaps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    char *small[2];
    for (int i = 0; i < 2; i++) small[i] = malloc(1 << 20);
    char *large = malloc(3 << 20);
    void *aligned = NULL;
    if (!small[0] || !small[1] || !large || posix_memalign(&aligned, 65536, 1 << 20)) return 2;
    memset(small[0], 1, 1 << 20);
    memset(small[1], 2, 1 << 20);
    memset(large, 3, 3 << 20);
    memset(aligned, 4, 1 << 20);
    printf("%lx %lx %lx %lx\n", (unsigned long)small[0], (unsigned long)small[1], (unsigned long)large,
           (unsigned long)aligned);
    fflush(stdout);
    char buf[16];
    if (read(0, buf, sizeof buf) <= 0) return 3;
    free(small[0]);
    free(small[1]);
    free(large);
    free(aligned);
    return 0;
}
