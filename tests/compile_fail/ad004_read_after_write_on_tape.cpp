// D3 where a tape does not help: v[i] is overwritten, then read again in the
// same iteration, so the adjoint needs the value from the middle of the
// launch, which no tape keeps; the launch is refused though it is recorded.
// The control does what the message's first fix says: v[i] read once into a
// let local, the local updated, stored once after the last read.
// expected-kernel {{bounce}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(2), v(2);
  ctg::field<double, 0, ctg::grad> restitution;
  auto k = ctg::kernel<"bounce">([](auto x, auto v, auto restitution) {
    return ctg::range(x.size(), [=](auto i) {
#if defined(CTG_CONTROL)
      return ctg::let(v[i] - 0.1, [=](auto vel) {
        return ctg::block(vel = ctg::select(x[i] < 0.0, -restitution() * vel, vel), v[i] = vel,
                          x[i] = x[i] + 0.01 * vel);
      });
#else
      return ctg::block(v[i] = v[i] - 0.1, v[i] = ctg::select(x[i] < 0.0, -restitution() * v[i], v[i]),
                        x[i] = x[i] + 0.01 * v[i]);
#endif
    });
  });
  ctg::tape tape(restitution);
  k(x, v, restitution);  // expected-error {{CTG-AD-004}}
}
