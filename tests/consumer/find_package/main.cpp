#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 1> x(4);
  x.at(2) = 3.0f;
  return x.at(2) == 3.0f ? 0 : 1;
}
