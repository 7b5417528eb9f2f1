// Subnormal numbers on the CPU backend.
//
// Arithmetic on subnormal floats (magnitudes below 1.2e-38 in float, 2.2e-308
// in double) takes a microcode assist on most x86 cores, about a hundred
// cycles an operation instead of a few. A gradient that decays through a long
// chain (an adjoint multiplied by a factor below one at every step of a
// recurrence) passes through that range on its way to zero, and then most of
// a sweep's time is spent there: the recurrence of bench/cpu_workloads.cpp
// has 5 % of its adjoint's steps subnormal, which double the adjoint's time.
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
// set_flush_subnormals(true), each launch sets the mode on its calling thread
// for its duration and restores the caller's own after (kernel.hpp, run_one).
// Device code is compiled with its own setting (nvcc's -ftz), which this
// does not change.
#pragma once
#include <atomic>
#include <cstdint>

#include "../../config.hpp"
#include "../../errors.hpp"

#if defined(__x86_64__) || defined(_M_X64) || (defined(__i386__) && defined(__SSE__))
#  include <xmmintrin.h>
#  define CTG_IMPL_FLUSH_MXCSR 1
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
#  define CTG_IMPL_FLUSH_FPCR 1
#endif

namespace ctg {

// Whether this processor and compiler give the CPU backend a mode that
// flushes subnormals to zero.
#if defined(CTG_IMPL_FLUSH_MXCSR) || defined(CTG_IMPL_FLUSH_FPCR)
inline constexpr bool subnormal_flush_available = true;
#else
inline constexpr bool subnormal_flush_available = false;
#endif

namespace cpu {

// The bits of the thread's floating-point control register that flush
// subnormals: FTZ (results) and DAZ (operands) of MXCSR, FZ of FPCR (both).
#if defined(CTG_IMPL_FLUSH_MXCSR)
inline constexpr std::uint32_t flush_bits = 0x8040u;
inline std::uint32_t float_control() { return _mm_getcsr(); }
inline void set_float_control(std::uint32_t word) { _mm_setcsr(word); }
#elif defined(CTG_IMPL_FLUSH_FPCR)
inline constexpr std::uint32_t flush_bits = 1u << 24;
inline std::uint32_t float_control() {
  std::uint64_t word;
  asm volatile("mrs %0, fpcr" : "=r"(word));
  return std::uint32_t(word);
}
inline void set_float_control(std::uint32_t word) {
  std::uint64_t const wide = word;
  asm volatile("msr fpcr, %0" : : "r"(wide));
}
#else
inline constexpr std::uint32_t flush_bits = 0;
inline std::uint32_t float_control() { return 0; }
inline void set_float_control(std::uint32_t) {}
#endif

// This thread's flush bits.
inline std::uint32_t subnormal_mode() { return flush_bits == 0 ? 0 : float_control() & flush_bits; }

// Gives this thread the flush bits `mode` (from subnormal_mode() on another
// thread), leaving the rest of its control register (rounding, exception
// masks) as it is; writes the register only when they differ.
inline void adopt_subnormal_mode(std::uint32_t mode) {
  if constexpr (flush_bits != 0) {
    std::uint32_t const word = float_control();
    if ((word & flush_bits) != mode) set_float_control((word & ~flush_bits) | mode);
  }
}

// The program's setting (ctg::set_flush_subnormals).
inline constinit std::atomic<bool> flush_subnormals_setting{false};

// A launch's calling thread, from construction to destruction: flushes
// subnormals when the program asked for it, and then restores the thread's
// own mode; otherwise leaves the thread's mode alone.
class launch_subnormal_mode {
 public:
  launch_subnormal_mode() {
    if constexpr (flush_bits != 0) {
      if (flush_subnormals_setting.load(std::memory_order_relaxed)) {
        saved_ = subnormal_mode();
        adopt_subnormal_mode(flush_bits);
        set_ = true;
      }
    }
  }
  ~launch_subnormal_mode() {
    if (set_) adopt_subnormal_mode(saved_);
  }
  launch_subnormal_mode(launch_subnormal_mode const&) = delete;
  launch_subnormal_mode& operator=(launch_subnormal_mode const&) = delete;

 private:
  std::uint32_t saved_ = 0;
  bool set_ = false;
};

}  // namespace cpu

// Whether the kernels launched on the host from now on flush subnormal
// floats to zero, their operands and their results, on every thread of
// the launch (off by default). Between launches; device launches are not
// affected. Where the processor has no such mode (subnormal_flush_available
// is false), asking for it throws ctg::error.
inline void set_flush_subnormals(bool on) {
  if (on && !subnormal_flush_available)
    throw error(
        "ctg::set_flush_subnormals(true): this processor or compiler gives the CPU backend no mode that flushes "
        "subnormal numbers to zero (ctg::subnormal_flush_available is false); launches keep IEEE subnormals");
  cpu::flush_subnormals_setting.store(on, std::memory_order_relaxed);
}
inline bool flush_subnormals() { return cpu::flush_subnormals_setting.load(std::memory_order_relaxed); }

}  // namespace ctg
