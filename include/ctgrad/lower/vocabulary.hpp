// The IR's names that the analyses, evaluators, checks and backends use
// unqualified, declared one by one in each of their namespaces (no using
// directive in a header: a user's namespace never receives ctg::ir).
#pragma once
// What declares them: the nodes, custom-gradient calls and offloads.
#include "../ir/custom.hpp"
#include "../ir/node.hpp"
#include "normalize.hpp"

#define CTG_IMPL_IR_VOCABULARY \
  using ::ctg::ir::atomic_kind; \
  using ::ctg::ir::buffer; \
  using ::ctg::ir::is_access_op; \
  using ::ctg::ir::is_assign_op; \
  using ::ctg::ir::is_atomic_op; \
  using ::ctg::ir::is_custom_op; \
  using ::ctg::ir::is_func_scope_op; \
  using ::ctg::ir::is_if_op; \
  using ::ctg::ir::is_let_op; \
  using ::ctg::ir::is_let_value_op; \
  using ::ctg::ir::is_local_op; \
  using ::ctg::ir::is_loop_index_op; \
  using ::ctg::ir::is_loop_op; \
  using ::ctg::ir::is_math_op; \
  using ::ctg::ir::is_store_op; \
  using ::ctg::ir::is_while_op; \
  using ::ctg::ir::kid_positions_t; \
  using ::ctg::ir::loop_kind; \
  using ::ctg::ir::node; \
  using ::ctg::ir::node_at; \
  using ::ctg::ir::node_at_t; \
  using ::ctg::ir::parallel_offload; \
  using ::ctg::ir::param_bit; \
  using ::ctg::ir::read_params_v; \
  using ::ctg::ir::serial_offload; \
  using ::ctg::ir::unwrap_funcs; \
  using ::ctg::ir::value_t; \
  using ::ctg::ir::written_access; \
  namespace fn = ::ctg::ir::fn;     \
  namespace op = ::ctg::ir::op
