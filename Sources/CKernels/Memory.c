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

void fk_prefetch_lines(const uintptr_t *addrs, long n) {
    for (long i = 0; i < n; i++)
        if (addrs[i]) __builtin_prefetch((const void *)addrs[i], 0, 3);
}
