/* Statistics of an allotheque malloc (any library made with
 * ALLOTHEQUE_DEFINE_MALLOC, the shipped ones included), for C and C++.
 *
 * The functions are declared weak: a program that includes this header links
 * whether or not an allotheque malloc is there, and finds out at run time:
 *
 *     struct allotheque_stats s;
 *     if (allotheque_malloc_stats && allotheque_malloc_stats(&s) == 0) ...
 *
 * They allocate nothing and may be called from any thread at any time. The
 * figures of a heap another thread is using are read without stopping it:
 * each is a recent value, and two of them may be from slightly different
 * moments. docs/malloc.md says what each figure counts and how closely
 * resident_bytes follows the kernel's VmRSS. */
#ifndef ALLOTHEQUE_MALLOC_STATS_H
#define ALLOTHEQUE_MALLOC_STATS_H

#include <stddef.h>

/* Weak in every file, the one that defines them (ALLOTHEQUE_DEFINE_MALLOC)
 * included: its definitions are then weak symbols too, which the dynamic
 * linker and a static link resolve like any other. */
#define ALLOTHEQUE_STATS_WEAK __attribute__((weak))

#ifdef __cplusplus
extern "C" {
#endif

struct allotheque_stats {
    size_t heaps;                /* thread heaps counted (1 for one heap's row) */
    size_t orphaned_heaps;       /* of which no live thread holds (adoptable) */
    size_t active_bytes;         /* in spans holding blocks: small spans and large blocks */
    size_t large_blocks;         /* blocks that are spans of their own */
    size_t large_bytes;          /* their bytes */
    size_t os_bytes;             /* held from the system: spans, free pages kept, span records */
    size_t peak_os_bytes;        /* sum of each heap's high-water mark of os_bytes */
    size_t resident_bytes;       /* os_bytes less the free pages given back (decommitted) */
    size_t free_bytes;           /* free pages kept for reuse (the large-block cache) */
    size_t metadata_bytes;       /* class tables and span records */
    size_t returned_bytes;       /* given back to the system so far */
    size_t decommitted_bytes;    /* decommitted so far */
    size_t remote_pending_heaps; /* heaps with frees from other threads not yet taken back */
};

/* The whole process: every thread heap summed. 0 on success, -1 if out is NULL. */
int allotheque_malloc_stats(struct allotheque_stats* out) ALLOTHEQUE_STATS_WEAK;

/* One row per thread heap, at most max of them; returns how many heaps exist
 * (more than max: call again with a larger array). */
size_t allotheque_malloc_heap_stats(struct allotheque_stats* out, size_t max) ALLOTHEQUE_STATS_WEAK;

/* Which declaration serves the process ("segregated", "velox", ...). */
const char* allotheque_malloc_heap_name(void) ALLOTHEQUE_STATS_WEAK;

#ifdef __cplusplus
}
#endif

#endif /* ALLOTHEQUE_MALLOC_STATS_H */
