#!/usr/bin/env python3
"""Random kernels against their plain C++ versions: forward values, adjoint,
tangent, one thread against several.

Each case is a random tree of loops, locals, branches and math written twice
from one description: as a ctgrad kernel and as plain C++ loops. The harness
(fuzz_support.hpp) compares the kernel's values with the plain loops', its
adjoint with central differences of them, and its tangent with its adjoint.
A kernel the library rejects at compile time (a CTG-... static_assert) or at
launch (a ctg exception) counts as rejected, not failed: the promise is a
right gradient or an error.

    tests/fuzz/gradients.py --cases 40 --seed 1 --jobs 2

writes the cases under build/fuzz/ and prints what failed; exit status 1
when any case gave a wrong number or failed to compile without a CTG ID.
"""

import argparse
import os
import random
import re
import subprocess
import sys
import concurrent.futures as futures

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class Scope:
    """What an expression may read where it is generated."""

    def __init__(self, index=None, inner=None, locals_=(), fields=(), static_inner=False, vectors=False,
                 extra=()):
        self.index = index  # the top-level loop's index name
        self.inner = inner  # a nested loop's index name
        self.static_inner = static_inner
        self.locals = list(locals_)  # names of scalar locals
        # Rank-1 fields of n elements: (kernel name, plain name, any index?).
        # A field the offload writes is read at the iteration's own index only.
        self.fields = list(fields)
        self.vectors = vectors  # p (a field of 2-vectors) and vector arithmetic
        self.extra = list(extra)  # more leaves: (kernel text, plain text)
        self.in_func = False  # a func's body sees its parameters only

    def with_locals(self, names):
        sc = Scope(self.index, self.inner, self.locals + list(names), self.fields, self.static_inner, self.vectors,
                   self.extra)
        sc.in_func = self.in_func
        return sc

    def with_inner(self, name, static=False):
        return Scope(self.index, name, self.locals, self.fields, static, self.vectors, self.extra)


def constant(rng):
    value = rng.choice([0.25, 0.5, 0.75, 1.25, -0.5, -1.5, 1.5, 0.125, 2.0])
    return ("%.3f" if value > 0 else "(%.3f)") % value


def leaf(rng, sc):
    """(kernel text, plain text) of a value an expression may read."""
    i, j = sc.index, sc.inner
    options = [lambda: (constant(rng),) * 2]
    if not sc.in_func:
        options.append(lambda: ("s()", "st.s"))
    if i:
        options += [
            lambda: ("w[%s %% m]" % i, "st.w[%s %% st.m]" % i),
            lambda: ("ctg::cast<double>(%s) * 0.0625" % i, "double(%s) * 0.0625" % i),
            # Math of integers: computed as double (as <cmath> does).
            lambda: ("ctg::sin(%s) * 0.5" % i, "std::sin(%s) * 0.5" % i),
            lambda: ("ctg::atan2(%s %% 7, 3)" % i, "std::atan2(%s %% 7, 3)" % i),
        ]
        for f, pf, free in sc.fields:
            options += [lambda f=f, pf=pf: ("%s[%s]" % (f, i), "%s[%s]" % (pf, i))] * 3
            if free:
                options += [
                    lambda f=f, pf=pf: ("%s[idx[%s]]" % (f, i), "%s[st.idx[%s]]" % (pf, i)),
                    lambda f=f, pf=pf: ("ctg::select(%s > 0, %s[%s - 1], 0.25)" % (i, f, i),
                                        "(%s > 0 ? %s[%s - 1] : 0.25)" % (i, pf, i)),
                    lambda f=f, pf=pf: ("ctg::select(%s < n - 1, %s[%s + 1], -0.5)" % (i, f, i),
                                        "(%s < st.n - 1 ? %s[%s + 1] : -0.5)" % (i, pf, i)),
                    lambda f=f, pf=pf: ("ctg::select(%s > 1, %s[%s - 2], 0.5)" % (i, f, i),
                                        "(%s > 1 ? %s[%s - 2] : 0.5)" % (i, pf, i)),
                    # Guards that short-circuit: the read beside the test
                    # happens only where the index allows it.
                    lambda f=f, pf=pf: ("ctg::select(%s > 0 && %s[%s - 1] > 0.0, %s[%s - 1], 0.25)" % (i, f, i, f, i),
                                        "(%s > 0 && %s[%s - 1] > 0.0 ? %s[%s - 1] : 0.25)" % (i, pf, i, pf, i)),
                    lambda f=f, pf=pf: ("ctg::select(%s >= n - 1 || %s[%s + 1] < 0.0, 0.5, %s[%s + 1])" % (i, f, i, f, i),
                                        "(%s >= st.n - 1 || %s[%s + 1] < 0.0 ? 0.5 : %s[%s + 1])" % (i, pf, i, pf, i)),
                    lambda f=f, pf=pf: ("%s[n - 1 - %s]" % (f, i), "%s[st.n - 1 - %s]" % (pf, i)),
                    lambda f=f, pf=pf: ("%s[%s / 2]" % (f, i), "%s[%s / 2]" % (pf, i)),
                    lambda f=f, pf=pf: ("%s[(%s * 7 + 3) %% n]" % (f, i), "%s[(%s * 7 + 3) %% st.n]" % (pf, i)),
                    lambda f=f, pf=pf: ("%s[0]" % f, "%s[0]" % pf),
                    lambda f=f, pf=pf: ("%s[ctg::abs(%s - 5) %% n]" % (f, i), "%s[std::abs(%s - 5) %% st.n]" % (pf, i)),
                ]
    if j:
        jc = "%s" % j
        options += [
            lambda: ("w[%s]" % jc, "st.w[%s]" % j),
            lambda: ("w[%s]" % jc, "st.w[%s]" % j),
            lambda: ("ctg::cast<double>(%s) * 0.25" % jc, "double(%s) * 0.25" % j),
        ]
        if i and not sc.static_inner:
            for f, pf, free in sc.fields:
                if free:
                    options.append(lambda f=f, pf=pf: ("%s[(%s + %s) %% n]" % (f, i, j), "%s[(%s + %s) %% st.n]" % (pf, i, j)))
    for v in sc.locals:
        options += [lambda v=v: (v, v)] * 3
    for e in sc.extra:
        options += [lambda e=e: e] * 3
    return rng.choice(options)()


UNARY = [
    ("ctg::sin(%s)", "std::sin(%s)"),
    ("ctg::cos(%s)", "std::cos(%s)"),
    ("ctg::tanh(%s)", "std::tanh(%s)"),
    ("ctg::atan(%s)", "std::atan(%s)"),
    ("ctg::exp(ctg::tanh(%s))", "std::exp(std::tanh(%s))"),
    ("ctg::sqrt(1.0 + %s * %s)", "std::sqrt(1.0 + %s * %s)"),
    ("ctg::log(1.5 + ctg::sin(%s))", "std::log(1.5 + std::sin(%s))"),
    ("ctg::abs(%s)", "std::abs(%s)"),
    ("(-%s)", "(-%s)"),
    ("ctg::erf(%s)", "std::erf(%s)"),
    ("ctg::log1p(%s * %s)", "std::log1p(%s * %s)"),
    ("ctg::pow(%s, 2.0)", "std::pow(%s, 2.0)"),
    ("ctg::pow(%s, 3)", "std::pow(%s, 3)"),
    ("ctg::clamp(%s, -0.5, 0.75)", "std::clamp(%s, -0.5, 0.75)"),
    ("ctg::sqrt(ctg::abs(%s) + 0.5)", "std::sqrt(std::abs(%s) + 0.5)"),
    ("ctg::tan(0.5 * ctg::tanh(%s))", "std::tan(0.5 * std::tanh(%s))"),
    ("ctg::asin(0.9 * ctg::tanh(%s))", "std::asin(0.9 * std::tanh(%s))"),
    ("ctg::acos(0.9 * ctg::tanh(%s))", "std::acos(0.9 * std::tanh(%s))"),
    ("ctg::expm1(ctg::tanh(%s))", "std::expm1(std::tanh(%s))"),
    ("ctg::rsqrt(1.0 + %s * %s)", "1.0 / std::sqrt(1.0 + %s * %s)"),
    ("ctg::floor(%s * 2.0)", "std::floor(%s * 2.0)"),
    ("(%s * ctg::sign(%s))", "(%s * ((0.0 < %s) - (%s < 0.0)))"),
    ("ctg::cast<double>(ctg::cast<int>(%s * 3.0))", "double(int(%s * 3.0))"),
    ("(ctg::ceil(%s * 1.5) + ctg::round(%s * 2.5))", "(std::ceil(%s * 1.5) + std::round(%s * 2.5))"),
    ("ctg::sinh(ctg::tanh(%s))", "std::sinh(std::tanh(%s))"),
    ("ctg::cosh(ctg::tanh(%s))", "std::cosh(std::tanh(%s))"),
    ("ctg::atanh(0.9 * ctg::tanh(%s))", "std::atanh(0.9 * std::tanh(%s))"),
    ("ctg::log2(1.5 + ctg::sin(%s)) + ctg::log10(1.25 + ctg::cos(%s))", "std::log2(1.5 + std::sin(%s)) + std::log10(1.25 + std::cos(%s))"),
    ("ctg::cbrt(1.0 + %s * %s) + ctg::exp2(ctg::tanh(%s)) + ctg::asinh(%s)", "std::cbrt(1.0 + %s * %s) + std::exp2(std::tanh(%s)) + std::asinh(%s)"),
    ("ctg::trunc(%s * 2.5)", "std::trunc(%s * 2.5)"),
]
BINARY = [
    ("ctg::fmod(%s, 0.75 + 0.5 * ctg::tanh(%s))", "std::fmod(%s, 0.75 + 0.5 * std::tanh(%s))"),
    ("(%s + %s)", "(%s + %s)"),
    ("(%s - %s)", "(%s - %s)"),
    ("(%s * %s)", "(%s * %s)"),
    ("(%s * %s)", "(%s * %s)"),
    ("(%s / (1.25 + %s * %s))", "(%s / (1.25 + %s * %s))"),
    ("ctg::min(%s, %s)", "std::min(%s, %s)"),
    ("ctg::max(%s, %s)", "std::max(%s, %s)"),
    ("ctg::pow(1.25 + ctg::tanh(%s), ctg::tanh(%s))", "std::pow(1.25 + std::tanh(%s), std::tanh(%s))"),
    ("ctg::atan2(%s, 1.5 + ctg::cos(%s))", "std::atan2(%s, 1.5 + std::cos(%s))"),
]


def fill(template, *args):
    """Substitutes args for the %s of template, repeating the last one."""
    count = template.count("%s")
    full = list(args) + [args[-1]] * (count - len(args))
    return template % tuple(full)


def block_of(statements):
    """(kernel, plain) of statements run in order: one, or a ctg::block."""
    k = statements[0][0] if len(statements) == 1 else "ctg::block(%s)" % ", ".join(x[0] for x in statements)
    return k, " ".join(x[1] for x in statements)


def adstack_option(gen):
    """The kernel option a generated while_ needs."""
    return ", ctg::adstack_capacity<64>" if gen.needs_adstack else ""


def is_constant(e):
    """Plain numbers only: ctg's functions take expressions, not numbers."""
    return re.search(r"[A-Za-z_]", e[0]) is None


def operand(rng, sc, depth):
    """An expression that is not a plain number, as ctg's functions need."""
    for _ in range(20):
        e = expr(rng, sc, depth)
        if not is_constant(e):
            return e
    return "s()", "st.s"


# The funcs of the case being generated: names callable with two scalars.
FUNCS = []


def make_func(rng, name):
    """A ctg::func of two scalars, with a let-block of its own, and its plain twin."""
    sc = Scope(extra=[("a", "a"), ("b", "b")])
    sc.in_func = True
    v = "u"
    inner = sc.with_locals([v])
    init = operand(rng, sc, 2)
    update = operand(rng, inner, 2)
    result = operand(rng, inner, 2)
    k = ("auto %s = ctg::func<\"%s\">([](auto a, auto b) {\n"
         "    return ctg::let(%s, [=](auto %s) { return ctg::block(%s = %s, ctg::result(%s)); });\n  });"
         % (name, name, init[0], v, v, update[0], result[0]))
    p = ("inline double %s_plain(double a, double b) { double %s = %s; %s = %s; return %s; }"
         % (name, v, init[1], v, update[1], result[1]))
    return k, p


def expr(rng, sc, depth):
    if depth <= 0 or rng.random() < 0.2:
        return leaf(rng, sc)
    if FUNCS and sc.index and rng.random() < 0.08:
        f = rng.choice(FUNCS)
        a, b = expr(rng, sc, depth - 1), expr(rng, sc, depth - 1)
        return "%s(%s, %s)" % (f, a[0], b[0]), "%s_plain(%s, %s)" % (f, a[1], b[1])
    r = rng.random()
    if sc.vectors and r < 0.1:
        return vector_reduction(rng, sc, depth)
    r = rng.random()
    if r < 0.35:
        k, p = rng.choice(UNARY)
        a = operand(rng, sc, depth - 1)
        return fill(k, a[0]), fill(p, a[1])
    if r < 0.9:
        k, p = rng.choice(BINARY)
        a, b = operand(rng, sc, depth - 1), expr(rng, sc, depth - 1)
        if k.count("%s") == 3:
            return k % (a[0], b[0], b[0]), p % (a[1], b[1], b[1])
        return k % (a[0], b[0]), p % (a[1], b[1])
    c1, c2 = operand(rng, sc, depth - 2), expr(rng, sc, depth - 2)
    a, b = operand(rng, sc, depth - 1), expr(rng, sc, depth - 1)
    return ("ctg::select(%s > %s, %s, %s)" % (c1[0], c2[0], a[0], b[0]),
            "(%s > %s ? %s : %s)" % (c1[1], c2[1], a[1], b[1]))


def vleaf(rng, sc):
    """A 2-vector value: (kernel text, plain text, an Eigen::Vector2d)."""
    i = sc.index
    options = [lambda: (lambda a, b: ("ctg::vec(%s, %s)" % (a[0], b[0]), "fuzz::vec2(%s, %s)" % (a[1], b[1])))(
        operand(rng, sc, 1), expr(rng, sc, 1))]
    if i and sc.vectors:
        options += [
            lambda: ("p[%s]" % i, "st.p[%s]" % i),
            lambda: ("p[%s]" % i, "st.p[%s]" % i),
            lambda: ("p[idx[%s]]" % i, "st.p[st.idx[%s]]" % i),
            lambda: ("ctg::select(%s > 0, p[%s - 1], ctg::vec(0.5, -0.25))" % (i, i),
                     "(%s > 0 ? fuzz::vec2(st.p[%s - 1]) : fuzz::vec2(0.5, -0.25))" % (i, i)),
        ]
    return rng.choice(options)()


def vexpr(rng, sc, depth):
    if depth <= 0 or rng.random() < 0.3:
        return vleaf(rng, sc)
    r = rng.random()
    a = vexpr(rng, sc, depth - 1)
    if r < 0.25:
        b = vexpr(rng, sc, depth - 1)
        op = rng.choice(["+", "-"])
        return "(%s %s %s)" % (a[0], op, b[0]), "fuzz::vec2(%s %s %s)" % (a[1], op, b[1])
    if r < 0.5:
        c = operand(rng, sc, depth - 1)
        return "(%s * %s)" % (c[0], a[0]), "fuzz::vec2(%s * %s)" % (c[1], a[1])
    if r < 0.7:
        e = [operand(rng, sc, 1)] + [expr(rng, sc, 1) for _ in range(3)]
        return ("(ctg::mat<2, 2>(%s) * %s)" % (", ".join(x[0] for x in e), a[0]),
                "fuzz::vec2(fuzz::make_mat2(%s) * %s)" % (", ".join(x[1] for x in e), a[1]))
    if r < 0.85:
        return "ctg::sin(%s)" % a[0], "fuzz::vec2(fuzz::vec2(%s).array().sin())" % a[1]
    return ("ctg::normalized(%s + ctg::vec(2.5, 0.0))" % a[0],
            "fuzz::vec2(fuzz::vec2(%s + fuzz::vec2(2.5, 0.0)).normalized())" % a[1])


def vector_reduction(rng, sc, depth):
    """A scalar computed from vectors."""
    a = vexpr(rng, sc, depth - 1)
    r = rng.random()
    if r < 0.2:
        b = vexpr(rng, sc, depth - 1)
        return "ctg::dot(%s, %s)" % (a[0], b[0]), "fuzz::vec2(%s).dot(fuzz::vec2(%s))" % (a[1], b[1])
    if r < 0.3:
        return "ctg::norm(%s + ctg::vec(1.5, 0.0))" % a[0], "fuzz::vec2(%s + fuzz::vec2(1.5, 0.0)).norm()" % a[1]
    if r < 0.4:
        return "ctg::norm_sqr(%s)" % a[0], "fuzz::vec2(%s).squaredNorm()" % a[1]
    if r < 0.55:
        c = rng.choice([0, 1])
        return "(%s)[ctg::c<%d>]" % (a[0], c), "fuzz::vec2(%s)[%d]" % (a[1], c)
    if r < 0.65:
        b = vexpr(rng, sc, depth - 1)
        return ("ctg::cross(%s, %s)" % (a[0], b[0]),
                "fuzz::cross(fuzz::vec2(%s), fuzz::vec2(%s))" % (a[1], b[1]))
    if r < 0.8:
        return matrix3_reduction(rng, sc)
    e = [operand(rng, sc, 1)] + [expr(rng, sc, 1) for _ in range(3)]
    km, pm = "ctg::mat<2, 2>(%s)" % ", ".join(x[0] for x in e), "fuzz::make_mat2(%s)" % ", ".join(x[1] for x in e)
    r = rng.random()
    k = rng.choice([0, 1])
    if r < 0.4:
        return "ctg::det(%s)" % km, "%s.determinant()" % pm
    if r < 0.6:
        return "ctg::svd_sigma(%s)[ctg::c<%d>]" % (km, k), "fuzz::svd_sigma(%s, %d)" % (pm, k)
    if r < 0.8:
        return "ctg::sym_eig_values(%s)[ctg::c<%d>]" % (km, k), "fuzz::sym_eig_value(%s, %d)" % (pm, k)
    c = rng.choice([0, 1])
    return "ctg::polar_r(%s)(ctg::c<%d>, ctg::c<%d>)" % (km, k, c), "fuzz::polar_r(%s, %d, %d)" % (pm, k, c)


def matrix3(rng, sc):
    """A 3x3 matrix: (kernel text, plain text): random entries around a
    multiple of the identity, or a product, transpose or inverse of one."""
    entries = []
    for r in range(3):
        for c in range(3):
            e = expr(rng, sc, 1) if rng.random() < 0.45 else (constant(rng),) * 2
            if r == c:
                e = ("(1.5 + %s)" % e[0], "(1.5 + %s)" % e[1])
            entries.append(e)
    km = "ctg::mat<3, 3>(%s)" % ", ".join(x[0] for x in entries)
    pm = "fuzz::make_mat3(%s)" % ", ".join(x[1] for x in entries)
    r = rng.random()
    if r < 0.15:
        return "ctg::transpose(%s)" % km, "fuzz::mat3(%s.transpose())" % pm
    if r < 0.3:
        return "ctg::inverse(%s)" % km, "fuzz::mat3(%s.inverse())" % pm
    if r < 0.4:
        return ("(%s * ctg::outer(ctg::vec(%s, 0.5, 1.0), ctg::vec(1.0, %s, 0.25)))" % (km, entries[1][0], entries[5][0]),
                "fuzz::mat3(%s * (fuzz::vec3(%s, 0.5, 1.0) * fuzz::vec3(1.0, %s, 0.25).transpose()))"
                % (pm, entries[1][1], entries[5][1]))
    return km, pm


def matrix3_reduction(rng, sc, matrix=None):
    """A scalar from a 3x3 matrix (a random one, or matrix: (kernel, plain)):
    a determinant, a coefficient of a product or of a decomposition, an
    eigenvalue, a cross product's component."""
    km, pm = matrix or matrix3(rng, sc)
    k, c = rng.randrange(3), rng.randrange(3)
    r = rng.random()
    if r < 0.15:
        return "ctg::det(%s)" % km, "fuzz::mat3(%s).determinant()" % pm
    if r < 0.3:
        v = operand(rng, sc, 1)
        return ("(%s * ctg::vec(%s, 0.5, -0.25))[ctg::c<%d>]" % (km, v[0], k),
                "(fuzz::mat3(%s) * fuzz::vec3(%s, 0.5, -0.25))[%d]" % (pm, v[1], k))
    if r < 0.42:
        return "ctg::svd_sigma(%s)[ctg::c<%d>]" % (km, k), "fuzz::svd_sigma3(%s, %d)" % (pm, k)
    if r < 0.54:
        return "ctg::sym_eig_values(%s)[ctg::c<%d>]" % (km, k), "fuzz::sym_eig_value3(%s, %d)" % (pm, k)
    if r < 0.66:
        return ("ctg::polar_r(%s)(ctg::c<%d>, ctg::c<%d>)" % (km, k, c),
                "fuzz::polar_r3(%s, %d, %d)" % (pm, k, c))
    if r < 0.74:
        return ("ctg::polar_s(%s)(ctg::c<%d>, ctg::c<%d>)" % (km, k, c),
                "fuzz::polar_s3(%s, %d, %d)" % (pm, k, c))
    if r < 0.84:
        return "ctg::trace(ctg::transpose(%s) * %s)" % (km, km), "fuzz::mat3(%s).squaredNorm()" % pm
    if r < 0.92:
        a = operand(rng, sc, 1)
        return ("ctg::cross(ctg::vec(%s, 1.0, 0.5), %s * ctg::vec(0.25, %s, 1.0))[ctg::c<%d>]" % (a[0], km, a[0], k),
                "fuzz::vec3(%s, 1.0, 0.5).cross(fuzz::mat3(%s) * fuzz::vec3(0.25, %s, 1.0))[%d]" % (a[1], pm, a[1], k))
    return ("ctg::norm(%s * ctg::vec(1.0, -0.5, 0.25))" % km,
            "(fuzz::mat3(%s) * fuzz::vec3(1.0, -0.5, 0.25)).norm()" % pm)


class Gen:
    # Bounds of nested loops: a launch argument, a number, a field's element.
    inner_bounds = [("m", "st.m"), ("3", "3"), ("idx[0] % 4 + 1", "st.idx[0] % 4 + 1")]

    has_indices = True  # the launch has the index field idx

    def loop_bounds(self, sc):
        """(begin or None, end) pairs, (kernel, plain) each, of a nested
        loop: fixed, from a field, or from the outer loop's index (a
        triangular loop, possibly of no iteration). The index stays below 5,
        the length of w, which the body may read at it."""
        out = [(None, b) for b in self.inner_bounds]
        i = sc.index
        if i:
            out += [(None, ("%s %% 5" % i,) * 2),
                    (("%s %% 3" % i,) * 2, ("%s %% 3 + 2" % i,) * 2)]
            if self.has_indices:
                out.append((None, ("idx[%s] %% 4" % i, "st.idx[%s] %% 4" % i)))
                out.append((("idx[%s] %% 2" % i, "st.idx[%s] %% 2" % i), ("m - 1", "st.m - 1")))
        return out

    def __init__(self, rng):
        self.rng = rng
        self.counter = 0
        self.needs_adstack = False

    def fresh(self, stem):
        self.counter += 1
        return "%s%d" % (stem, self.counter)

    def local_statement(self, sc, names, depth, nest):
        """(kernel, plain) of one statement updating the locals `names`."""
        rng = self.rng
        v = rng.choice(names)
        r = rng.random()
        if r < 0.3:
            e = expr(rng, sc, depth)
            return "%s = %s" % (v, e[0]), "%s = %s;" % (v, e[1])
        if r < 0.42:
            e = expr(rng, sc, depth)
            op = rng.choice(["+=", "-="])
            return "%s %s %s" % (v, op, e[0]), "%s %s %s;" % (v, op, e[1])
        if r < 0.5:
            e = expr(rng, sc, depth - 1)
            return ("%s *= 0.75 + 0.25 * ctg::sin(%s)" % (v, e[0]),
                    "%s *= 0.75 + 0.25 * std::sin(%s);" % (v, e[1]))
        if r < 0.62 and nest > 0:
            c1, c2 = operand(rng, sc, 1), expr(rng, sc, 1)
            a, b = self.local_statement(sc, names, depth, nest - 1), self.local_statement(sc, names, depth, nest - 1)
            return ("ctg::if_(%s > %s, %s, %s)" % (c1[0], c2[0], a[0], b[0]),
                    "if (%s > %s) { %s } else { %s }" % (c1[1], c2[1], a[1], b[1]))
        if r < 0.8 and nest > 0 and sc.inner is None:
            j = self.fresh("j")
            inner = sc.with_inner(j)
            body = [self.local_statement(inner, names, depth, nest - 1) for _ in range(rng.randint(1, 2))]
            kb, pb = block_of(body)
            if rng.random() < 0.3:
                return ("ctg::static_range<3>([=](auto %s) { return %s; })" % (j, kb),
                        "for (int %s = 0; %s < 3; ++%s) { %s }" % (j, j, j, pb))
            begin, end = rng.choice(self.loop_bounds(sc))
            if begin is None:
                return ("ctg::range(%s, [=](auto %s) { return %s; })" % (end[0], j, kb),
                        "for (int %s = 0; %s < %s; ++%s) { %s }" % (j, j, end[1], j, pb))
            return ("ctg::range(%s, %s, [=](auto %s) { return %s; })" % (begin[0], end[0], j, kb),
                    "for (int %s = %s; %s < %s; ++%s) { %s }" % (j, begin[1], j, end[1], j, pb))
        if r < 0.88 and nest > 0:
            # A while_ with a trip count of its own (data dependent).
            self.needs_adstack = True
            c = self.fresh("c")
            e = expr(rng, sc, depth)
            limit = rng.choice(["2", "3", "4"])
            if rng.random() < 0.5:
                k = ("ctg::let(0, [=](auto %s) { return ctg::while_(%s < %s, ctg::block(%s = %s, %s += 1)); })"
                     % (c, c, limit, v, e[0], c))
                p = "{ int %s = 0; while (%s < %s) { %s = %s; %s += 1; } }" % (c, c, limit, v, e[1], c)
                return k, p
            # A trip count that depends on the local's value.
            k = ("ctg::let(0, [=](auto %s) { return ctg::while_(%s < %s && %s > -0.5, "
                 "ctg::block(%s = %s - 0.375 * (1.0 + ctg::tanh(%s)), %s += 1)); })" % (c, c, limit, v, v, v, e[0], c))
            p = ("{ int %s = 0; while (%s < %s && %s > -0.5) { %s = %s - 0.375 * (1.0 + std::tanh(%s)); %s += 1; } }"
                 % (c, c, limit, v, v, v, e[1], c))
            return k, p
        e = expr(rng, sc, depth)
        return "%s = %s" % (v, e[0]), "%s = %s;" % (v, e[1])

    def sink(self, sc, value, writes_t):
        """A statement that sends a value to the outputs."""
        rng = self.rng
        i = sc.index
        # One offload either stores out[i] or accumulates into out: a store
        # racing with another iteration's accumulation has no one result.
        if self.out_stores:
            options = [("out[%s] = %s" % (i, value[0]), "st.out[%s] = %s;" % (i, value[1]))] * 2
        else:
            options = [
                ("out[%s] += %s" % (i, value[0]), "st.out[%s] += %s;" % (i, value[1])),
                ("out[idx[%s]] += %s" % (i, value[0]), "st.out[st.idx[%s]] += %s;" % (i, value[1])),
                ("out[(%s + 1) %% n] -= %s" % (i, value[0]), "st.out[(%s + 1) %% st.n] -= %s;" % (i, value[1])),
            ]
        options.append(("acc() += %s" % value[0], "st.acc += %s;" % value[1]))
        if sc.vectors and self.rng.random() < 0.3:
            vec = vexpr(self.rng, sc, 2)
            if self.out_stores:
                return "q[%s] = %s" % (i, vec[0]), "st.q[%s] = %s;" % (i, vec[1])
            if self.rng.random() < 0.5:
                return "q[%s] += %s" % (i, vec[0]), "st.q[%s] += %s;" % (i, vec[1])
            return "q[idx[%s]] -= %s" % (i, vec[0]), "st.q[st.idx[%s]] -= %s;" % (i, vec[1])
        if writes_t:
            options = [("t[%s] = %s" % (i, value[0]), "st.t[%s] = %s;" % (i, value[1]))] * 3 + options
        return rng.choice(options)

    def body_statement(self, sc, writes_t):
        rng = self.rng
        r = rng.random()
        if r < 0.35:
            return self.sink(sc, expr(rng, sc, rng.randint(1, 4)), writes_t)
        if r < 0.45:
            c1, c2 = operand(rng, sc, 1), expr(rng, sc, 1)
            a = self.sink(sc, expr(rng, sc, 2), writes_t)
            b = self.sink(sc, expr(rng, sc, 2), writes_t)
            return ("ctg::if_(%s > %s, %s, %s)" % (c1[0], c2[0], a[0], b[0]),
                    "if (%s > %s) { %s } else { %s }" % (c1[1], c2[1], a[1], b[1]))
        if r < 0.55:
            return self.vector_local_statement(sc, writes_t)
        # A let-block: locals, updates, loops, then a sink.
        count = rng.choice([1, 1, 2])
        names = [self.fresh("v") for _ in range(count)]
        inits = [expr(rng, sc, 2) for _ in names]
        inner = sc.with_locals(names)
        stmts = [self.local_statement(inner, names, rng.randint(1, 3), 2) for _ in range(rng.randint(1, 3))]
        last = self.sink(inner, expr(rng, inner, 1), writes_t)
        k = "ctg::let(%s, [=](%s) { return ctg::block(%s, %s); })" % (
            ", ".join(e[0] for e in inits), ", ".join("auto " + n for n in names),
            ", ".join(s[0] for s in stmts), last[0])
        p = "{ %s %s %s }" % (" ".join("double %s = %s;" % (n, e[1]) for n, e in zip(names, inits)),
                              " ".join(s[1] for s in stmts), last[1])
        return k, p

    def vector_local_statement(self, sc, writes_t):
        """A let-block on a 2-vector or 2x2 matrix local: component stores,
        whole-value updates, a loop over it, then a sink of a scalar of it."""
        rng = self.rng
        a = self.fresh("a")
        if rng.random() < 0.6:
            init = vexpr(rng, sc, 2)
            comps = ["%s[ctg::c<%d>]" % (a, k) for k in range(2)]
            inner = sc.with_locals([])
            inner.extra = sc.extra + [(c, "%s[%d]" % (a, k)) for k, c in enumerate(comps)]
            stmts = []
            for _ in range(rng.randint(1, 3)):
                r = rng.random()
                if r < 0.35:
                    k = rng.randrange(2)
                    e = expr(rng, inner, 2)
                    stmts.append(("%s = %s" % (comps[k], e[0]), "%s[%d] = %s;" % (a, k, e[1])))
                elif r < 0.6:
                    e = [operand(rng, inner, 1)] + [expr(rng, inner, 1) for _ in range(3)]
                    stmts.append(("%s = ctg::mat<2, 2>(%s) * %s" % (a, ", ".join(x[0] for x in e), a),
                                  "%s = fuzz::vec2(fuzz::make_mat2(%s) * %s);" % (a, ", ".join(x[1] for x in e), a)))
                elif r < 0.8:
                    v = vexpr(rng, sc, 1)
                    op = rng.choice(["+=", "-="])
                    stmts.append(("%s %s %s" % (a, op, v[0]), "%s %s fuzz::vec2(%s);" % (a, op, v[1])))
                else:
                    e = operand(rng, inner, 1)
                    stmts.append(("%s *= 0.5 + 0.25 * ctg::tanh(%s)" % (a, e[0]),
                                  "%s *= 0.5 + 0.25 * std::tanh(%s);" % (a, e[1])))
            r = rng.random()
            if r < 0.4:
                out = ("ctg::dot(%s, %s)" % (a, a), "%s.dot(%s)" % (a, a))
            elif r < 0.7:
                out = ("ctg::norm(%s + ctg::vec(2.0, 0.5))" % a, "(%s + fuzz::vec2(2.0, 0.5)).norm()" % a)
            else:
                out = expr(rng, inner, 1)
                out = ("(%s + %s)" % (comps[1], out[0]), "(%s[1] + %s)" % (a, out[1]))
            last = self.sink(inner, out, writes_t)
            stmts.append(last)
            kb = ", ".join(x[0] for x in stmts)
            pb = " ".join(x[1] for x in stmts)
            return ("ctg::let(%s, [=](auto %s) { return ctg::block(%s); })" % (init[0], a, kb),
                    "{ fuzz::vec2 %s = %s; %s }" % (a, init[1], pb))
        # A 2x2 matrix local.
        e = [operand(rng, sc, 1)] + [expr(rng, sc, 1) for _ in range(3)]
        init = ("ctg::mat<2, 2>(%s)" % ", ".join(x[0] for x in e), "fuzz::make_mat2(%s)" % ", ".join(x[1] for x in e))
        inner = sc.with_locals([])
        inner.extra = sc.extra + [("%s(ctg::c<%d>, ctg::c<%d>)" % (a, r, c), "%s(%d, %d)" % (a, r, c))
                                  for r in range(2) for c in range(2)]
        stmts = []
        for _ in range(rng.randint(1, 2)):
            r = rng.random()
            if r < 0.4:
                rr, cc = rng.randrange(2), rng.randrange(2)
                v = expr(rng, inner, 2)
                stmts.append(("%s(ctg::c<%d>, ctg::c<%d>) = %s" % (a, rr, cc, v[0]), "%s(%d, %d) = %s;" % (a, rr, cc, v[1])))
            elif r < 0.7:
                stmts.append(("%s = 0.5 * %s * ctg::transpose(%s)" % (a, a, a), "%s = fuzz::mat2(0.5 * %s * %s.transpose());" % (a, a, a)))
            else:
                j = self.fresh("j")
                stmts.append(("ctg::range(2, [=](auto %s) { return %s = %s * ctg::mat<2, 2>(1.0, 0.25, -0.25, 1.0) + 0.125 * ctg::cast<double>(%s) * %s; })" % (j, a, a, j, a),
                              "for (int %s = 0; %s < 2; ++%s) { %s = fuzz::mat2(%s * fuzz::make_mat2(1.0, 0.25, -0.25, 1.0) + 0.125 * double(%s) * %s); }" % (j, j, j, a, a, j, a)))
        r = rng.random()
        if r < 0.4:
            out = ("ctg::det(%s)" % a, "%s.determinant()" % a)
        elif r < 0.7:
            k = rng.randrange(2)
            out = ("ctg::svd_sigma(%s)[ctg::c<%d>]" % (a, k), "fuzz::svd_sigma(%s, %d)" % (a, k))
        else:
            out = ("ctg::trace(%s)" % a, "%s.trace()" % a)
        stmts.append(self.sink(inner, out, writes_t))
        return ("ctg::let(%s, [=](auto %s) { return ctg::block(%s); })" % (init[0], a, ", ".join(x[0] for x in stmts)),
                "{ fuzz::mat2 %s = %s; %s }" % (a, init[1], " ".join(x[1] for x in stmts)))

    def serial_offload(self):
        """t[i] from t[i - 1]: a recurrence through a field, in order."""
        rng = self.rng
        i = self.fresh("i")
        sc = Scope(index=i, fields=[("x", "st.x", True)], vectors=True,
                   extra=[("t[%s - 1]" % i, "st.t[%s - 1]" % i)])
        e = operand(rng, sc, rng.randint(2, 4))
        if "t[" not in e[0]:
            e = ("(%s + 0.5 * t[%s - 1])" % (e[0], i), "(%s + 0.5 * st.t[%s - 1])" % (e[1], i))
        return ("ctg::serial_range(1, n, [=](auto %s) { return t[%s] = %s; })" % (i, i, e[0]),
                "for (int %s = 1; %s < st.n; ++%s) { st.t[%s] = %s; }" % (i, i, i, i, e[1]))

    def offload(self, writes_t, reads_t):
        rng = self.rng
        i = self.fresh("i")
        sc = Scope(index=i, fields=[("x", "st.x", True)] + ([("t", "st.t", True)] if reads_t else []), vectors=True)
        self.out_stores = rng.random() < 0.5
        stmts = [self.body_statement(sc, writes_t) for _ in range(rng.randint(1, 2))]
        if writes_t and not any(s[0].startswith("t[") for s in stmts):
            stmts.append(("t[%s] = x[%s] * 0.5" % (i, i), "st.t[%s] = st.x[%s] * 0.5;" % (i, i)))
        kb, pb = block_of(stmts)
        return ("ctg::range(n, [=](auto %s) { return %s; })" % (i, kb),
                "for (int %s = 0; %s < st.n; ++%s) { %s }" % (i, i, i, pb))


def make_case(case_id, seed):
    rng = random.Random(seed)
    g = Gen(rng)
    FUNCS.clear()
    funcs = [make_func(rng, "f%d" % k) for k in range(rng.randint(0, 2))]
    FUNCS.extend("f%d" % k for k in range(len(funcs)))
    two = rng.random() < 0.5
    offloads = [g.serial_offload() if two and rng.random() < 0.3 else g.offload(writes_t=two, reads_t=False)]
    if two:
        offloads.append(g.offload(writes_t=False, reads_t=True))
    kb, pb = block_of(offloads)
    options = adstack_option(g)
    name = "fuzz_%d" % case_id
    FUNCS.clear()
    return """
// seed %d
namespace case_%d {
%s
inline void plain(fuzz::state& st) {
    %s
}
inline fuzz::outcome run() {
  %s
  auto k = ctg::kernel<"%s"%s>([=](auto x, auto w, auto s, auto idx, auto out, auto acc, auto t, auto p, auto q, int n, int m) {
    (void)x, (void)w, (void)s, (void)idx, (void)out, (void)acc, (void)t, (void)p, (void)q, (void)n, (void)m;
    return %s;
  });
  return fuzz::check_case("%s", k, plain, %du);
}
}  // namespace case_%d
""" % (seed, case_id, "\n".join(f[1] for f in funcs), pb, "\n  ".join(f[0] for f in funcs),
       name, options, kb, name, seed & 0xffffffff, case_id)


class RolloutGen(Gen):
    """Kernels that update the state x, v in place, launched step after step."""

    def sink(self, sc, value, writes_t):
        f = self.rng.choice(self.written)
        op = self.rng.choice(["=", "=", "+=", "-="])
        return ("%s[%s] %s %s" % (f, sc.index, op, value[0]),
                "st.%s[%s] %s %s;" % (f, sc.index, op, value[1]))

    def rollout_offload(self, written, readable=("x", "v")):
        rng = self.rng
        self.written = written
        i = self.fresh("i")
        # ctrl(t, k): a control sequence, one row per step (t is the step).
        sc = Scope(index=i, fields=[(f, "st." + f, f not in written) for f in readable],
                   extra=[("ctrl(t, %s %% m)" % i, "st.C(t, %s %% st.m)" % i)])
        # One statement: a read of x[i] after a store to it in the same
        # launch is refused (CTG-AD-004), and the point here is what runs.
        k, p = self.body_statement(sc, False)
        return ("ctg::range(n, [=](auto %s) { return %s; })" % (i, k),
                "for (int %s = 0; %s < st.n; ++%s) { %s }" % (i, i, i, p))

    def kernel(self, number):
        rng = self.rng
        if rng.random() < 0.3:
            # Two offloads: v from x (read anywhere), then x from v; the
            # second overwrites what the first read, which the tape keeps.
            # (The first does not read v: v's old value would be needed by its
            # adjoint and the new one by the second's, CTG-AD-004.)
            offloads = [self.rollout_offload(["v"], readable=("x",)), self.rollout_offload(["x"])]
        else:
            offloads = [self.rollout_offload(rng.choice([["x"], ["v"], ["x", "v"]]))]
        kb = block_of(offloads)[0]
        options = adstack_option(self)
        self.needs_adstack = False
        k = ('auto k%d = ctg::kernel<"step_%d"%s>([](auto x, auto v, auto w, auto s, auto idx, int n, int m, auto ctrl, int t) {\n'
             '    (void)x, (void)v, (void)w, (void)s, (void)idx, (void)n, (void)m, (void)ctrl, (void)t;\n'
             '    return %s;\n  });' % (number, number, options, kb))
        return k, " ".join(o[1] for o in offloads)


class GridGen(Gen):
    """2-D offloads over ny x nx: stencils of g and u, stores and sums into h."""

    inner_bounds = [("m", "st.m"), ("3", "3")]
    has_indices = False

    def grid_leaves(self, i, j, fields):
        out = [("w[%s %% m]" % j, "st.w[%s %% st.m]" % j),
               ("ctg::cast<double>(%s) * 0.0625" % i, "double(%s) * 0.0625" % i),
               ("ctg::cast<double>(%s) * 0.03125" % j, "double(%s) * 0.03125" % j)]
        for f, big in fields:
            out += [("%s(%s, %s)" % (f, i, j), "st.%s(%s, %s)" % (big, i, j))] * 3
            out += [
                ("ctg::select(%s > 0, %s(%s - 1, %s), 0.25)" % (i, f, i, j),
                 "(%s > 0 ? st.%s(%s - 1, %s) : 0.25)" % (i, big, i, j)),
                ("ctg::select(%s < nx - 1, %s(%s, %s + 1), -0.5)" % (j, f, i, j),
                 "(%s < st.nx - 1 ? st.%s(%s, %s + 1) : -0.5)" % (j, big, i, j)),
                ("ctg::select(%s > 0 && %s > 1, %s(%s - 1, %s - 2), 0.5)" % (i, j, f, i, j),
                 "(%s > 0 && %s > 1 ? st.%s(%s - 1, %s - 2) : 0.5)" % (i, j, big, i, j)),
                ("ctg::select(%s < ny - 1, %s(%s + 1, %s), 0.125)" % (i, f, i, j),
                 "(%s < st.ny - 1 ? st.%s(%s + 1, %s) : 0.125)" % (i, big, i, j)),
                ("ctg::select(%s > 0 && %s(%s - 1, %s) > 0.0, %s(%s - 1, %s), 0.25)" % (i, f, i, j, f, i, j),
                 "(%s > 0 && st.%s(%s - 1, %s) > 0.0 ? st.%s(%s - 1, %s) : 0.25)" % (i, big, i, j, big, i, j)),
                ("%s(%s, (%s + 2) %% nx)" % (f, i, j), "st.%s(%s, (%s + 2) %% st.nx)" % (big, i, j)),
                ("%s(ny - 1 - %s, %s)" % (f, i, j), "st.%s(st.ny - 1 - %s, %s)" % (big, i, j)),
            ]
        return out

    def sink(self, sc, value, writes_u):
        i, j = self.ij
        if writes_u:
            return "u(%s, %s) = %s" % (i, j, value[0]), "st.U(%s, %s) = %s;" % (i, j, value[1])
        if self.out_stores:
            options = [("h(%s, %s) = %s" % (i, j, value[0]), "st.H(%s, %s) = %s;" % (i, j, value[1]))] * 3
        else:
            options = [
                ("h(%s, %s) += %s" % (i, j, value[0]), "st.H(%s, %s) += %s;" % (i, j, value[1])),
                ("h((%s + 1) %% ny, %s) -= %s" % (i, j, value[0]), "st.H((%s + 1) %% st.ny, %s) -= %s;" % (i, j, value[1])),
            ]
        options.append(("acc() += %s" % value[0], "st.acc += %s;" % value[1]))
        return self.rng.choice(options)

    def grid_offload(self, writes_u, reads_u):
        rng = self.rng
        i, j = self.fresh("r"), self.fresh("c")
        self.ij = (i, j)
        self.out_stores = rng.random() < 0.5
        fields = [("g", "G")] + ([("u", "U")] if reads_u else [])
        sc = Scope(index=i, extra=self.grid_leaves(i, j, fields))
        stmts = [self.body_statement(sc, writes_u) for _ in range(1 if writes_u else rng.randint(1, 2))]
        if writes_u and not any(x[0].startswith("u(") or "u(%s, %s) =" % (i, j) in x[0] for x in stmts):
            stmts.append(("u(%s, %s) = g(%s, %s) * 0.5" % (i, j, i, j), "st.U(%s, %s) = st.G(%s, %s) * 0.5;" % (i, j, i, j)))
        kb, pb = block_of(stmts)
        return ("ctg::ndrange(ny, nx, [=](auto %s, auto %s) { return %s; })" % (i, j, kb),
                "for (int %s = 0; %s < st.ny; ++%s) for (int %s = 0; %s < st.nx; ++%s) { %s }"
                % (i, i, i, j, j, j, pb))


    def parity_sweep(self):
        """u updated in place on the cells where (a i + b j + c) % q == r, from
        u at offsets whose cells are never in that class (a red-black sweep and
        its kin), and from g: no iteration reads a cell another writes."""
        rng = self.rng
        i, j = self.fresh("r"), self.fresh("c")
        while True:
            q = rng.choice([2, 2, 3, 4])
            a, b, c = rng.randint(1, 3), rng.randint(0, 3), rng.randint(0, 2)
            offsets = [(di, dj) for di in range(-2, 3) for dj in range(-2, 3) if (a * di + b * dj) % q != 0]
            if offsets:
                break
        r = rng.randrange(q)
        leaves = [("g(%s, %s)" % (i, j), "st.G(%s, %s)" % (i, j))]
        for di, dj in rng.sample(offsets, min(len(offsets), rng.randint(1, 4))):
            ii, jj = "%s + (%d)" % (i, di), "%s + (%d)" % (j, dj)
            inside = "%s >= 0 && %s < ny && %s >= 0 && %s < nx" % (ii, ii, jj, jj)
            plain_inside = inside.replace("ny", "st.ny").replace("nx", "st.nx")
            leaves += [("ctg::select(%s, u(%s, %s), 0.25)" % (inside, ii, jj),
                        "(%s ? st.U(%s, %s) : 0.25)" % (plain_inside, ii, jj))] * 2
        sc = Scope(index=i, extra=leaves)
        value = operand(rng, sc, rng.randint(1, 3))
        guard = "(%d * %s + %d * %s + %d) %% %d == %d" % (a, i, b, j, c, q, r)
        return ("ctg::ndrange(ny, nx, [=](auto %s, auto %s) { return ctg::if_(%s, u(%s, %s) = %s); })"
                % (i, j, guard, i, j, value[0]),
                "for (int %s = 0; %s < st.ny; ++%s) for (int %s = 0; %s < st.nx; ++%s) { if (%s) st.U(%s, %s) = %s; }"
                % (i, i, i, j, j, j, guard, i, j, value[1]))


def make_grid(case_id, seed):
    rng = random.Random(seed)
    g = GridGen(rng)
    FUNCS.clear()
    two = rng.random() < 0.6
    offloads = [g.grid_offload(writes_u=two, reads_u=False)]
    if two:
        # Sometimes a sweep of u in place between writing it and reading it.
        if rng.random() < 0.4:
            offloads.append(g.parity_sweep())
        offloads.append(g.grid_offload(writes_u=False, reads_u=True))
    kb, pb = block_of(offloads)
    options = adstack_option(g)
    name = "grid_%d" % case_id
    return """
// seed %d (grid)
namespace case_%d {
inline void plain(fuzz::grid_state& st) {
    %s
}
inline fuzz::outcome run() {
  auto k = ctg::kernel<"%s"%s>([=](auto g, auto u, auto h, auto w, auto s, auto acc, int ny, int nx, int m) {
    (void)g, (void)u, (void)h, (void)w, (void)s, (void)acc, (void)ny, (void)nx, (void)m;
    return %s;
  });
  return fuzz::check_grid("%s", k, plain, %du);
}
}  // namespace case_%d
""" % (seed, case_id, pb, name, options, kb, name, seed & 0xffffffff, case_id)


def make_rollout(case_id, seed):
    rng = random.Random(seed)
    g = RolloutGen(rng)
    kernels = [g.kernel(k) for k in range(rng.randint(1, 3))]
    steps = rng.randint(2, 7)
    order = [rng.randrange(len(kernels)) for _ in range(rng.randint(1, 3))]
    launches = " ".join("run(k%d, f.x, f.v, f.w, f.s, f.idx, f.n, f.m, f.ctrl, t);" % k for k in order)
    plain_steps = " ".join("step_%d(st, step);" % k for k in order)
    plain_kernels = "\n".join("inline void step_%d(fuzz::rollout_state& st, int t) { (void)t; %s }" % (k, kp[1])
                               for k, kp in enumerate(kernels))
    name = "rollout_%d" % case_id
    return """
// seed %d (rollout)
namespace case_%d {
%s
inline double plain(fuzz::rollout_state& st) {
  for (int step = 0; step < %d; ++step) { %s }
  return fuzz::plain_measure(st);
}
inline fuzz::outcome run() {
  %s
  auto step = [&](fuzz::rollout_fields& f, int t, auto run) { %s };
  return fuzz::check_rollout("%s", step, %d, plain, %du);
}
}  // namespace case_%d
""" % (seed, case_id, plain_kernels, steps, plain_steps, "\n  ".join(k[0] for k in kernels),
       launches, name, steps, seed & 0xffffffff, case_id)


class ParticleGen(Gen):
    """A particle-in-cell step after the MPM simulators: particles at xp
    with velocities vp and 3x3 matrices F scatter to a 1-D grid through
    quadratic B-spline weights at a cell computed from the position (an
    integer index from data), the grid is updated, and the particles gather
    from it and move; every step overwrites the particles' state in place."""

    has_indices = False

    def particle_scope(self, p, free):
        """Scalars of particle p: its state, its F's coefficients, w, s."""
        sc = Scope(index=p, fields=[(f, "st." + f, f in free) for f in ("xp", "vp")])
        return sc

    def stress(self, sc, F):
        """A scalar of the particle's deformation (a 3x3 local)."""
        rng = self.rng
        km, pm = F
        terms = [matrix3_reduction(rng, sc, (km, pm)) for _ in range(rng.randint(1, 2))]
        e = expr(rng, sc, 1)
        k = "0.25 * ctg::tanh(%s + %s)" % (" + ".join(t[0] for t in terms), e[0])
        p = "0.25 * std::tanh(%s + %s)" % (" + ".join(t[1] for t in terms), e[1])
        return k, p

    def deformation(self, sc, F):
        """F's update: F + dt * A F with A from the particle's scalars."""
        rng = self.rng
        km, pm = F
        entries = []
        for _ in range(9):
            e = expr(rng, sc, 1) if rng.random() < 0.4 else (constant(rng),) * 2
            entries.append(e)
        ka = "ctg::mat<3, 3>(%s)" % ", ".join(x[0] for x in entries)
        pa = "fuzz::make_mat3(%s)" % ", ".join(x[1] for x in entries)
        r = rng.random()
        if r < 0.5:
            return "%s + 0.05 * %s * %s" % (km, ka, km), "fuzz::mat3(%s + 0.05 * %s * %s)" % (pm, pa, pm)
        if r < 0.75:
            return ("ctg::polar_r(%s) + 0.05 * %s" % (km, ka),
                    "fuzz::mat3(fuzz::polar_rotation3(%s) + 0.05 * %s)" % (pm, pa))
        return ("0.5 * (%s + ctg::transpose(%s)) + 0.05 * %s" % (km, km, ka),
                "fuzz::mat3(0.5 * (%s + %s.transpose()) + 0.05 * %s)" % (pm, pm, pa))

    def p2g(self):
        rng = self.rng
        p = self.fresh("p")
        sc = self.particle_scope(p, free=("xp", "vp"))
        F = self.fresh("F")
        inner = sc.with_locals([])
        inner.extra = [("%s(ctg::c<%d>, ctg::c<%d>)" % (F, r, c), "%s(%d, %d)" % (F, r, c))
                       for r in range(3) for c in range(3) if rng.random() < 0.3]
        stress = self.stress(inner, (F, F))
        momentum = expr(rng, inner, 2)
        update_F = rng.random() < 0.7
        newF = self.deformation(inner, (F, F)) if update_F else None
        k = ("ctg::range(np, [=](auto {p}) {{ return ctg::let(ctg::cast<int>(xp[{p}] * inv_dx - 0.5), F[{p}], [=](auto base, auto {F}) {{\n"
             "      return ctg::let(xp[{p}] * inv_dx - ctg::cast<double>(base), [=](auto fx) {{\n"
             "        return ctg::let(fuzz::bspline_weights(fx), {stress}, 0.5 * vp[{p}] + 0.25 * {mom}, [=](auto wt, auto stress, auto mom) {{\n"
             "          return ctg::block({setF}ctg::static_range<3>([=](auto k) {{\n"
             "            auto const dpos = (ctg::cast<double>(k) - fx) / inv_dx;\n"
             "            return ctg::block(gv[base + k] += wt[k] * (mom + stress * dpos), gm[base + k] += wt[k]);\n"
             "          }}));\n"
             "        }});\n      }});\n    }}); }})").format(
                 p=p, F=F, stress=stress[0], mom=momentum[0],
                 setF=("%s = %s, F[%s] = %s, " % (F, newF[0], p, F)) if update_F else "")
        pl = ("for (int {p} = 0; {p} < st.np; ++{p}) {{ int base = int(st.xp[{p}] * st.inv_dx - 0.5); fuzz::mat3 {F} = st.F[{p}];\n"
              "  double fx = st.xp[{p}] * st.inv_dx - double(base);\n"
              "  fuzz::vec3 wt = fuzz::bspline(fx); double stress = {stress}; double mom = 0.5 * st.vp[{p}] + 0.25 * {mom};\n"
              "  {setF}\n"
              "  for (int k = 0; k < 3; ++k) {{ double dpos = (double(k) - fx) / st.inv_dx;\n"
              "    st.gv[base + k] += wt[k] * (mom + stress * dpos); st.gm[base + k] += wt[k]; }} }}").format(
                  p=p, F=F, stress=stress[1], mom=momentum[1],
                  setF=("%s = %s; st.F[%s] = %s;" % (F, newF[1], p, F)) if update_F else "")
        return k, pl

    def grid_update(self):
        rng = self.rng
        i = self.fresh("i")
        sc = Scope(index=i, extra=[("s()", "st.s")])
        e = expr(rng, sc, 1)
        walls = rng.random() < 0.6
        k = ("ctg::range(ng, [=](auto {i}) {{ return ctg::let(gv[{i}] / (gm[{i}] + 1e-3) + 0.01 * {e}, [=](auto g) {{\n"
             "      return ctg::block({wall}gout[{i}] = g); }}); }})").format(
                 i=i, e=e[0], wall=("ctg::if_((%s < 4 && g < 0) || (%s > ng - 5 && g > 0), g = 0.0), " % (i, i)) if walls else "")
        pl = ("for (int {i} = 0; {i} < st.ng; ++{i}) {{ double g = st.gv[{i}] / (st.gm[{i}] + 1e-3) + 0.01 * {e};\n"
              "  {wall} st.gout[{i}] = g; }}").format(
                  i=i, e=e[1], wall=("if ((%s < 4 && g < 0) || (%s > st.ng - 5 && g > 0)) g = 0.0;" % (i, i)) if walls else "")
        return k, pl

    def g2p(self):
        rng = self.rng
        p = self.fresh("p")
        sc = self.particle_scope(p, free=())
        sc = sc.with_locals(["nv"])
        blend = expr(rng, sc, 1)
        k = ("ctg::range(np, [=](auto {p}) {{ return ctg::let(ctg::cast<int>(xp[{p}] * inv_dx - 0.5), [=](auto base) {{\n"
             "      return ctg::let(fuzz::bspline_weights(xp[{p}] * inv_dx - ctg::cast<double>(base)), 0.0, [=](auto wt, auto nv) {{\n"
             "        return ctg::block(ctg::static_range<3>([=](auto k) {{ return nv += wt[k] * gout[base + k]; }}),\n"
             "                          nv += 0.1 * ctg::tanh({blend}), vp[{p}] = nv,\n"
             "                          xp[{p}] = ctg::clamp(xp[{p}] + dt * nv, 0.2, 0.8));\n"
             "      }});\n    }}); }})").format(p=p, blend=blend[0])
        pl = ("for (int {p} = 0; {p} < st.np; ++{p}) {{ int base = int(st.xp[{p}] * st.inv_dx - 0.5);\n"
              "  fuzz::vec3 wt = fuzz::bspline(st.xp[{p}] * st.inv_dx - double(base)); double nv = 0.0;\n"
              "  for (int k = 0; k < 3; ++k) nv += wt[k] * st.gout[base + k];\n"
              "  nv += 0.1 * std::tanh({blend}); st.vp[{p}] = nv;\n"
              "  st.xp[{p}] = std::clamp(st.xp[{p}] + st.dt * nv, 0.2, 0.8); }}").format(p=p, blend=blend[1])
        return k, pl


def make_particles(case_id, seed):
    rng = random.Random(seed)
    g = ParticleGen(rng)
    FUNCS.clear()
    clear = ("ctg::range(ng, [=](auto i) { return ctg::block(gv[i] = 0.0, gm[i] = 0.0); })",
             "for (int i = 0; i < st.ng; ++i) { st.gv[i] = 0.0; st.gm[i] = 0.0; }")
    offloads = [clear, g.p2g(), g.grid_update(), g.g2p()]
    # One kernel, or two (scatter and grid update; gather), launched in turn.
    split = rng.choice([4, 3, 2])
    parts = [offloads[:split], offloads[split:]] if split < 4 else [offloads]
    signature = ("auto xp, auto vp, auto F, auto gv, auto gm, auto gout, auto w, auto s, auto idx, "
                 "int np, int ng, int n, int m, double inv_dx, double dt")
    kernels = []
    for n, part in enumerate(parts):
        kernels.append('auto k%d = ctg::kernel<"particles_%d_%d"%s>([](%s) {\n'
                       '    (void)xp, (void)vp, (void)F, (void)gv, (void)gm, (void)gout, (void)w, (void)s, (void)idx, (void)np, (void)ng, (void)n, (void)m, (void)inv_dx, (void)dt;\n'
                       '    return %s;\n  });' % (n, case_id, n, adstack_option(g), signature, block_of(part)[0]))
    launches = " ".join("run(k%d, f.xp, f.vp, f.F, f.gv, f.gm, f.gout, f.w, f.s, f.idx, f.np, f.ng, f.np, f.m, f.inv_dx, f.dt);" % n
                        for n in range(len(parts)))
    steps = rng.randint(2, 4)
    # The particles in fields of their own, or in an array of structs of the
    # program's, viewed member by member.
    fields = rng.choice(["particle_fields", "particle_views"])
    return """
// seed %d (particles)
namespace case_%d {
inline double plain(fuzz::particle_state& st) {
  for (int step = 0; step < %d; ++step) {
    %s
  }
  return fuzz::plain_measure(st);
}
inline fuzz::outcome run() {
  %s
  auto step = [&](auto& f, auto run) { %s };
  return fuzz::check_particles<fuzz::%s>("particles_%d", step, %d, plain, %du);
}
}  // namespace case_%d
""" % (seed, case_id, steps, "\n    ".join(o[1] for o in offloads), "\n  ".join(kernels), launches,
       fields, case_id, steps, seed & 0xffffffff, case_id)


def translation_unit(cases, kind):
    make = MAKERS[kind]
    body = "".join(make(cid, seed) for cid, seed in cases)
    runs = "\n".join("""  try {
    auto r = case_%d::run();
    failures += r.failures;
    if (r.unbounded)
      std::printf("case %d (seed %d): values grow past 1e6, gradient not checked\\n");
    else
      std::printf("case %d (seed %d): %%s (%%d points not smooth)\\n", r.failures ? "wrong" : "ok", r.unsmooth);
  } catch (std::exception const& e) {
    std::printf("case %d (seed %d): rejected at launch: %%s\\n", e.what());
  }""" % (cid, cid, seed, cid, seed, cid, seed) for cid, seed in cases)
    return """// Generated by tests/fuzz/gradients.py; do not edit.
#include <cstdio>
#include <exception>
#include "fuzz_support.hpp"
%s
int main() {
  int failures = 0;
%s
  return failures ? 1 : 0;
}
""" % (body, runs)


def compile_and_run(path, compiler, flags):
    exe = path[:-4]
    cmd = [compiler, "-std=c++20", "-O1", "-g0", "-I", os.path.join(ROOT, "include"), "-I", HERE,
           "-isystem", "/usr/include/eigen3", path, "-o", exe, "-lpthread"] + flags
    c = subprocess.run(cmd, capture_output=True, text=True)
    if c.returncode != 0:
        return "compile", c.stderr
    r = subprocess.run([exe], capture_output=True, text=True, timeout=600)
    return ("run-%d" % r.returncode), r.stdout + r.stderr


MAKERS = {"kernel": make_case, "rollout": make_rollout, "grid": make_grid, "particles": make_particles}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--per-file", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "fuzz"))
    ap.add_argument("--compiler", default="g++")
    ap.add_argument("--flags", default="", help="extra compiler flags, e.g. -fsanitize=address,undefined")
    ap.add_argument("--kind", default="kernel",
                    help="comma-separated: kernel (one kernel: k.grad, k.fwd, value_and_grad), "
                         "rollout (kernels updating state in place, on a tape), grid (2-D stencils), "
                         "particles (particle-in-cell steps: scatter and gather at cells computed from data)")
    ap.add_argument("--print", type=int, help="print the case with this seed and exit")
    args = ap.parse_args()
    if args.print is not None:
        print(MAKERS[args.kind](0, args.print))
        return 0
    os.makedirs(args.out, exist_ok=True)
    kinds = args.kind.split(",")
    for kind in kinds:
        if kind not in MAKERS:
            ap.error("unknown kind %r" % kind)
    files = []
    for kind in kinds:
        seeds = [args.seed * 100003 + k for k in range(args.cases)]
        for f in range(0, len(seeds), args.per_file):
            cases = [(f + k, s) for k, s in enumerate(seeds[f:f + args.per_file])]
            path = os.path.join(args.out, "%s_%d_%d.cpp" % (kind, args.seed, f // args.per_file))
            with open(path, "w") as out:
                out.write(translation_unit(cases, kind))
            files.append((path, cases, kind))
    bad = 0

    def judge(path, cases, kind):
        """Compiles and runs one file; a file that does not compile is split
        into one file per case, so that one rejected kernel hides no other."""
        status, text = compile_and_run(path, args.compiler, args.flags.split())
        lines = []
        failed = 0
        if status == "compile":
            ids = sorted(set(re.findall(r"CTG-[A-Z]+-\d+", text)))
            if len(cases) > 1:
                for cid, seed in cases:
                    one = path[:-4] + "_case%d.cpp" % cid
                    with open(one, "w") as out:
                        out.write(translation_unit([(cid, seed)], kind))
                    l, f = judge(one, [(cid, seed)], kind)
                    lines += l
                    failed += f
                return lines, failed
            lines.append("%s: does not compile%s" % (path, (" (" + ", ".join(ids) + ")") if ids else ""))
            if not ids:
                lines += [l for l in text.splitlines() if "error" in l][:20]
                return lines, 1
            return lines, 0
        lines.append("%s: %s" % (path, status))
        lines += ["  " + l for l in text.splitlines() if not l.endswith(": ok (0 points not smooth)")]
        return lines, (0 if status == "run-0" else 1)

    with futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = [pool.submit(judge, p, c, k) for p, c, k in files]
        for job in futures.as_completed(jobs):
            lines, failed = job.result()
            print("\n".join(lines), flush=True)
            bad += failed
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
