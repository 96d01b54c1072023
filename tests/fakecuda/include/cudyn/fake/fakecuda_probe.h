/*
 * fakecuda_probe.h — introspection API of the fake libcuda.so.1 test drivers.
 * Every variant exports these next to its cu* entries; tests reach them in the
 * driver cudyn loaded, without linking it (dlopen with RTLD_NOLOAD, dlsym and
 * the PFN_ types below). Thread-safe (the cu* entries' lock); plain C. The
 * environment the fake reads when it loads is in cudyn's guide, "Testing your
 * program without a GPU". Installed (-Dfake_driver=enabled) as
 * <cudyn/fake/fakecuda_probe.h>; its functions are API.
 *
 * The environment, read once when the fake loads (a bad value is said on
 * stderr and replaced by the default or the nearest bound):
 *   FAKECUDA_DEVICES=N          devices, 0..8 (default 1)
 *   FAKECUDA_ATTR="id:v,id:v@d" device attribute overrides (@d: device d only)
 *   FAKECUDA_FAIL="rules"       fault rules, the syntax of fakecuda_set_fail
 *   FAKECUDA_DRIVER_VERSION=N   the version reported (default: the variant's)
 *   FAKECUDA_NUMA_NODES=N       host NUMA nodes, 1..64 (default 1)
 *   FAKECUDA_IMEX=0|1           an IMEX channel: fabric handles work (default 0)
 *   FAKECUDA_STREAM_DELAY_US=N  stream work starts N us late (default 0)
 */
#ifndef CUDYN_TESTS_FAKECUDA_PROBE_H
#define CUDYN_TESTS_FAKECUDA_PROBE_H

#if defined(FAKECUDA_BUILDING) && defined(_WIN32)
#define FAKECUDA_PROBE_API __declspec(dllexport)
#elif defined(FAKECUDA_BUILDING) && defined(__GNUC__)
#define FAKECUDA_PROBE_API __attribute__((visibility("default")))
#else
#define FAKECUDA_PROBE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One advice or prefetch, as the driver received it.
 *   entry          exported symbol that was called ("cuMemAdvise_v2",
 *                  "cuMemPrefetchAsync_ptsz", "cuMemPrefetchBatchAsync", ...)
 *   ptr, size      the range (one record per range for batch prefetch)
 *   advice         CUmem_advise value; 0 for prefetch records
 *   location_type  CUmemLocationType. v1 calls are decoded from the CUdevice:
 *                  device n -> CU_MEM_LOCATION_TYPE_DEVICE / n,
 *                  CU_DEVICE_CPU (-1) -> CU_MEM_LOCATION_TYPE_HOST / -1.
 *                  v2 calls record the CUmemLocation exactly as passed.
 *   location_id    see location_type
 *   stream         the CUstream handle value passed (0 for advice)
 *   flags          the flags argument (0 where the entry has none)
 *   call_seq       sequence number of the API call (shared by advice and
 *                  prefetch logs); the ranges of one batch share it
 */
struct fakecuda_record {
    char entry[48];
    unsigned long long ptr;
    unsigned long long size;
    int advice;
    int location_type;
    int location_id;
    unsigned long long stream;
    unsigned long long flags;
    long call_seq;
};

/* One cuGetProcAddress / cuGetProcAddress_v2 request.
 *   entry    "cuGetProcAddress" or "cuGetProcAddress_v2"
 *   symbol   the requested name (truncated to 95 characters)
 *   result   the CUresult returned
 *   status   the CUdriverProcAddressQueryResult written, or -1 when none was
 *            written (v1 entry, error return, stub, injected fault)
 */
struct fakecuda_proc_record {
    char entry[32];
    char symbol[96];
    int version;
    unsigned long long flags;
    int result;
    int status;
};

/* The byte every discarded byte of managed memory reads afterwards
 * (cuMemDiscardBatchAsync, cuMemDiscardAndPrefetchBatchAsync, in stream
 * order): the real driver leaves discarded contents indeterminate, and a
 * fixed poison shows a program that relies on them surviving. */
#define FAKECUDA_DISCARD_POISON 0xDD

/* --- identity and lifetime ---------------------------------------------- */
/* "emulated", "cuda12", "cuda11", "legacy", "stub" or "broken". */
FAKECUDA_PROBE_API const char* fakecuda_variant(void);
/* Driver version this fake reports (13000, 12080, 11080, 10010, or FAKECUDA_DRIVER_VERSION). */
FAKECUDA_PROBE_API int fakecuda_driver_version(void);
/* Times the library's load-time constructor ran (1 once loaded). */
FAKECUDA_PROBE_API int fakecuda_init_count(void);
/* Number of emulated devices (FAKECUDA_DEVICES). */
FAKECUDA_PROBE_API int fakecuda_device_count(void);
/* Non-zero: every cu* entry returns CUDA_ERROR_DEINITIALIZED, as a real driver
 * does while the process exits. 0 restores normal service. */
FAKECUDA_PROBE_API void fakecuda_set_deinitialized(int on);

/* --- calls and leaks ------------------------------------------------------ */
/* Calls of one exported symbol, exact name ("cuMemAlloc_v2"), counted whether
 * or not they failed. Unknown names give 0. */
FAKECUDA_PROBE_API long fakecuda_call_count(const char* name);
/* Zero every call counter (not the fault-injection counters). */
FAKECUDA_PROBE_API void fakecuda_reset_counts(void);
/* Non-zero: from now on every cu* call is recorded, in order (the record is
 * emptied first); 0 stops recording and keeps the record. A fault sweep learns
 * from it which calls an operation makes, to fail each in turn. */
FAKECUDA_PROBE_API void fakecuda_record_calls(int on);
/* Calls recorded; the i-th one's exported name ("cuMemAlloc_v2") into
 * name[0..size) (NUL-terminated). Returns 0, or -1 when i is out of range. */
FAKECUDA_PROBE_API int fakecuda_recorded_call_count(void);
FAKECUDA_PROBE_API int fakecuda_recorded_call(int i, char* name, int size);
/* Live device + pinned host + managed + registered allocations, memory-pool
 * blocks (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemPoolImportPointer;
 * gone from the count at cuMemFreeAsync), plus VMM objects, opened IPC
 * memory (cuIpcOpenMemHandle) and opened IPC events. */
FAKECUDA_PROBE_API long fakecuda_live_allocations(void);
/* Live streams / events created by cuStreamCreate / cuEventCreate. */
FAKECUDA_PROBE_API long fakecuda_live_streams(void);
FAKECUDA_PROBE_API long fakecuda_live_events(void);
/* Bytes of cuMemAlloc memory, VMM physical memory and memory-pool reservations
 * live on a device (what cuMemGetInfo subtracts). */
FAKECUDA_PROBE_API unsigned long long fakecuda_device_bytes_in_use(int device);
/* Retain count of a device's primary context; -1 for a bad device. */
FAKECUDA_PROBE_API int fakecuda_primary_ctx_refcount(int device);

/* Modules loaded by cuModuleLoadData and not yet unloaded. */
FAKECUDA_PROBE_API long fakecuda_live_modules(void);

/* --- memory pools -----------------------------------------------------------
 * Pools created by cuMemPoolCreate or cuMemPoolImportFromShareableHandle and
 * not yet destroyed (the devices' default pools are not counted). */
FAKECUDA_PROBE_API long fakecuda_live_pools(void);
/* Pools cuMemPoolDestroy was called on whose resources still wait for
 * outstanding blocks or pending stream-ordered frees. */
FAKECUDA_PROBE_API long fakecuda_pending_pool_destroys(void);
/* Live pool blocks: allocated (or imported) and not yet freed at the API. */
FAKECUDA_PROBE_API long fakecuda_live_pool_blocks(void);
/* Bytes a pool (a CUmemoryPool) holds reserved (RESERVED_MEM_CURRENT);
 * NULL: every pool of the process, default and destroyed-but-pending ones
 * included. 0 for a handle that is no pool (any more). */
FAKECUDA_PROBE_API unsigned long long fakecuda_pool_reserved_bytes(void* pool);
/* A pool's free pieces (reusable or not yet), by address: writes up to
 * `capacity` start addresses / sizes (either may be NULL) and returns how many
 * there are; -1 for a handle that is no pool (any more). */
FAKECUDA_PROBE_API int fakecuda_pool_free_ranges(void* pool, unsigned long long* addresses,
                                                 unsigned long long* sizes, int capacity);

/* --- fault injection -------------------------------------------------------
 * spec: comma-separated rules  NAME[:N[:CODE]]
 *   NAME  exported symbol ("cuMemAlloc_v2") or base name ("cuMemAlloc", which
 *         matches cuMemAlloc_v2, the _ptsz/_ptds forms, ...)
 *   N     the Nth call (1-based, counted per exported symbol from the time the
 *         spec was set) fails; "N+" makes the Nth and every later call fail.
 *         Default 1.
 *   CODE  CUresult to return, a number or a CUDA_ERROR_* name.
 *         Default 2 (CUDA_ERROR_OUT_OF_MEMORY). "SLOW=MS" instead: the call
 *         succeeds (or fails) as usual, MS milliseconds late.
 * A failing call has no side effect (outputs unwritten) but is counted by
 * fakecuda_call_count. "" clears. Replaces FAKECUDA_FAIL and resets counters.
 * A malformed rule is reported on stderr and ignored. */
FAKECUDA_PROBE_API void fakecuda_set_fail(const char* spec);

/* --- device model ----------------------------------------------------------- */
/* Override a CUdevice_attribute value; device -1 means every device. */
FAKECUDA_PROBE_API void fakecuda_set_attribute(int device, int attribute, int value);
/* What cuDeviceCanAccessPeer(a, b) answers (default 1 for a != b). */
FAKECUDA_PROBE_API void fakecuda_set_peer_access(int a, int b, int can);
/* Where a cuMemAlloc of at most one page lands past a page boundary (0, the
   default: at one). The real driver packs small allocations: driver 580 put a
   fresh 4 KiB allocation 512 bytes past a page in a process that had
   allocated before. Memory allocated so is not shareable over legacy IPC. */
FAKECUDA_PROBE_API void fakecuda_set_small_alloc_offset(unsigned bytes);
/* Whether an IMEX channel exists (overrides FAKECUDA_IMEX, default 0): without
 * one cuMemCreate of fabric memory and a fabric pool's export answer
 * CUDA_ERROR_NOT_PERMITTED while the fabric attribute still reads 1, as a real
 * driver does where IMEX is missing. With one, fabric handles succeed as the
 * fake models them (no real machine has shown it). */
FAKECUDA_PROBE_API void fakecuda_set_imex_channel(int present);
/* Non-zero: the machine has the PCIe (BAR1) dma-buf mapping, so
 * cuMemGetHandleForAddressRange takes CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE
 * (no device attribute says so; default 0: CUDA_ERROR_NOT_SUPPORTED, as on machines
 * without that mapping). */
FAKECUDA_PROBE_API void fakecuda_set_dma_buf_pcie(int on);

/* --- streams ----------------------------------------------------------------
 * Stream work runs later, on the fake's worker thread. Each piece starts `us`
 * microseconds after its stream reached it and its dependencies were done
 * (overrides FAKECUDA_STREAM_DELAY_US; 0: as soon as the worker gets to it). */
FAKECUDA_PROBE_API void fakecuda_set_stream_delay_us(unsigned int us);
/* How long a stream value wait (cuStreamWaitValue32/64, a batch's waits) may
 * hold its stream, in milliseconds, from when the stream reached it: past it
 * the wait's context fails with CUDA_ERROR_LAUNCH_TIMEOUT instead of hanging
 * (overrides FAKECUDA_STREAM_WAIT_TIMEOUT_MS; default 10000; 0 reads as 1). */
FAKECUDA_PROBE_API void fakecuda_set_stream_wait_timeout_ms(unsigned int ms);
/* --- managed memory attached to streams (cuStreamAttachMemAsync) ------------
 * The association of the managed allocation starting at `ptr` (CU_MEM_ATTACH_*:
 * its allocation flags until an attachment ran in its stream), -1 when `ptr`
 * does not start a managed allocation. */
FAKECUDA_PROBE_API int fakecuda_managed_attachment(unsigned long long ptr);
/* Whether the host may touch that allocation now on a device without
 * concurrent managed access, as cuda.h documents it: HOST always, SINGLE once
 * its stream is idle, GLOBAL once every stream of its context is; -1 as above. */
FAKECUDA_PROBE_API int fakecuda_host_may_touch(unsigned long long ptr);
/* Pieces of stream work enqueued and not yet done, in every context. */
FAKECUDA_PROBE_API long fakecuda_pending_work(void);
/* The error a device's primary context failed with (CUDA_ERROR_ILLEGAL_ADDRESS
 * when stream work found its memory gone), 0 while it is healthy, -1 for a bad
 * device. Cleared when the context is destroyed (its last release). */
FAKECUDA_PROBE_API int fakecuda_context_error(int device);

/* --- inter-process sharing --------------------------------------------------
 * Non-zero: cuEventRecord of an interprocess event in this process leaves the
 * record pending, as if the GPU work before it were still running (cuEventQuery
 * answers CUDA_ERROR_NOT_READY and waits block, in every process that opened
 * the event). 0 completes every held record and restores the default (a record
 * completes when its stream reaches it). */
FAKECUDA_PROBE_API void fakecuda_hold_events(int on);

/* --- logs ------------------------------------------------------------------- */
FAKECUDA_PROBE_API int fakecuda_proc_request_count(void);
/* i-th cuGetProcAddress* request. *name stays valid until fakecuda_clear_logs.
 * Any out pointer may be NULL. Returns 0, or -1 when i is out of range. */
FAKECUDA_PROBE_API int fakecuda_proc_request(int i, const char** name, int* version,
                                             unsigned long long* flags);
FAKECUDA_PROBE_API int fakecuda_proc_request_at(int i, struct fakecuda_proc_record* out);
/* Requests matching name (exact), version (-1: any) and flags (~0ULL: any). */
FAKECUDA_PROBE_API int fakecuda_proc_requested(const char* name, int version,
                                               unsigned long long flags);

/* Successful cuMemAdvise / cuMemAdvise_v2 calls. Returns 0, or -1 when out of range. */
FAKECUDA_PROBE_API int fakecuda_advice_count(void);
FAKECUDA_PROBE_API int fakecuda_advice_at(int i, struct fakecuda_record* out);
/* Ranges of successful prefetch calls (v1, v2, _ptsz, batch). */
FAKECUDA_PROBE_API int fakecuda_prefetch_count(void);
FAKECUDA_PROBE_API int fakecuda_prefetch_at(int i, struct fakecuda_record* out);
/* Empty the proc-request, advice and prefetch logs. */
FAKECUDA_PROBE_API void fakecuda_clear_logs(void);

/* --- pointer types for dlsym ---------------------------------------------- */
typedef const char* (*PFN_fakecuda_variant)(void);
typedef int (*PFN_fakecuda_driver_version)(void);
typedef int (*PFN_fakecuda_init_count)(void);
typedef int (*PFN_fakecuda_device_count)(void);
typedef void (*PFN_fakecuda_set_deinitialized)(int on);
typedef long (*PFN_fakecuda_call_count)(const char* name);
typedef void (*PFN_fakecuda_reset_counts)(void);
typedef void (*PFN_fakecuda_record_calls)(int on);
typedef int (*PFN_fakecuda_recorded_call_count)(void);
typedef int (*PFN_fakecuda_recorded_call)(int i, char* name, int size);
typedef long (*PFN_fakecuda_live_allocations)(void);
typedef long (*PFN_fakecuda_live_streams)(void);
typedef long (*PFN_fakecuda_live_events)(void);
typedef unsigned long long (*PFN_fakecuda_device_bytes_in_use)(int device);
typedef int (*PFN_fakecuda_primary_ctx_refcount)(int device);
typedef long (*PFN_fakecuda_live_pools)(void);
typedef long (*PFN_fakecuda_pending_pool_destroys)(void);
typedef long (*PFN_fakecuda_live_pool_blocks)(void);
typedef long (*PFN_fakecuda_live_modules)(void);
typedef void (*PFN_fakecuda_set_imex_channel)(int present);
typedef unsigned long long (*PFN_fakecuda_pool_reserved_bytes)(void* pool);
typedef int (*PFN_fakecuda_pool_free_ranges)(void* pool, unsigned long long* addresses,
                                             unsigned long long* sizes, int capacity);
typedef void (*PFN_fakecuda_set_fail)(const char* spec);
typedef void (*PFN_fakecuda_set_attribute)(int device, int attribute, int value);
typedef void (*PFN_fakecuda_set_peer_access)(int a, int b, int can);
typedef void (*PFN_fakecuda_set_small_alloc_offset)(unsigned bytes);
typedef void (*PFN_fakecuda_set_dma_buf_pcie)(int on);
typedef void (*PFN_fakecuda_hold_events)(int on);
typedef void (*PFN_fakecuda_set_stream_delay_us)(unsigned int us);
typedef void (*PFN_fakecuda_set_stream_wait_timeout_ms)(unsigned int ms);
typedef int (*PFN_fakecuda_managed_attachment)(unsigned long long ptr);
typedef int (*PFN_fakecuda_host_may_touch)(unsigned long long ptr);
typedef long (*PFN_fakecuda_pending_work)(void);
typedef int (*PFN_fakecuda_context_error)(int device);
typedef int (*PFN_fakecuda_proc_request_count)(void);
typedef int (*PFN_fakecuda_proc_request)(int i, const char** name, int* version,
                                         unsigned long long* flags);
typedef int (*PFN_fakecuda_proc_request_at)(int i, struct fakecuda_proc_record* out);
typedef int (*PFN_fakecuda_proc_requested)(const char* name, int version,
                                           unsigned long long flags);
typedef int (*PFN_fakecuda_advice_count)(void);
typedef int (*PFN_fakecuda_advice_at)(int i, struct fakecuda_record* out);
typedef int (*PFN_fakecuda_prefetch_count)(void);
typedef int (*PFN_fakecuda_prefetch_at)(int i, struct fakecuda_record* out);
typedef void (*PFN_fakecuda_clear_logs)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUDYN_TESTS_FAKECUDA_PROBE_H */
