// CTG-FIELD-001: ctg::grad on an integer field. The control uses float.
#include <ctgrad/ctgrad.hpp>

int main() {
#if defined(CTG_CONTROL)
  ctg::field<float, 1, ctg::grad> counts(4);
#else
  ctg::field<int, 1, ctg::grad> counts(4);  // expected-error {{CTG-FIELD-001}}
#endif
  return int(counts.size()) - 4;
}
