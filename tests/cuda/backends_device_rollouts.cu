// The test bodies shared with the CPU backend on device fields: a tape and a
// checkpointed rollout whose saved copies and snapshots are device buffers
// (tests/shared/tape.hpp, checkpoint.hpp), a strided view of device memory
// bounding a nested loop (views.hpp). tests/unit/backends_host_rollouts.cpp
// runs them on host fields.
#include "../shared/checkpoint.hpp"
#include "../shared/tape.hpp"
#include "../shared/views.hpp"

CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_TAPE_TESTS, device)
CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_CHECKPOINT_TESTS, device)
CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_VIEW_TESTS, device)
