// Counts heap allocations inside ctgrad launches: global operator new is
// replaced by one that counts while a window is open, and the window is
// opened around single forward and gradient calls (after a warm-up call, so
// that one-time setup such as starting the thread pool is not counted).
// Target: no heap allocation in a gradient call beyond the adstack.
//
// Prints JSON: per kernel and thread count, the number of allocations and
// their sizes during one forward call and one gradient call.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctgrad/ctgrad.hpp>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
constexpr int max_sizes = 64;
std::atomic<std::size_t> sizes[max_sizes];

void note(std::size_t n) {
  if (!counting.load(std::memory_order_relaxed)) return;
  long const k = allocations.fetch_add(1, std::memory_order_relaxed);
  if (k < max_sizes) sizes[k].store(n, std::memory_order_relaxed);
}

}  // namespace

// g++ 12 warns that free() receives what operator new returned: in these
// replacements both sides are malloc/free, which is the point.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t n) {
  note(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  note(n);
  std::size_t const al = std::size_t(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

struct window {
  long count = 0;
  std::map<std::size_t, int> by_size;
};

template <class F>
window count_in(F&& f) {
  allocations.store(0);
  counting.store(true);
  f();
  counting.store(false);
  window w;
  w.count = allocations.load();
  for (long k = 0; k < w.count && k < max_sizes; ++k) ++w.by_size[sizes[k].load()];
  return w;
}

std::string json(window const& w) {
  std::string s = "{\"allocations\": " + std::to_string(w.count) + ", \"sizes\": {";
  bool first = true;
  for (auto const& [size, n] : w.by_size) {
    s += (first ? "" : ", ") + std::string("\"") + std::to_string(size) + "\": " + std::to_string(n);
    first = false;
  }
  return s + "}}";
}

constexpr int n = 1 << 16;
constexpr int iters = 64;

auto map_kernel = ctg::kernel<"map">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i]; });
});
auto spring_kernel = ctg::kernel<"springs">([](auto x, auto a, auto b, auto rest, auto f, float k) {
  return ctg::range(a.size(), [=](auto s) {
    return ctg::let(x[a[s]] - x[b[s]], [=](auto d) {
      return ctg::let(ctg::norm(d), [=](auto len) {
        return ctg::let(d * (-k * (len - rest[s]) / len), [=](auto force) {
          return ctg::block(f[a[s]] += force, f[b[s]] -= force);
        });
      });
    });
  });
});
auto rec_kernel = ctg::kernel<"recurrence">([](auto x, auto out, int iters, float a, float b) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::let(0.0f, [=](auto v) {
      return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * a + x[i] * b; }), out[i] = v);
    });
  });
});

template <class Fwd, class Grad>
std::string measure(char const* name, int threads, Fwd&& fwd, Grad&& grad) {
  ctg::set_num_threads(threads);
  fwd();
  grad();  // warm-up
  window const f = count_in(fwd);
  window const g = count_in(grad);
  return std::string("    {\"kernel\": \"") + name + "\", \"threads\": " + std::to_string(threads) +
         ", \"forward\": " + json(f) + ", \"grad\": " + json(g) + "}";
}

}  // namespace

int main() {
  using vec2 = Eigen::Vector2f;
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"}), out({n}, {.name = "out"});
  ctg::field<vec2, 1, ctg::grad> px({n}, {.name = "px"}), f({n}, {.name = "f"});
  ctg::field<int, 1> a({n}, {.name = "a"}), b({n}, {.name = "b"});
  ctg::field<float, 1, ctg::grad> rest({n}, {.name = "rest"});
  for (int i = 0; i < n; ++i) {
    x.at(i) = float(i % 97) * 0.01f;
    px.at(i) = vec2(float(i % 256), float(i / 256));
    a.at(i) = i;
    b.at(i) = (i + 1 + i % 7) % n;
    rest.at(i) = 1.0f;
  }
  std::vector<std::string> rows;
  std::vector<int> thread_counts{1};
  int const all = int(std::max(1u, std::thread::hardware_concurrency()));
  if (all > 1) thread_counts.push_back(all);
  for (int t : thread_counts) {
    rows.push_back(measure(
        "map", t, [&] { map_kernel(x, y); }, [&] { map_kernel.grad(x, y); }));
    rows.push_back(measure(
        "springs", t, [&] { spring_kernel(px, a, b, rest, f, 10.0f); },
        [&] { spring_kernel.grad(px, a, b, rest, f, 10.0f); }));
    rows.push_back(measure(
        "recurrence (adstack)", t, [&] { rec_kernel(x, out, iters, 0.9f, 0.7f); },
        [&] { rec_kernel.grad(x, out, iters, 0.9f, 0.7f); }));
  }
  std::printf("{\n  \"what\": \"heap allocations during one launch, after a warm-up launch\",\n");
  std::printf("  \"elements\": %d,\n  \"adstack_iterations\": %d,\n  \"runs\": [\n", n, iters);
  for (std::size_t k = 0; k < rows.size(); ++k) std::printf("%s%s\n", rows[k].c_str(), k + 1 < rows.size() ? "," : "");
  std::printf("  ]\n}\n");
  return 0;
}
