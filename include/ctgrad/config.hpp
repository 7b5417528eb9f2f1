// Every portability macro of ctgrad lives here, so that no other header spells
// __host__, __device__ or a compiler-specific attribute directly.
#pragma once

// The evaluators are deep recursions over the IR that only pay off when the
// compiler sees through them. Their functions are plain inline; on the host
// the function running a chunk of iterations is flattened (CTG_FLATTEN), and
// nvcc inlines device code on its own. The exception is a tall expression,
// whose math nodes are cut into functions of a few levels each
// (ir::evaluated_apart_v, CTG_NOINLINE).
#if defined(__CUDACC__)
#  define CTG_HOST_DEVICE __host__ __device__ inline
#  define CTG_DEVICE __device__ inline
#  define CTG_GLOBAL __global__
#  define CTG_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#  define CTG_UNROLL _Pragma("unroll")
#else
#  define CTG_HOST_DEVICE inline
#  define CTG_DEVICE inline
#  define CTG_GLOBAL
#  define CTG_EXEC_CHECK_DISABLE
#  if defined(__clang__)
#    define CTG_UNROLL _Pragma("unroll")
#  elif defined(__GNUC__)
#    define CTG_UNROLL _Pragma("GCC unroll 16")
#  else
#    define CTG_UNROLL
#  endif
#endif

// On the host function that runs a chunk of iterations: inlines the whole
// evaluator recursion into it once. Forcing inlining on every evaluator
// function instead makes each intermediate instance carry its whole subtree
// and the optimiser's time grows with the square of the expression's depth.
#if !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__))
#  define CTG_FLATTEN __attribute__((flatten))
#else
#  define CTG_FLATTEN
#endif

// Before a loop whose iterations the library knows independent in memory
// where the compiler cannot prove it (every iteration writes elements no
// other iteration touches, through pointers it cannot tell apart): lets the
// loop vectorise without run-time overlap tests, which GCC gives up on past
// ten pairs of pointers. (clang warns where it still cannot vectorise such a
// loop: the function holding one silences -Wpass-failed.)
#if defined(__CUDACC__)
#  define CTG_INDEPENDENT_ITERATIONS
#elif defined(__clang__)
#  define CTG_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#  define CTG_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#else
#  define CTG_INDEPENDENT_ITERATIONS
#endif

// Before a loop over the lanes of iterations stepped together (a fixed
// count, eval/interleave.hpp): vectorised, not unrolled. GCC unrolls a loop
// of eight iterations completely before its loop vectoriser runs, and its
// straight-line vectoriser calls no vector math function (libmvec's sin,
// ir/vector_math.hpp), so the unrolled lanes would each call the scalar one.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#  define CTG_LANE_LOOP _Pragma("GCC unroll 1") _Pragma("GCC ivdep") for
#else
#  define CTG_LANE_LOOP for
#endif

// On self-contained numerical routines called from many places in one kernel
// (the decompositions): compiled once instead of once per use, which
// CTG_FLATTEN would otherwise do. Likewise on the bookkeeping every launch
// calls (the write stamps of field.hpp, the forward records): compiled once
// per program, not inlined into the launch of every kernel. And on every
// few levels of a tall expression's evaluators (ir::evaluated_apart_v), so
// that the optimiser's work grows with the expression, not its square.
#if defined(__CUDACC__)
#  define CTG_NOINLINE __noinline__
#elif defined(__GNUC__) || defined(__clang__)
#  define CTG_NOINLINE __attribute__((noinline))
#else
#  define CTG_NOINLINE
#endif

// True while compiling device code (the device pass of nvcc).
#if defined(__CUDA_ARCH__)
#  define CTG_DEVICE_PASS 1
#else
#  define CTG_DEVICE_PASS 0
#endif

// Index checks inside kernels and in the host accessors: on in debug builds,
// forced with CTG_BOUNDS_CHECK=1 or off with CTG_BOUNDS_CHECK=0.
#if !defined(CTG_BOUNDS_CHECK)
#  if defined(NDEBUG)
#    define CTG_BOUNDS_CHECK 0
#  else
#    define CTG_BOUNDS_CHECK 1
#  endif
#endif

#define CTG_VERSION_MAJOR 0
#define CTG_VERSION_MINOR 1
#define CTG_VERSION_PATCH 0

// Separate compilation of the runtime. The library's host code that no
// template parameter shapes (the tape, a field's storage and versions, the
// copy cache, the forward records, the statement trace, the thread pool
// and the messages of failed launches) is otherwise compiled again by every
// translation unit that launches a kernel: about two to three seconds of a
// test file's build. With CTG_SEPARATE_COMPILATION=1 defined for the whole
// program, the headers only declare it, and the one translation unit that
// includes <ctgrad/src.hpp> defines it. Two settings are then that unit's
// for the whole program, so build it with the others': CTG_HAS_CUDA
// (without it, device fields raise an error) and CTG_CPU_SERIAL (whether
// the pool starts threads). The checks (NDEBUG, CTG_BOUNDS_CHECK,
// CTG_HOST_WRITE_CHECKS) are not its to decide: the runtime's functions that
// depend on them take the caller's setting as an argument. Without the
// macro (the default) ctgrad is header-only and that code is inline.
// CTG_COMPILING_RUNTIME is src.hpp's own: never define it.
#if !defined(CTG_SEPARATE_COMPILATION)
#  define CTG_SEPARATE_COMPILATION 0
#endif
#if CTG_SEPARATE_COMPILATION
#  define CTG_RUNTIME_INLINE
#  if defined(CTG_COMPILING_RUNTIME)
#    define CTG_RUNTIME_DEFINITIONS 1
#  else
#    define CTG_RUNTIME_DEFINITIONS 0
#  endif
#else
#  define CTG_RUNTIME_INLINE inline
#  define CTG_RUNTIME_DEFINITIONS 1
#endif
