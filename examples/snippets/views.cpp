// The code of docs/01-kernels.md, "Views of your own memory": fields over
// memory the program owns. Exits 1 when a value is not what the text says.
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/view.hpp>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {
int failures = 0;
void expect(bool ok, char const* what) {
  if (!ok) std::printf("FAILED: %s\n", what), ++failures;
}
}  // namespace

int main() {
  // [snippet: views]
  struct particle {
    Eigen::Vector3f x, v;
    float mass;
  };
  std::vector<particle> particles(100, {Eigen::Vector3f::Zero(), Eigen::Vector3f::Ones(), 1.0f});
  std::vector<float> energy(100);

  // One member of an array of structs: a ctg::strided field, stride sizeof(particle).
  auto x = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "x"});
  auto v = ctg::view_member(particles, &particle::v, {.name = "v"});
  // A std::vector (or std::span): a packed field on its memory.
  auto e = ctg::view<ctg::grad>(energy, {.name = "energy"});
  // A pointer with extents, and byte strides when the memory is not packed.
  auto m = ctg::strided_view(&particles[0].mass, {100}, {sizeof(particle)}, {.name = "mass"});

  auto drift = ctg::kernel<"drift">([](auto x, auto v, float dt) {
    return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] + dt * v[i]; });
  });
  auto kinetic = ctg::kernel<"kinetic">([](auto v, auto m, auto e) {
    return ctg::range(v.size(), [=](auto i) { return e[i] = 0.5f * m[i] * ctg::norm_sqr(v[i]); });
  });
  drift(x, v, 0.1f);  // writes particles[i].x in place
  kinetic(v, m, e);   // energy[i] = 1.5
  // [snippet end]
  expect(particles[7].x.isApprox(Eigen::Vector3f::Constant(0.1f)), "drift moved x by dt * v");
  expect(particles[7].v == Eigen::Vector3f::Ones(), "v is untouched");
  expect(std::abs(energy[3] - 1.5f) < 1e-6f, "energy is m |v|^2 / 2");

  // [snippet: gradients]
  // Gradient buffers: given (same layout as the values), or allocated by ctgrad, packed.
  std::vector<particle> grads(100, {Eigen::Vector3f::Zero(), Eigen::Vector3f::Zero(), 0.0f});
  auto v2 = ctg::view_member<ctg::grad>(particles, &particle::v, {.name = "v", .grad = &grads[0].v});
  auto m2 = ctg::view_member<ctg::grad>(particles, &particle::mass, {.name = "mass", .grad = &grads[0].mass});
  ctg::field<float, 0, ctg::grad> total({.name = "total"});
  auto sum = ctg::kernel<"sum">([](auto v, auto m, auto total) {
    return ctg::range(v.size(), [=](auto i) { return total() += 0.5f * m[i] * ctg::norm_sqr(v[i]); });
  });
  {
    ctg::tape tape(total);
    sum(v2, m2, total);
    tape.backward();  // grads[i].v = m v = (1, 1, 1), grads[i].mass = |v|^2 / 2 = 1.5
  }
  // [snippet end]
  expect(grads[5].v == Eigen::Vector3f::Ones(), "dE/dv = m v");
  expect(std::abs(grads[5].mass - 1.5f) < 1e-6f, "dE/dm = |v|^2 / 2");
  expect(std::abs(total.at() - 150.0f) < 1e-3f, "total energy");
  (void)e;
  return failures ? 1 : 0;
}
