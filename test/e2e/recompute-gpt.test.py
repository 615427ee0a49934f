"""Checks for recompute-gpt.test.

  memory NONE.txt SELECTIVE.txt FULL.txt BUDGET.txt BUDGET_BYTES
      --print-stats outputs: saved activations and arenas are ordered
  arena-order NONE.txt SELECTIVE.txt FULL.txt
      the arenas are ordered full < selective < none
  smaller NONE.txt SELECTIVE.txt FULL.txt
      no program's arena (one per pipeline rank) is larger with selective
      or full recompute than without, and the first one's (which holds the
      most microbatches' activations) is smaller
  same A.jsonl B.jsonl...   the losses and gradient norms are bitwise equal
"""
import json
import re
import struct
import sys


def stats(path):
    text = open(path).read()
    arena = int(re.search(r"arena (\d+) bytes", text).group(1))
    m = re.search(r"saved activations (\d+) -> (\d+) bytes", text)
    return arena, int(m.group(2))


def memory(none, selective, full, budget, budget_bytes):
    (an, sn), (as_, ss), (af, sf), (ab, sb) = map(stats, (none, selective, full, budget))
    print("arena none %d, selective %d, full %d, budget %d" % (an, as_, af, ab))
    print("saved none %d, selective %d, full %d, budget %d" % (sn, ss, sf, sb))
    ok = sf < ss < sn and sb <= int(budget_bytes)
    if ok:
        print("saved: full < selective < none, budget <= %s" % budget_bytes)
    if as_ < an and af < an and ab < an:
        print("arena: selective < none, full < none, budget < none")


def arena_order(none, selective, full):
    (an, _), (as_, _), (af, _) = map(stats, (none, selective, full))
    print("arena none %d, selective %d, full %d" % (an, as_, af))
    if af < as_ < an:
        print("arena: full < selective < none")


def smaller(none, selective, full):
    arenas = [[int(a) for a in re.findall(r"arena (\d+) bytes", open(p).read())]
              for p in (none, selective, full)]
    print("arenas none %s, selective %s, full %s" % tuple(arenas))
    n = len(arenas[0])
    if all(len(a) == n for a in arenas) and all(
            s <= a and f <= a for a, s, f in zip(*arenas)) and all(
            a[0] < arenas[0][0] for a in arenas[1:]):
        print("%d program%s: selective and full within none, the first smaller"
              % (n, "s" if n > 1 else ""))


def bits(x):
    return struct.pack("<f", x)  # f32, as the runtime computes them


def same(paths):
    runs = [[(r["step"], bits(r["loss"]), bits(r["grad_norm"])) for r in map(json.loads, open(p))]
            for p in paths]
    if all(r == runs[0] for r in runs) and runs[0]:
        print("%d steps, losses and gradient norms bitwise equal in %d runs" % (len(runs[0]), len(runs)))
    else:
        for p, r in zip(paths, runs):
            print(p, r)


if __name__ == "__main__":
    if sys.argv[1] == "memory":
        memory(*sys.argv[2:7])
    elif sys.argv[1] == "smaller":
        smaller(*sys.argv[2:5])
    elif sys.argv[1] == "arena-order":
        arena_order(*sys.argv[2:5])
    else:
        same(sys.argv[2:])
