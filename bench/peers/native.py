"""The C++ side of the peer comparison: ctgrad and the hand-written loops of
bench/workloads_*.hpp, loaded from the module bench_peers_native
(bench/peers/native.cpp) with ctypes."""
import ctypes
import json

import numpy as np

HAND, CTGRAD, CTGRAD_FLUSHED = 0, 1, 2  # CTGRAD_FLUSHED: ctg::set_flush_subnormals(true)


class Native:
    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.ctg_peers_open.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.ctg_peers_open.restype = ctypes.c_int
        lib.ctg_peers_describe.argtypes = [ctypes.c_int]
        lib.ctg_peers_describe.restype = ctypes.c_char_p
        lib.ctg_peers_data.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.ctg_peers_data.restype = ctypes.c_void_p
        lib.ctg_peers_gradient.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.ctg_peers_gradient.restype = ctypes.c_double
        lib.ctg_peers_info.argtypes = []
        lib.ctg_peers_info.restype = ctypes.c_char_p
        self.lib = lib

    def info(self):
        return json.loads(self.lib.ctg_peers_info().decode())

    def open(self, workload, threads):
        """Builds the workload's data and checks ctgrad's gradient against the
        hand-written one (the C++ side aborts the process on a mismatch)."""
        handle = self.lib.ctg_peers_open(workload.encode(), threads)
        if handle < 0:
            raise ValueError(f"unknown workload {workload!r}")
        return Workload(self, handle)


class Workload:
    def __init__(self, native, handle):
        self.native = native
        self.handle = handle
        d = json.loads(native.lib.ctg_peers_describe(handle).decode())
        self.scalars = d["scalars"]
        self.inputs = self._arrays(0, d["inputs"])
        self.reference = self._arrays(1, d["gradient"])  # the hand-written gradient

    def _arrays(self, which, described):
        out = {}
        for k, a in enumerate(described):
            ptr = self.native.lib.ctg_peers_data(self.handle, which, k)
            ctype = ctypes.c_float if a["dtype"] == "float32" else ctypes.c_int32
            count = int(np.prod(a["shape"]))
            buf = (ctype * count).from_address(ptr)
            out[a["name"]] = np.ctypeslib.as_array(buf).reshape(a["shape"]).copy()
        return out

    def gradient_seconds(self, system):
        """One whole gradient (clear, seed, forward, adjoint), timed in C++."""
        return self.native.lib.ctg_peers_gradient(self.handle, system)
