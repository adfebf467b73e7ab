// Process memory helpers of the Interpreter (declared in CKernels.h).
#include "CKernels.h"

#include <stdlib.h> /* defines __GLIBC__ on glibc */
#if defined(__GLIBC__)
#include <malloc.h>
#endif

int fk_release_free_memory(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

int fk_tune_malloc(void) {
#if defined(__GLIBC__)
    return mallopt(M_ARENA_MAX, 1) && mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#else
    return 0;
#endif
}

uint64_t fk_read_sum(const void *p, long bytes) {
    const uint64_t *w = p;
    const long n = bytes / 8;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        // 8 KB ahead into L2, as the int8 GEMV streams its weights (one line an iteration).
        __builtin_prefetch((const char *)(w + i) + 8192, 0, 2);
        a0 += w[i], a1 += w[i + 1], a2 += w[i + 2], a3 += w[i + 3];
        a4 += w[i + 4], a5 += w[i + 5], a6 += w[i + 6], a7 += w[i + 7];
    }
    for (; i < n; i++) a0 += w[i];
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

void fk_prefetch_lines(const uintptr_t *addrs, long n) {
    for (long i = 0; i < n; i++)
        if (addrs[i]) __builtin_prefetch((const void *)addrs[i], 0, 3);
}
