// Which indices of a field's first axis a launch reads or writes: a few
// known ones, or all of them. For a field indexed by the time step first
// (u(t, i), s[t]) a launch touches one or two rows, and k.grad, called alone,
// compares only the rows its adjoint reads with what was written since the
// forward launch (kernel.hpp, field_storage::rows_written_after).
#pragma once

namespace ctg::detail {

struct row_set {
  static constexpr int most = 4;  // more rows than this count as all
  int count = 0;                  // -1: all rows
  int rows[most] = {};

  constexpr bool all() const { return count < 0; }
  constexpr void add(int row) {
    if (count < 0) return;
    for (int k = 0; k < count; ++k)
      if (rows[k] == row) return;
    if (count == most)
      count = -1;
    else
      rows[count++] = row;
  }
  constexpr void add_all() { count = -1; }
  // Whether a row of this set is a row of `other` (all rows meet anything
  // but nothing).
  constexpr bool meets(row_set const& other) const {
    if (count == 0 || other.count == 0) return false;
    if (all() || other.all()) return true;
    for (int k = 0; k < count; ++k)
      for (int l = 0; l < other.count; ++l)
        if (rows[k] == other.rows[l]) return true;
    return false;
  }
};

}  // namespace ctg::detail
