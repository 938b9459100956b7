"""The summary of a cyclictest run from its -h histogram output (1 us bins, floor): samples,
min, avg, p50, p99, max, in us. Shared by scripts/bench-timer.sh and scripts/bench-roscpp.sh
(`sys.path.insert(0, "scripts")`, run from the repository's root)."""

import math


def summary(path, over=None):
    """`over`: a value for the `over` key (the overruns column of rtlab's rows)."""
    hist, overflow, mx, mn, avg = [], 0, None, None, None
    for line in open(path):
        if line.startswith("# Max Latencies:"): mx = int(line.split(":")[1])
        elif line.startswith("# Min Latencies:"): mn = int(line.split(":")[1])
        elif line.startswith("# Avg Latencies:"): avg = int(line.split(":")[1])
        elif line.startswith("# Histogram Overflows:"): overflow = int(line.split(":")[1])
        elif line[:1].isdigit():
            b, c = line.split()[:2]; hist.append((int(b), int(c)))
    n = sum(c for _, c in hist) + overflow

    def q(p):
        rank, seen = max(1, math.ceil(p * n)), 0
        for b, c in hist:
            seen += c
            if seen >= rank: return b
        return mx
    out = dict(n=n, min=mn, avg=avg, p50=q(.5), p99=q(.99), max=mx)
    if over is not None:
        out["over"] = over
    return out
