#!/usr/bin/env python3
"""Draws bench/results/checkpoint.json (bench_checkpoint) as an SVG: time of
forward + backward against peak memory, one point per number of snapshots S,
with the full tape and the state indexed by the step as reference points.

Time is the paired ratio to the full tape (each benchmark iteration runs both,
so the ratio survives the machine's drift); memory is the fields (values and
gradients) plus the tape's copies at their peak, on a log axis.

  bench/checkpoint_svg.py [bench/results/checkpoint.json] [docs/images/checkpoint.svg]
"""
import json
import math
import sys


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "bench/results/checkpoint.json"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/images/checkpoint.svg"
    runs = json.load(open(src))["benchmarks"]
    ck = sorted((r for r in runs if r["name"].startswith("BM_checkpoint/")), key=lambda r: r["snapshots"])
    indexed = next(r for r in runs if r["name"].startswith("BM_indexed"))
    steps = int(ck[0]["steps"])
    full_mem = ck[0]["full_tape_memory_bytes"] / 1e6

    pts = [(r["memory_bytes"] / 1e6, r["ratio_time_over_full_tape"], int(r["snapshots"])) for r in ck]
    refs = [(full_mem, 1.0, "full tape"), (indexed["memory_bytes"] / 1e6, indexed["ratio_time_over_full_tape"],
                                           "indexed by the step")]
    xs = [p[0] for p in pts] + [r[0] for r in refs]
    ys = [p[1] for p in pts] + [r[1] for r in refs]
    x0, x1 = math.log10(min(xs) / 1.5), math.log10(max(xs) * 1.5)
    y1 = max(ys) * 1.1
    w, h, left, right, top, bottom = 760, 420, 70, 730, 50, 360

    def px(mb):
        return left + (right - left) * (math.log10(mb) - x0) / (x1 - x0)

    def py(r):
        return bottom - (bottom - top) * r / y1

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="24" text-anchor="middle" font-size="15">checkpointed rollout: heat equation, 16K cells, '
         f'{steps} steps, one thread</text>',
         f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
         f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>']
    for e in range(math.floor(x0), math.ceil(x1) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if x0 <= math.log10(v) <= x1:
                x = px(v)
                s.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{top}" stroke="#eeeeee"/>')
                s.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{v:g}</text>')
    r = 0.0
    while r <= y1:
        y = py(r)
        s.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eeeeee"/>')
        s.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{r:g}</text>')
        r += 1.0 if y1 > 4 else 0.5
    s.append(f'<text x="{(left + right) / 2}" y="{bottom + 36}" text-anchor="middle">peak memory: fields and the '
             f"tape's copies (MB, log scale)</text>")
    s.append(f'<text x="18" y="{(top + bottom) / 2}" text-anchor="middle" transform="rotate(-90 18 '
             f'{(top + bottom) / 2})">forward + backward time / full tape (paired)</text>')
    s.append(f'<line x1="{left}" y1="{py(2.2):.1f}" x2="{right}" y2="{py(2.2):.1f}" stroke="#c0392b" '
             f'stroke-dasharray="4 4"/>')
    s.append(f'<text x="{right - 4}" y="{py(2.2) - 5:.1f}" text-anchor="end" fill="#c0392b">target at S = '
             f'ceil(sqrt(T)): 2.2</text>')
    line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in pts)
    s.append(f'<polyline points="{line}" fill="none" stroke="#2c7fb8" stroke-width="1.5"/>')
    for x, y, n in pts:
        s.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="#2c7fb8"/>')
        s.append(f'<text x="{px(x) + 6:.1f}" y="{py(y) - 6:.1f}">S={n}</text>')
    for (x, y, name), dy in zip(refs, (22, -12)):  # full tape below its point, indexed above
        s.append(f'<rect x="{px(x) - 5:.1f}" y="{py(y) - 5:.1f}" width="10" height="10" fill="#555555"/>')
        s.append(f'<text x="{px(x):.1f}" y="{py(y) + dy:.1f}" text-anchor="middle">{name}</text>')
    s.append("</svg>")
    open(out, "w").write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
