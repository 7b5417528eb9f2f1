// Subnormal numbers on the CPU backend.
//
// Arithmetic on subnormal floats (magnitudes below 1.2e-38 in float, 2.2e-308
// in double) takes a microcode assist on many x86 cores, Intel's among them:
// on the order of a hundred cycles an operation instead of a few. A gradient
// that decays through a long chain (an adjoint multiplied by a factor below
// one at every step of a recurrence) passes through that range on its way to
// zero, and then much of a sweep's time is spent there: the recurrence of
// bench/cpu_workloads.cpp has 5 % of its adjoint's steps subnormal, which
// double the adjoint's time on the Intel machine of docs/05.
// The processors offer a mode that flushes them to zero instead (x86's MXCSR
// FTZ and DAZ bits, AArch64's FPCR.FZ). JAX, Taichi and Quadrants run their
// CPU kernels in it (docs/05, *Subnormals*), PyTorch offers it as a switch.
// Here it is a switch as well, off by default: it changes results (a value
// below the normal range becomes zero, and log of it -inf), so it is the
// program's decision.
//
// The mode is a property of each thread. A launch on the host runs under
// its calling thread's mode on every thread that takes part: the pool's
// workers adopt the caller's flush bits for each chunk (thread_pool.hpp), so
// a caller that sets the mode itself gets it on the workers too. With
// set_flush_subnormals(true), each host launch (kernel.hpp, run_one) and
// each tape's backward() (whose host-side gradient adds are not launches)
// set the mode on their calling thread while they run and restore the
// thread's own after. Device code keeps IEEE subnormals (nvcc's default,
// -ftz=false, which ctgrad's builds keep), so with the switch on, host and
// device results can differ. Long double arithmetic (x87) is not affected.
#pragma once
#include <atomic>
#include <cstdint>

#include "../../config.hpp"
#include "../../errors.hpp"

// x86-64 only among the x86 targets: 32-bit builds compute floats on the
// x87 unit unless told otherwise, which MXCSR does not govern.
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#  include <xmmintrin.h>
#  define CTG_IMPL_FLUSH_MXCSR 1
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#  define CTG_IMPL_FLUSH_FPCR 1
#endif

namespace ctg {

// Whether this build (x86-64 or AArch64, GCC or clang) gives the CPU
// backend a mode that flushes subnormals to zero.
#if defined(CTG_IMPL_FLUSH_MXCSR) || defined(CTG_IMPL_FLUSH_FPCR)
inline constexpr bool subnormal_flush_available = true;
#else
inline constexpr bool subnormal_flush_available = false;
#endif

namespace cpu {

// The bits of the thread's floating-point control register that flush
// subnormals: FTZ (results) and DAZ (operands) of MXCSR, FZ of FPCR (both).
// Compilers do not order arithmetic against a write of that register, so
// the write is fenced for the compiler: no load or store of the code around
// it moves across.
#if defined(CTG_IMPL_FLUSH_MXCSR)
inline constexpr std::uint64_t flush_bits = 0x8040u;
inline std::uint64_t float_control() { return _mm_getcsr(); }
inline void set_float_control(std::uint64_t word) {
  asm volatile("" ::: "memory");
  _mm_setcsr(unsigned(word));
  asm volatile("" ::: "memory");
}
#elif defined(CTG_IMPL_FLUSH_FPCR)
inline constexpr std::uint64_t flush_bits = std::uint64_t(1) << 24;
inline std::uint64_t float_control() {
  std::uint64_t word;
  asm volatile("mrs %0, fpcr" : "=r"(word));
  return word;
}
inline void set_float_control(std::uint64_t word) { asm volatile("msr fpcr, %0" : : "r"(word) : "memory"); }
#else
inline constexpr std::uint64_t flush_bits = 0;
inline std::uint64_t float_control() { return 0; }
inline void set_float_control(std::uint64_t) {}
#endif

// This thread's flush bits (0: IEEE subnormals; flush_bits: flushed).
inline std::uint64_t subnormal_mode() { return flush_bits == 0 ? 0 : float_control() & flush_bits; }

// Gives this thread the flush bits of `mode` (subnormal_mode() of another
// thread), leaving the rest of its control register (rounding, exception
// masks) as it is; writes the register only when they differ.
inline void adopt_subnormal_mode(std::uint64_t mode) {
  if constexpr (flush_bits != 0) {
    std::uint64_t const word = float_control();
    if ((word & flush_bits) != (mode & flush_bits)) set_float_control((word & ~flush_bits) | (mode & flush_bits));
  }
}

// The program's setting (ctg::set_flush_subnormals).
inline constinit std::atomic<bool> flush_subnormals_setting{false};

// This thread in the subnormal mode `mode` while the scope lives, then in
// its own mode again.
class subnormal_mode_scope {
 public:
  explicit subnormal_mode_scope(std::uint64_t mode) : saved_(subnormal_mode()) { adopt_subnormal_mode(mode); }
  ~subnormal_mode_scope() { adopt_subnormal_mode(saved_); }
  subnormal_mode_scope(subnormal_mode_scope const&) = delete;
  subnormal_mode_scope& operator=(subnormal_mode_scope const&) = delete;

 private:
  std::uint64_t saved_;
};

// The mode a host launch or a tape's backward() runs in on its calling
// thread: flushed when the program asked for it (ctg::set_flush_subnormals),
// otherwise the thread's own.
inline std::uint64_t requested_subnormal_mode() {
  return flush_subnormals_setting.load(std::memory_order_relaxed) ? flush_bits : subnormal_mode();
}

}  // namespace cpu

// Whether the kernels launched on the host from now on flush subnormal
// floats and doubles to zero, their operands and their results, on every
// thread of the launch, and tapes' backward() with them. Off by default:
// launches then run in their calling thread's own mode, IEEE unless the
// program (or a library it loaded) changed it. Between launches; device
// launches are not affected. Where this build has no such mode
// (subnormal_flush_available is false), asking for it throws ctg::error.
inline void set_flush_subnormals(bool on) {
  if (on && !subnormal_flush_available)
    throw error(
        "ctg::set_flush_subnormals(true): this build (neither x86-64 nor AArch64 with GCC or clang) gives the CPU "
        "backend no mode that flushes subnormal numbers to zero (ctg::subnormal_flush_available is false); "
        "launches keep IEEE subnormals");
  cpu::flush_subnormals_setting.store(on, std::memory_order_relaxed);
}
inline bool flush_subnormals() { return cpu::flush_subnormals_setting.load(std::memory_order_relaxed); }

}  // namespace ctg
