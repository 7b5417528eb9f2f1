"""The four workloads in Taichi on ti.cpu, and in Quadrants (a fork of Taichi
with the same language) on qd.cpu: one kernel per workload (one launch per
time step for the wave), differentiated with ti.ad.Tape, which clears every
gradient on entry and replays the kernels' adjoints on exit. The Tape needs
a scalar loss: a second kernel adds the seed's dot product with the output
into it, and its adjoint seeds the output's gradient as the C++ side does
directly (an extra pass over the output, noted with the results)."""
import importlib

import numpy as np

NAME = "Taichi"
MODULE = "taichi"
ALIAS = "ti"
# ti.init options beyond the thread count. Taichi: ad_stack_size, because the
# recurrence's adjoint keeps 64 values per element on Taichi's adstack, which
# left to size itself (0) overflows and crashes. Quadrants sizes its adstack
# but enables it only on request.
INIT_OPTIONS = {"ad_stack_size": 128}
# Quadrants rejects the wave step, u[t + 1, i] = f(u[t, i - 1], ...), as a
# cross-iteration read-after-write (it compares the indices axis by axis and
# does not see that the rows differ); its message asks for the loop to be
# wrapped in an outer loop, which makes it an inner, adstack-handled loop.
WRAP_WAVE_LOOP = False


def init():
    global ti
    ti = importlib.import_module(MODULE)
    ti.init(arch=ti.cpu, cpu_max_num_threads=1, default_fp=ti.f32, default_ip=ti.i32, log_level=ti.WARN,
            **INIT_OPTIONS)
    version = ".".join(str(v) for v in ti.__version__) if isinstance(ti.__version__, tuple) else str(ti.__version__)
    return {MODULE: version}, (f"{ALIAS}.init(arch={ALIAS}.cpu, cpu_max_num_threads=1"
                                 + "".join(f", {k}={v!r}" for k, v in INIT_OPTIONS.items()) + ")")


def subnormal_product():
    """1e-20 * 1e-20 in float32, computed by a kernel."""
    x, y = ti.field(ti.f32, 1024), ti.field(ti.f32, 1024)

    @ti.kernel
    def product(s: ti.f32):
        for i in x:
            y[i] = x[i] * s

    x.from_numpy(np.full(1024, 1e-20, np.float32))
    product(1e-20)
    return float(y.to_numpy()[0])


def make(workload, inputs, scalars):
    state = {}
    f32 = ti.f32
    loss = ti.field(f32, shape=(), needs_grad=True)

    def tape_gradient(kernels, before=()):
        def gradient():
            for k in before:
                k()
            with ti.ad.Tape(loss=loss):
                for k in kernels:
                    k()
            ti.sync()

        return gradient

    if workload == "map":
        n = inputs["x"].shape[0]
        x = ti.field(f32, shape=n, needs_grad=True)
        y = ti.field(f32, shape=n, needs_grad=True)
        seed = ti.field(f32, shape=n)
        x.from_numpy(inputs["x"])
        seed.from_numpy(inputs["seed"])

        @ti.kernel
        def forward():
            for i in range(n):
                y[i] = ti.sin(x[i]) * x[i]

        @ti.kernel
        def weigh():
            for i in range(n):
                loss[None] += seed[i] * y[i]

        return tape_gradient([forward, weigh]), lambda: {"x": x.grad.to_numpy()}

    if workload == "wave":
        c, steps = float(scalars["c"]), int(scalars["steps"])
        n = inputs["u0"].shape[0]
        rows = steps + 2
        u = ti.field(f32, shape=(rows, n), needs_grad=True)
        seed = ti.field(f32, shape=n)
        seed.from_numpy(inputs["seed"])

        @ti.kernel
        def set_initial(u0: ti.types.ndarray(), u1: ti.types.ndarray()):
            for i in range(n):
                u[0, i] = u0[i]
                u[1, i] = u1[i]

        set_initial(inputs["u0"], inputs["u1"])

        @ti.func
        def cell(t, i):
            now = u[t, i]
            left = ti.select(i > 0, u[t, ti.max(i - 1, 0)], 0.0)
            right = ti.select(i < n - 1, u[t, ti.min(i + 1, n - 1)], 0.0)
            u[t + 1, i] = 2.0 * now - u[t - 1, i] + c * (left - 2.0 * now + right)

        if WRAP_WAVE_LOOP:
            @ti.kernel
            def step(t: ti.i32):
                for _ in range(1):
                    for i in range(n):
                        cell(t, i)
        else:
            @ti.kernel
            def step(t: ti.i32):
                for i in range(n):
                    cell(t, i)

        @ti.kernel
        def weigh():
            for i in range(n):
                loss[None] += seed[i] * u[rows - 1, i]

        def forward():
            for t in range(1, steps + 1):
                step(t)

        return tape_gradient([forward, weigh]), lambda: {"u0": u.grad.to_numpy()[0], "u1": u.grad.to_numpy()[1]}

    if workload == "springs":
        k = float(scalars["k"])
        m, s = inputs["x"].shape[0], inputs["a"].shape[0]
        x = ti.Vector.field(2, f32, shape=m, needs_grad=True)
        f = ti.Vector.field(2, f32, shape=m, needs_grad=True)
        seed = ti.Vector.field(2, f32, shape=m)
        a = ti.field(ti.i32, shape=s)
        b = ti.field(ti.i32, shape=s)
        rest = ti.field(f32, shape=s, needs_grad=True)
        x.from_numpy(inputs["x"])
        seed.from_numpy(inputs["seed"])
        a.from_numpy(inputs["a"])
        b.from_numpy(inputs["b"])
        rest.from_numpy(inputs["rest"])

        @ti.kernel
        def forward():
            for q in range(s):
                d = x[a[q]] - x[b[q]]
                length = d.norm()
                force = d * (-k * (length - rest[q]) / length)
                f[a[q]] += force
                f[b[q]] -= force

        @ti.kernel
        def weigh():
            for i in range(m):
                loss[None] += seed[i].dot(f[i])

        # The forces accumulate: cleared before the Tape, whose adjoint of a
        # fill would also clear f's gradient.
        return (tape_gradient([forward, weigh], before=[lambda: f.fill(0.0)]),
                lambda: {"x": x.grad.to_numpy(), "rest": rest.grad.to_numpy()})

    if workload == "recurrence":
        a_, b_, iters = float(scalars["a"]), float(scalars["b"]), int(scalars["iters"])
        n = inputs["x"].shape[0]
        x = ti.field(f32, shape=n, needs_grad=True)
        out = ti.field(f32, shape=n, needs_grad=True)
        seed = ti.field(f32, shape=n)
        x.from_numpy(inputs["x"])
        seed.from_numpy(inputs["seed"])

        @ti.kernel
        def forward():
            for i in range(n):
                v = 0.0
                for _ in range(iters):
                    v = ti.sin(v) * a_ + x[i] * b_
                out[i] = v

        @ti.kernel
        def weigh():
            for i in range(n):
                loss[None] += seed[i] * out[i]

        return tape_gradient([forward, weigh]), lambda: {"x": x.grad.to_numpy()}

    raise ValueError(workload)
