// ctg::check_gradient: compares the adjoint with central finite differences.
//
//   auto r = ctg::check_gradient([&] { simulate(); }, loss, x, v0);
//   assert(r.worst_relative_error < 1e-6);
//
// `forward` runs the whole computation from the current parameter values and
// leaves the result in `loss` (a 0-d field with ctg::grad); it must start
// from the same state each time it is called. The adjoint comes from a
// ctg::tape around one call; then, for a sample of coefficients of each
// parameter field, forward runs twice more with the coefficient moved by +-h
// and the difference quotient is formed in double precision. Parameters are
// restored afterwards; their gradients hold the adjoint.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "errors.hpp"
#include "field.hpp"
#include "tape.hpp"

namespace ctg {

struct gradient_check_options {
  double step = 1e-4;          // relative step: h = step * max(1, |x|)
  int samples_per_field = 16;  // coefficients checked per parameter field (all when fewer)
  // Gradients smaller than this fraction of the largest one are compared in
  // absolute terms, so finite-difference noise on near-zero entries does not
  // count as a relative error.
  double relative_floor = 1e-3;
};

struct gradient_check_result {
  double worst_relative_error = 0;
  std::string worst;  // "field 'x' coefficient 3: adjoint 1.2, finite difference 1.21"
  int checked = 0;
};

namespace detail {

template <class T, int R, flags F>
struct param_access {
  using S = scalar_of_t<T>;
  static constexpr int per = coefficients_v<T>;
  template <flags G>
  static std::vector<double> coefficients(field<T, R, G> const& f) {
    auto v = f.to_vector();
    std::vector<double> out;
    out.reserve(v.size() * per);
    for (auto const& e : v) {
      if constexpr (is_eigen_fixed_v<T>)
        for (int k = 0; k < per; ++k) out.push_back(double(e.coeff(k)));
      else
        out.push_back(double(e));
    }
    return out;
  }
  template <flags G>
  static void assign(field<T, R, G> const& f, std::vector<double> const& c) {
    std::vector<T> v(c.size() / per);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if constexpr (is_eigen_fixed_v<T>)
        for (int k = 0; k < per; ++k) v[i].coeffRef(k) = S(c[i * per + k]);
      else
        v[i] = T(c[i]);
    }
    f.copy_from(v);
  }
};

template <class T, flags F>
double read_loss(field<T, 0, F> const& loss) {
  return double(loss.to_vector()[0]);
}

}  // namespace detail

template <class Forward, class L, flags LF, class... P, int... R, flags... F>
gradient_check_result check_gradient(gradient_check_options const& opts, Forward&& forward,
                                     field<L, 0, LF> const& loss, field<P, R, F> const&... params) {
  static_assert(has_flag(LF, flags::grad), "CTG-TAPE-001 check_gradient: the loss needs ctg::grad");
  static_assert((has_flag(F, flags::grad) && ...), "check_gradient: every parameter field needs ctg::grad");
  // Original values and adjoint.
  std::vector<std::vector<double>> original{detail::param_access<P, R, F>::coefficients(params)...};
  {
    tape t(loss);
    forward();
    t.backward();
  }
  std::vector<std::vector<double>> adjoint{detail::param_access<P, R, F>::coefficients(params.grad())...};
  std::vector<std::string> names{params.name()...};

  auto restore = [&] {
    std::size_t k = 0;
    ((detail::param_access<P, R, F>::assign(params, original[k++])), ...);
  };
  struct sample {
    double adj, fd;
    std::size_t field, coeff;
  };
  std::vector<sample> samples;
  std::size_t which = 0;
  auto probe = [&](auto const& param) {
    using Pa = std::remove_cvref_t<decltype(param)>;
    using access = detail::param_access<typename Pa::value_type, Pa::rank, Pa::field_flags>;
    using S = typename access::S;
    std::size_t const n = original[which].size();
    std::size_t const count = std::min<std::size_t>(n, std::size_t(std::max(1, opts.samples_per_field)));
    for (std::size_t s = 0; s < count; ++s) {
      std::size_t const c = count == n ? s : (s * (n - 1)) / std::max<std::size_t>(1, count - 1);
      double const x = original[which][c];
      double const h = opts.step * std::max(1.0, std::abs(x));
      auto run = [&](double target) {
        restore();
        auto moved = original[which];
        moved[c] = double(S(target));
        access::assign(param, moved);
        forward();
        return std::pair<double, double>{detail::read_loss(loss), moved[c] - x};
      };
      auto [plus, hp] = run(x + h);
      auto [minus, hm] = run(x - h);
      samples.push_back({adjoint[which][c], (plus - minus) / (hp - hm), which, c});
    }
    ++which;
  };
  (probe(params), ...);
  restore();
  // Leave the adjoint in the parameters' gradients.
  {
    std::size_t k = 0;
    ((detail::param_access<P, R, flags::none>::assign(params.grad(), adjoint[k++])), ...);
  }

  double scale = 0;
  for (auto const& s : samples)
    if (std::isfinite(s.fd) && std::isfinite(s.adj)) scale = std::max({scale, std::abs(s.fd), std::abs(s.adj)});
  gradient_check_result out;
  for (auto const& s : samples) {
    double const denom = std::max({std::abs(s.adj), std::abs(s.fd), opts.relative_floor * scale, 1e-300});
    double err = std::abs(s.adj - s.fd) / denom;
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();  // a NaN gradient never passes
    ++out.checked;
    if (err >= out.worst_relative_error) {
      out.worst_relative_error = err;
      out.worst = "field '" + names[s.field] + "' coefficient " + std::to_string(s.coeff) + ": adjoint " +
                  std::to_string(s.adj) + ", finite difference " + std::to_string(s.fd);
    }
  }
  return out;
}

template <class Forward, class L, flags LF, class... P, int... R, flags... F>
gradient_check_result check_gradient(Forward&& forward, field<L, 0, LF> const& loss,
                                     field<P, R, F> const&... params) {
  return check_gradient(gradient_check_options{}, static_cast<Forward&&>(forward), loss, params...);
}

}  // namespace ctg
