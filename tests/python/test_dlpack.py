"""Tensors from NumPy (and PyTorch, when it is installed) go into a ctgrad
kernel through DLPack without a copy, and the gradient comes back through
DLPack. The gradient of sum(x^3) is 3 x^2, in closed form."""
import sys

import numpy as np

import ctgrad_dlpack_ext as ext


def check(name, x, take, back):
    """x: the values as NumPy; take(): a fresh producer of the same tensor;
    back(g): the gradient as NumPy."""
    loss, g = ext.cube_sum_and_gradient(take())
    expected_loss = float(np.sum(x.astype(np.float64) ** 3))
    assert abs(loss - expected_loss) <= 1e-5 * max(1.0, abs(expected_loss)), (name, loss, expected_loss)
    got = back(g)
    assert got.shape == x.shape, (name, got.shape, x.shape)
    assert np.allclose(got, 3.0 * x * x, rtol=1e-6, atol=1e-6), (name, got, 3.0 * x * x)
    print(f"{name}: loss {loss:.6g}, gradient 3 x^2 on {x.shape} (strides {x.strides})")


def numpy_cases():
    base = (np.arange(24, dtype=np.float32).reshape(4, 6) - 10.0) * 0.25
    check("numpy packed", base, lambda: base, np.from_dlpack)
    strided = base[:, ::2]  # every other column: a strided view, not a copy
    assert not strided.flags["C_CONTIGUOUS"]
    check("numpy strided", strided, lambda: strided, np.from_dlpack)

    # Nothing is copied: a write through the field shows in the array.
    target = np.zeros((3, 3), dtype=np.float32)
    ext.write_through(target, 1, 2, 7.5)
    assert target[1, 2] == 7.5, target

    # A dtype mismatch is CTG-FIELD-010, naming the field; the array survives.
    positions = np.ones((2, 3), dtype=np.float32)
    try:
        ext.import_as_double(positions)
    except Exception as e:  # ctg::launch_error, as nanobind raises it
        assert "CTG-FIELD-010 field 'positions'" in str(e), str(e)
        assert "float32" in str(e), str(e)
    else:
        raise AssertionError("a float32 tensor was taken as double")
    assert positions.sum() == 6.0


def torch_cases():
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: its cases are skipped")
        return
    x = (torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5.0) * 0.5
    check("torch packed", x.numpy(), lambda: x, lambda g: torch.from_dlpack(g).numpy())
    t = x.t()  # transposed: strides (1, 4)
    check("torch transposed", t.numpy(), lambda: t, lambda g: torch.from_dlpack(g).numpy())


if __name__ == "__main__":
    numpy_cases()
    torch_cases()
    print("ok")
    sys.exit(0)
