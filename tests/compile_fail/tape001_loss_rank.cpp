// CTG-TAPE-001: a tape's loss must be a 0-d field with a gradient. The
// control uses one.
#include <ctgrad/ctgrad.hpp>

int main() {
#if defined(CTG_CONTROL)
  ctg::field<float, 0, ctg::grad> loss;
#else
  ctg::field<float, 1, ctg::grad> loss(3);
#endif
  ctg::tape tape(loss);  // expected-error {{CTG-TAPE-001}}
  tape.backward();
}
