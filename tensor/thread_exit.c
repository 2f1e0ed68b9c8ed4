/* tensor/thread_exit.c — per-thread cleanup when a thread exits. Scopes
 * (tensor/tensor.c), the tape (autograd/tape.c) and the profiler's event
 * buffer (tensor/events.c) keep heap state per thread; a thread that returns
 * with a scope or a tape still open, or with recorded events, would leak it. Each arms its slot while it holds such state, and one C11 thread-
 * specific-storage destructor runs the armed hooks at thread exit, the tape
 * first (its nodes hold references to tensors a scope may also hold). The
 * main thread's state is not freed at process exit (nothing leaks: the
 * process ends). */
#include <threads.h>
#include "internal.h"

static tss_t g_key;
static bool g_key_ok = false;
static once_flag g_once = ONCE_FLAG_INIT;
static _Thread_local void (*tl_hooks[MFT__TEXIT_COUNT])(void);

static void texit_run(void *armed) {
    (void)armed;
    for (int s = 0; s < MFT__TEXIT_COUNT; s++) {
        void (*fn)(void) = tl_hooks[s];
        tl_hooks[s] = NULL;
        if (fn) fn();
    }
}

static void texit_init(void) { g_key_ok = tss_create(&g_key, texit_run) == thrd_success; }

void mft__thread_exit_arm(mft__texit_slot slot, void (*fn)(void)) {
    call_once(&g_once, texit_init);
    tl_hooks[slot] = fn;
    if (g_key_ok) tss_set(g_key, (void *)tl_hooks); /* non-NULL: the destructor runs */
}

void mft__thread_exit_disarm(mft__texit_slot slot) { tl_hooks[slot] = NULL; }
