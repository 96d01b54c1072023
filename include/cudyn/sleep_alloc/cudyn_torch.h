/* cudyn — the sleeping allocator's plain C entry points (libcudyn-torch), for
 * PyTorch's CUDAPluggableAllocator (which loads cudyn_torch_alloc and
 * cudyn_torch_free by name) and for ctypes. No PyTorch or CUDA runtime header
 * is needed: a stream is the driver's CUstream, which is the runtime's
 * cudaStream_t.
 *
 * One allocator per process (cudyn/sleep_alloc/sleeping_allocator.hpp says
 * what it does). Calls returning int answer 0 on success, else a positive
 * code (cudyn::ErrorCode + 1), and cudyn_torch_last_error() then holds the
 * message on the calling thread. */
#ifndef CUDYN_SLEEP_ALLOC_CUDYN_TORCH_H
#define CUDYN_SLEEP_ALLOC_CUDYN_TORCH_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CUDYN_TORCH_API __attribute__((visibility("default")))
#else
#define CUDYN_TORCH_API
#endif

/* The signatures CUDAPluggableAllocator loads. The stream is not used to
 * order the allocation (VMM memory is not stream-ordered); a free waits for
 * the devices that may use the memory before it unmaps. NULL on failure. */
CUDYN_TORCH_API void* cudyn_torch_alloc(ssize_t size, int device, CUstream stream);
CUDYN_TORCH_API void cudyn_torch_free(void* ptr, ssize_t size, int device, CUstream stream);

/* The tag later allocations get (process-wide); the current one is written to
 * `buffer` (NUL-terminated, cut to `capacity`) by cudyn_torch_get_tag. */
CUDYN_TORCH_API int cudyn_torch_set_tag(const char* tag);
CUDYN_TORCH_API int cudyn_torch_get_tag(char* buffer, size_t capacity);
/* Devices given read-write access to later allocations on `device`. */
CUDYN_TORCH_API int cudyn_torch_set_peers(int device, const int* peers, int count);
/* Bytes of freed allocations kept for reuse (0, the default: none). */
CUDYN_TORCH_API int cudyn_torch_set_cache_limit(uint64_t bytes);
CUDYN_TORCH_API int cudyn_torch_trim_cache(void);

/* What one sleep or wake_up did (NULL: not wanted). */
typedef struct cudyn_torch_report {
    uint64_t allocations;
    uint64_t bytes;
    uint64_t offloaded_bytes;
    uint64_t cache_released;
} cudyn_torch_report;

/* Offloads the tags named (count may be 0), releases every awake
 * allocation's physical memory, keeps the addresses. */
CUDYN_TORCH_API int cudyn_torch_sleep(const char* const* offload_tags, int count, cudyn_torch_report* report);
/* Wakes the tags named; tags == NULL wakes every tag. */
CUDYN_TORCH_API int cudyn_torch_wake_up(const char* const* tags, int count, cudyn_torch_report* report);

/* One (tag, device) row of the statistics. */
typedef struct cudyn_torch_tag_stats {
    char tag[64];
    int32_t device;
    uint64_t live_bytes;
    uint64_t live_count;
    uint64_t peak_bytes;
    uint64_t awake_bytes;
    uint64_t sleeping_bytes;
    uint64_t sleeping_count;
    uint64_t offloaded_bytes;
} cudyn_torch_tag_stats;

/* Writes up to `capacity` rows and returns how many there are (call with 0
 * to count); -1 on failure. */
CUDYN_TORCH_API int cudyn_torch_stats(cudyn_torch_tag_stats* rows, int capacity);
/* Freed allocations held in the cache, in bytes. */
CUDYN_TORCH_API uint64_t cudyn_torch_cached_bytes(void);
/* The last failure's message on the calling thread ("" after a success). */
CUDYN_TORCH_API const char* cudyn_torch_last_error(void);
/* The last failure's code on the calling thread (0 after a success): what
 * cudyn_torch_alloc (NULL) and cudyn_torch_free (no answer) failed with. */
CUDYN_TORCH_API int cudyn_torch_last_error_code(void);
/* Frees every allocation, awake, asleep or cached (a test's or a shutdown's
 * clean slate); the settings (tag, peers, cache limit) go back to defaults. */
CUDYN_TORCH_API int cudyn_torch_reset(void);

#ifdef __cplusplus
}
#endif

#endif
