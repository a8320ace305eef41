/* Two call sites, each called many times: their objects must carry two site ids, one each. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static void *site_a(void) { void *p = malloc(8192); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) static void *site_b(void) { void *p = malloc(12288); __asm__ volatile("" ::: "memory"); return p; }

int main(void) {
    for (int i = 0; i < 50; i++) {
        char *a = site_a(), *b = site_b();
        a[0] = b[0] = 1;
        free(a);
        free(b);
    }
    write(1, "done\n", 5);
    return 0;
}
