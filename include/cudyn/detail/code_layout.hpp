// cudyn — where the compiler puts code: the hints that keep a hot path's
// instructions together and its rare paths out of the way.
//
// Internal: public only because the inline hot paths in the public headers
// use them (also used by the library's own sources).
//
// Why it matters here: every hot path runs between two driver calls, which
// leave the instruction cache holding the driver's code. Each line of
// cudyn's that the path crosses is then fetched again, and the core waits
// for an instruction fetch as it cannot for data; so the common case is laid
// out as one straight run of lines, and the rest jumps away from it.
#pragma once

// A condition that is almost always true (LIKELY) or false (UNLIKELY): the
// compiler lays the expected branch out as the fall-through.
#if defined(__GNUC__) || defined(__clang__)
#define CUDYN_DETAIL_LIKELY(condition) __builtin_expect(static_cast<bool>(condition), 1)
#define CUDYN_DETAIL_UNLIKELY(condition) __builtin_expect(static_cast<bool>(condition), 0)
#else
#define CUDYN_DETAIL_LIKELY(condition) static_cast<bool>(condition)
#define CUDYN_DETAIL_UNLIKELY(condition) static_cast<bool>(condition)
#endif

// Asks for a function to be inlined where the compiler's own estimate would
// keep it out of line: a short hot helper with more than one caller.
#if defined(__GNUC__) || defined(__clang__)
#define CUDYN_DETAIL_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define CUDYN_DETAIL_ALWAYS_INLINE __forceinline
#else
#define CUDYN_DETAIL_ALWAYS_INLINE inline
#endif

// Marks a failure or once-per-process path: kept out of line and out of the
// way of the hot code around it.
#if defined(__GNUC__) || defined(__clang__)
#define CUDYN_DETAIL_COLD __attribute__((cold, noinline))
#elif defined(_MSC_VER)
#define CUDYN_DETAIL_COLD __declspec(noinline)
#else
#define CUDYN_DETAIL_COLD
#endif

// Marks a path kept out of a hotter one's function (so that the hot one saves
// no registers and builds no frame for it) that is not rare itself: unlike
// CUDYN_DETAIL_COLD it is still compiled for speed.
#if defined(__GNUC__) || defined(__clang__)
#define CUDYN_DETAIL_OUT_OF_LINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define CUDYN_DETAIL_OUT_OF_LINE __declspec(noinline)
#else
#define CUDYN_DETAIL_OUT_OF_LINE
#endif
