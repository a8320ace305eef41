/* One allocation wrapper called from three places, each with its own size: two callers of the
 * same shape at the same depth (so the wrapper's call to malloc comes from the same address at
 * the same stack address: only the callers' return addresses tell them apart), and one whose
 * frame changes size every call (alloca). Each place must keep one site id of its own. */
#include <alloca.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static void *wrap(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) static void *from_a(void) { void *p = wrap(8192); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) static void *from_b(void) { void *p = wrap(12288); __asm__ volatile("" ::: "memory"); return p; }
__attribute__((noinline)) static void *from_c(int i) {
    volatile char *pad = alloca(64 + 48 * (i % 7));
    pad[0] = 1;
    void *p = wrap(16384);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void) {
    for (int i = 0; i < 60; i++) {
        char *a = from_a(), *b = from_b(), *c = from_c(i);
        a[0] = b[0] = c[0] = 1;
        free(a);
        free(b);
        free(c);
    }
    write(1, "done\n", 5);
    return 0;
}
