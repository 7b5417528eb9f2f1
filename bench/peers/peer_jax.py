"""The four workloads in JAX: jax.jit of jax.value_and_grad, the time loops as
lax.scan (wave, every step stored and returned) and lax.fori_loop
(recurrence). The loss is the seed's dot product with the output, whose
gradient is what the C++ side gets by seeding the output's gradient."""
import os

NAME = "JAX"
# One thread: XLA's CPU backend takes its thread settings from XLA_FLAGS,
# read when the backend starts (before the first computation).
THREADS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def init():
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + THREADS).strip()
    import jax
    import jaxlib

    jax.config.update("jax_platforms", "cpu")
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}, f"XLA_FLAGS={THREADS}"


def subnormal_product():
    """1e-20 * 1e-20 in float32, computed by a jitted function."""
    import jax
    import jax.numpy as jnp

    product = jax.jit(lambda a, b: a * b)
    return float(product(jnp.full((1024,), 1e-20, jnp.float32), jnp.float32(1e-20))[0])


def make(workload, inputs, scalars):
    """Returns (gradient, result): gradient() runs one whole gradient and waits
    for it; result() returns its arrays, named as in the reference."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    state = {}

    if workload == "map":
        x, seed = jnp.asarray(inputs["x"]), jnp.asarray(inputs["seed"])

        def loss(x, seed):
            return jnp.vdot(seed, jnp.sin(x) * x)

        f = jax.jit(jax.value_and_grad(loss))

        def gradient():
            _, gx = f(x, seed)
            state["x"] = gx.block_until_ready()

        return gradient, lambda: {"x": state["x"]}

    if workload == "wave":
        u0, u1, seed = (jnp.asarray(inputs[k]) for k in ("u0", "u1", "seed"))
        c, steps = float(scalars["c"]), int(scalars["steps"])
        zero = jnp.zeros((1,), u0.dtype)

        def loss(u0, u1, seed):
            def step(carry, _):
                prev, now = carry
                left = jnp.concatenate([zero, now[:-1]])
                right = jnp.concatenate([now[1:], zero])
                nxt = 2.0 * now - prev + c * (left - 2.0 * now + right)
                return (now, nxt), nxt

            _, rows = lax.scan(step, (u0, u1), None, length=steps)
            return jnp.vdot(seed, rows[-1]), rows  # every step is stored and returned

        f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))

        def gradient():
            (_, rows), (g0, g1) = f(u0, u1, seed)
            rows.block_until_ready()
            state["u0"], state["u1"] = g0.block_until_ready(), g1.block_until_ready()

        return gradient, lambda: {"u0": state["u0"], "u1": state["u1"]}

    if workload == "springs":
        x, rest, seed = (jnp.asarray(inputs[k]) for k in ("x", "rest", "seed"))
        a, b = jnp.asarray(inputs["a"]), jnp.asarray(inputs["b"])
        k = float(scalars["k"])

        def loss(x, rest, seed):
            d = x[a] - x[b]
            length = jnp.sqrt(jnp.sum(d * d, axis=1))
            force = d * (-k * (length - rest) / length)[:, None]
            f = jnp.zeros_like(x).at[a].add(force).at[b].add(-force)
            return jnp.vdot(seed, f)

        f = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))

        def gradient():
            _, (gx, gr) = f(x, rest, seed)
            state["x"], state["rest"] = gx.block_until_ready(), gr.block_until_ready()

        return gradient, lambda: {"x": state["x"], "rest": state["rest"]}

    if workload == "recurrence":
        x, seed = jnp.asarray(inputs["x"]), jnp.asarray(inputs["seed"])
        a, b, iters = float(scalars["a"]), float(scalars["b"]), int(scalars["iters"])

        def loss(x, seed):
            v = lax.fori_loop(0, iters, lambda j, v: jnp.sin(v) * a + x * b, jnp.zeros_like(x))
            return jnp.vdot(seed, v)

        f = jax.jit(jax.value_and_grad(loss))

        def gradient():
            _, gx = f(x, seed)
            state["x"] = gx.block_until_ready()

        return gradient, lambda: {"x": state["x"]}

    raise ValueError(workload)
