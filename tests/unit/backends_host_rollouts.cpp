// The test bodies shared with the CUDA backend on host fields: a tape and a
// checkpointed rollout of an in-place symplectic Euler step
// (tests/shared/tape.hpp, checkpoint.hpp), a strided view bounding a nested
// loop (views.hpp). tests/cuda/backends_device_rollouts.cu runs them on
// device fields.
#include "../shared/checkpoint.hpp"
#include "../shared/tape.hpp"
#include "../shared/views.hpp"

CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_TAPE_TESTS, host)
CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_CHECKPOINT_TESTS, host)
CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_VIEW_TESTS, host)
