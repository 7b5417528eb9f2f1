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
#include <cstdio>
#include <utility>
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
  int checked = 0;    // probes compared
  // Probes where the adjoint and the finite difference are both exactly zero
  // (an element the loss does not depend on, or a time slot never reached):
  // counted apart, so that a check of nothing but zeros does not look like a
  // pass.
  int both_zero = 0;

  // Per parameter field (or slice).
  struct field_result {
    std::string name;
    double worst_relative_error = 0;
    std::int64_t worst_coefficient = -1;
    int checked = 0;
    int both_zero = 0;
    std::vector<std::pair<double, double>> points;  // (finite difference, adjoint) of each probe
  };
  std::vector<field_result> fields;

  // An SVG picture of the adjoint against the finite difference, one panel
  // per field, with the line where they agree.
  std::string svg() const;
};

// A part of a field to probe: the coefficients whose first index is `row`
// (one time slot of a time-indexed field u(t, i)).
template <class Field>
struct field_slice {
  Field const& field;
  int row;
};
template <class T, int R, flags F>
field_slice<field<T, R, F>> slice(field<T, R, F> const& f, int row) {
  static_assert(R >= 1, "ctg::slice(field, row) takes a field of rank 1 or more");
  return {f, row};
}

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
gradient_check_result check_gradient_of(gradient_check_options const& opts, Forward&& forward,
                                        field<L, 0, LF> const& loss,
                                        std::vector<std::pair<std::size_t, std::size_t>> const& ranges,
                                        std::vector<std::string> const& names, field<P, R, F> const&... params) {
  // Original values and adjoint.
  std::vector<std::vector<double>> original{detail::param_access<P, R, F>::coefficients(params)...};
  {
    tape t(loss);
    forward();
    t.backward();
  }
  std::vector<std::vector<double>> adjoint{detail::param_access<P, R, F>::coefficients(params.grad())...};

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
    auto const [lo, hi] = ranges[which];
    std::size_t const n = hi - lo;
    std::size_t const count = std::min<std::size_t>(n, std::size_t(std::max(1, opts.samples_per_field)));
    for (std::size_t s = 0; s < count; ++s) {
      std::size_t const c = lo + (count == n ? s : (s * (n - 1)) / std::max<std::size_t>(1, count - 1));
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
  for (auto const& name : names) out.fields.push_back({name, 0, -1, 0, 0, {}});
  for (auto const& s : samples) {
    auto& fr = out.fields[s.field];
    fr.points.emplace_back(s.fd, s.adj);
    if (s.adj == 0 && s.fd == 0) {
      ++out.both_zero;
      ++fr.both_zero;
      continue;
    }
    double const denom = std::max({std::abs(s.adj), std::abs(s.fd), opts.relative_floor * scale, 1e-300});
    double err = std::abs(s.adj - s.fd) / denom;
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();  // a NaN gradient never passes
    ++out.checked;
    ++fr.checked;
    if (err >= fr.worst_relative_error) {
      fr.worst_relative_error = err;
      fr.worst_coefficient = std::int64_t(s.coeff);
    }
    if (err >= out.worst_relative_error) {
      out.worst_relative_error = err;
      out.worst = "field '" + names[s.field] + "' coefficient " + std::to_string(s.coeff) + ": adjoint " +
                  std::to_string(s.adj) + ", finite difference " + std::to_string(s.fd);
    }
  }
  return out;
}

template <class X>
struct probed {
  using field_type = X;
  static X const& field(X const& x) { return x; }
  static std::pair<std::size_t, std::size_t> range(X const& x) {
    return {0, std::size_t(x.size()) * coefficients_v<typename X::value_type>};
  }
  static std::string name(X const& x) { return x.name(); }
};
template <class X>
struct probed<field_slice<X>> {
  using field_type = X;
  static X const& field(field_slice<X> const& s) { return s.field; }
  static std::pair<std::size_t, std::size_t> range(field_slice<X> const& s) {
    auto const& f = s.field;
    if (s.row < 0 || s.row >= f.extent(0))
      throw launch_error("ctg::slice: row " + std::to_string(s.row) + " is outside field '" + f.name() + "' of shape " +
                         f.shape_string());
    std::size_t const per_row = std::size_t(f.size() / std::max(1, f.extent(0))) * coefficients_v<typename X::value_type>;
    return {std::size_t(s.row) * per_row, std::size_t(s.row + 1) * per_row};
  }
  static std::string name(field_slice<X> const& s) { return s.field.name() + "[" + std::to_string(s.row) + "]"; }
};
template <class P>
using probed_field_t = typename probed<std::remove_cvref_t<P>>::field_type;

template <class Forward, class L, flags LF, class... Params>
gradient_check_result check_gradient(gradient_check_options const& opts, Forward&& forward,
                                     field<L, 0, LF> const& loss, Params const&... probes) {
  static_assert(has_flag(LF, flags::grad), "CTG-TAPE-001 check_gradient: the loss needs ctg::grad");
  static_assert((probed_field_t<Params>::has_grad && ...), "check_gradient: every parameter field needs ctg::grad");
  auto const& first = [](auto const& p) -> auto const& { return probed<std::remove_cvref_t<decltype(p)>>::field(p); };
  return check_gradient_of(opts, forward, loss, std::vector<std::pair<std::size_t, std::size_t>>{
                                                    probed<Params>::range(probes)...},
                           std::vector<std::string>{probed<Params>::name(probes)...}, first(probes)...);
}

inline std::string gradient_check_result::svg() const {
  int const panel = 260, pad = 40, n = int(fields.size());
  int const width = std::max(1, n) * panel, height = panel + 30;
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return std::string(buf);
  };
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (int k = 0; k < n; ++k) {
    auto const& f = fields[std::size_t(k)];
    double lo = 0, hi = 0;
    for (auto const& [fd, ad] : f.points)
      if (std::isfinite(fd) && std::isfinite(ad)) lo = std::min({lo, fd, ad}), hi = std::max({hi, fd, ad});
    if (hi - lo <= 0) hi = lo + 1;
    int const x0 = k * panel + pad, y0 = pad - 10, size = panel - 2 * pad + 10;
    auto px = [&](double v) { return x0 + (v - lo) / (hi - lo) * size; };
    auto py = [&](double v) { return y0 + size - (v - lo) / (hi - lo) * size; };
    out += "<rect x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y0) + "\" width=\"" + std::to_string(size) +
           "\" height=\"" + std::to_string(size) + "\" fill=\"none\" stroke=\"#888\"/>\n";
    out += "<line x1=\"" + num(px(lo)) + "\" y1=\"" + num(py(lo)) + "\" x2=\"" + num(px(hi)) + "\" y2=\"" + num(py(hi)) +
           "\" stroke=\"#bbb\" stroke-dasharray=\"4 3\"/>\n";
    for (auto const& [fd, ad] : f.points)
      if (std::isfinite(fd) && std::isfinite(ad))
        out += "<circle cx=\"" + num(px(fd)) + "\" cy=\"" + num(py(ad)) + "\" r=\"2.5\" fill=\"#c0392b\"/>\n";
    out += "<text x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y0 + size + 16) + "\">" + f.name +
           ": worst error " + num(f.worst_relative_error) + " (" + std::to_string(f.checked) + " probes, " +
           std::to_string(f.both_zero) + " zero)</text>\n";
    out += "<text x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y0 - 6) +
           "\">adjoint (up) against finite difference (right)</text>\n";
  }
  out += "</svg>\n";
  return out;
}

template <class Forward, class L, flags LF, class... Params>
  requires(!std::is_same_v<std::remove_cvref_t<Forward>, gradient_check_options>)
gradient_check_result check_gradient(Forward&& forward, field<L, 0, LF> const& loss, Params const&... probes) {
  return check_gradient(gradient_check_options{}, static_cast<Forward&&>(forward), loss, probes...);
}

}  // namespace ctg
