// A select's record in the adjoint (ad/reverse.hpp, side_record) is
// trivially copyable when its sides' records are, so a record holding one is
// built in place like any other. Built at -O3, where g++ 12 stopped with an
// internal compiler error on the shape below when it was not; checked
// against the adjoint written by hand, on 1 and 2 threads.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <type_traits>

#include "../unit/ad_test_support.hpp"

using doctest::Approx;

static_assert(std::is_trivially_copyable_v<ctg::ad::side_record<double>>);

namespace {

// g = v / (m + 1e-3) + 0.01 select(s > t, s, t) (the failing shape had the
// same number on every side of the select), clipped to 0 when negative on
// the first four cells, then stored.
auto clipped_velocity = ctg::kernel<"clipped_velocity">([](auto v, auto m, auto s, auto t, auto out) {
  return ctg::range(v.size(), [=](auto i) {
    return ctg::let(v[i] / (m[i] + 1e-3) + 0.01 * ctg::select(s() > t(), s(), t()), [=](auto g) {
      return ctg::block(ctg::if_(i < 4 && g < 0, g = 0.0), out[i] = g);
    });
  });
});

}  // namespace

TEST_CASE("select records: a select of 0-D fields inside a let with a clipped local, against the hand-written adjoint") {
  constexpr int n = 101;
  for (int threads : {1, 2})
    for (double t_value : {-0.5, 0.5, 2.0}) {
      ad_test::thread_scope scope(threads);
      ctg::field<double, 1, ctg::grad> v({n}, {.name = "v"}), m({n}, {.name = "m"}), out({n}, {.name = "out"});
      ctg::field<double, 0, ctg::grad> s({}, {.name = "s"}), t({}, {.name = "t"});
      s.at() = 0.5;
      t.at() = t_value;
      for (int i = 0; i < n; ++i) {
        v.at(i) = 0.3 + 0.01 * i;
        m.at(i) = -1.0 + 0.02 * i;
        out.grad().at(i) = 1.0 + 0.001 * i;
      }
      clipped_velocity(v, m, s, t, out);
      clipped_velocity.grad(v, m, s, t, out);
      bool const s_taken = s.at() > t.at();
      double const side = s_taken ? s.at() : t.at();
      double s_grad = 0, t_grad = 0;
      for (int i = 0; i < n; ++i) {
        double const denominator = m.at(i) + 1e-3;
        double const g = v.at(i) / denominator + 0.01 * side;
        bool const clipped = i < 4 && g < 0;
        INFO("threads " << threads << ", t " << t_value << ", i " << i);
        CHECK(out.at(i) == Approx(clipped ? 0.0 : g).epsilon(1e-14));
        double const seed = clipped ? 0.0 : 1.0 + 0.001 * i;
        CHECK(v.grad().at(i) == Approx(seed / denominator).epsilon(1e-14));
        CHECK(m.grad().at(i) == Approx(-seed * v.at(i) / (denominator * denominator)).epsilon(1e-14));
        (s_taken ? s_grad : t_grad) += 0.01 * seed;
      }
      CHECK(s.grad().at() == Approx(s_grad).epsilon(1e-12));
      CHECK(t.grad().at() == Approx(t_grad).epsilon(1e-12));
    }
}
