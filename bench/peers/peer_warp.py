"""The four workloads in NVIDIA Warp on its CPU device: one kernel per
workload (one launch per time step for the wave), recorded on a wp.Tape and
replayed backwards with the output's gradient seeded (Tape.backward(grads=)).
Warp runs a CPU launch's threads one after another on the calling thread."""
import numpy as np
import warp as wp

NAME = "Warp"
THREADS = "CPU device: kernels run serially on the calling thread"

# The recurrence's loop has a constant trip count; unrolled, Warp can
# differentiate it (a dynamic loop that reassigns a variable it cannot).
REC_ITERS = wp.constant(64)
wp.set_module_options({"max_unroll": 64})


@wp.kernel
def map_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * x[i]


@wp.kernel
def wave_kernel(u: wp.array2d(dtype=float), t: int, c: float):
    i = wp.tid()
    n = u.shape[1]
    now = u[t, i]
    left = wp.where(i > 0, u[t, wp.max(i - 1, 0)], 0.0)
    right = wp.where(i < n - 1, u[t, wp.min(i + 1, n - 1)], 0.0)
    u[t + 1, i] = 2.0 * now - u[t - 1, i] + c * (left - 2.0 * now + right)


@wp.kernel
def spring_kernel(x: wp.array(dtype=wp.vec2), a: wp.array(dtype=int), b: wp.array(dtype=int),
                  rest: wp.array(dtype=float), f: wp.array(dtype=wp.vec2), k: float):
    s = wp.tid()
    ia = a[s]
    ib = b[s]
    d = x[ia] - x[ib]
    length = wp.length(d)
    force = d * (-k * (length - rest[s]) / length)
    wp.atomic_add(f, ia, force)
    wp.atomic_sub(f, ib, force)


@wp.kernel
def rec_kernel(x: wp.array(dtype=float), out: wp.array(dtype=float), a: float, b: float):
    i = wp.tid()
    v = float(0.0)
    for _j in range(REC_ITERS):
        v = wp.sin(v) * a + x[i] * b
    out[i] = v


@wp.kernel
def product_kernel(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * s


def subnormal_product():
    """1e-20 * 1e-20 in float32, computed by a kernel."""
    x = wp.array(np.full(1024, 1e-20, np.float32), dtype=float, device="cpu")
    y = wp.zeros(1024, dtype=float, device="cpu")
    wp.launch(product_kernel, dim=1024, inputs=[x, 1e-20, y], device="cpu")
    return float(y.numpy()[0])


def init():
    wp.config.quiet = True
    wp.init()
    return {"warp-lang": wp.__version__}, THREADS


def make(workload, inputs, scalars):
    cpu = "cpu"
    state = {}

    def run(launches, seeds, cleared):
        for g in cleared:
            g.zero_()
        tape = wp.Tape()
        with tape:
            launches()
        tape.backward(grads=seeds)
        wp.synchronize_device(cpu)

    if workload == "map":
        n = inputs["x"].shape[0]
        x = wp.array(inputs["x"], dtype=float, requires_grad=True, device=cpu)
        y = wp.zeros(n, dtype=float, requires_grad=True, device=cpu)
        seed = wp.array(inputs["seed"], dtype=float, device=cpu)

        def gradient():
            run(lambda: wp.launch(map_kernel, dim=n, inputs=[x], outputs=[y], device=cpu), {y: seed}, [x.grad])

        return gradient, lambda: {"x": x.grad.numpy()}

    if workload == "wave":
        c, steps = float(scalars["c"]), int(scalars["steps"])
        n = inputs["u0"].shape[0]
        rows = steps + 2
        u_init = np.zeros((rows, n), dtype=np.float32)
        u_init[0], u_init[1] = inputs["u0"], inputs["u1"]
        u = wp.array(u_init, dtype=float, requires_grad=True, device=cpu)
        seed_init = np.zeros((rows, n), dtype=np.float32)
        seed_init[rows - 1] = inputs["seed"]
        seed = wp.array(seed_init, dtype=float, device=cpu)  # only the last row's gradient is seeded

        def forward():
            for t in range(1, steps + 1):
                wp.launch(wave_kernel, dim=n, inputs=[u, t, c], device=cpu)

        def gradient():
            run(forward, {u: seed}, [])  # u.grad is overwritten by the seed

        return gradient, lambda: {"u0": u.grad.numpy()[0], "u1": u.grad.numpy()[1]}

    if workload == "springs":
        k = float(scalars["k"])
        m, s = inputs["x"].shape[0], inputs["a"].shape[0]
        x = wp.array(inputs["x"], dtype=wp.vec2, requires_grad=True, device=cpu)
        a = wp.array(inputs["a"], dtype=int, device=cpu)
        b = wp.array(inputs["b"], dtype=int, device=cpu)
        rest = wp.array(inputs["rest"], dtype=float, requires_grad=True, device=cpu)
        f = wp.zeros(m, dtype=wp.vec2, requires_grad=True, device=cpu)
        seed = wp.array(inputs["seed"], dtype=wp.vec2, device=cpu)

        def gradient():
            run(lambda: wp.launch(spring_kernel, dim=s, inputs=[x, a, b, rest, f, k], device=cpu),
                {f: seed}, [f, x.grad, rest.grad])

        return gradient, lambda: {"x": x.grad.numpy(), "rest": rest.grad.numpy()}

    if workload == "recurrence":
        if int(scalars["iters"]) != REC_ITERS:
            raise ValueError("the Warp recurrence kernel is compiled for 64 iterations")
        a_, b_ = float(scalars["a"]), float(scalars["b"])
        n = inputs["x"].shape[0]
        x = wp.array(inputs["x"], dtype=float, requires_grad=True, device=cpu)
        out = wp.zeros(n, dtype=float, requires_grad=True, device=cpu)
        seed = wp.array(inputs["seed"], dtype=float, device=cpu)

        def gradient():
            run(lambda: wp.launch(rec_kernel, dim=n, inputs=[x, out, a_, b_], device=cpu), {out: seed},
                [x.grad])

        return gradient, lambda: {"x": x.grad.numpy()}

    raise ValueError(workload)
