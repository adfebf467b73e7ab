// Per-thread scratch buffers of the kernels: allocated on first use, grown when a larger one is
// asked for, kept until the thread exits. The prefill routes used to allocate and free their
// panels on every call, on every worker thread: a malloc/free pair per product and, with large
// buffers served by mmap, page faults each time.
#include "ck_internal.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
    void *p[CK_SCRATCH_SLOTS];
    size_t bytes[CK_SCRATCH_SLOTS];
} ck_scratch_set;

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int key_ok;

static void release(void *v) {
    ck_scratch_set *s = v;
    for (int i = 0; i < CK_SCRATCH_SLOTS; i++) free(s->p[i]);
    free(s);
}

static void init(void) { key_ok = pthread_key_create(&key, release) == 0; }

void *ck_scratch(int slot, size_t bytes) {
    if (slot < 0 || slot >= CK_SCRATCH_SLOTS) return NULL;
    pthread_once(&once, init);
    if (!key_ok) return NULL;
    ck_scratch_set *s = pthread_getspecific(key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->bytes[slot] >= bytes && s->p[slot]) return s->p[slot];
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes > 0 ? bytes : 64) != 0) return NULL;
    free(s->p[slot]);
    s->p[slot] = p;
    s->bytes[slot] = bytes;
    return p;
}
