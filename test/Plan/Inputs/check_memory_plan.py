"""Checks a cleave-compile --print-memory-plan report:
  - no two buffers whose live ranges (in nodes) intersect share a byte;
  - every asynchronous collective's operand and result buffers are live from
    the collective's node through its cleave.done's node.

  check_memory_plan.py REPORT
"""
import re
import sys

nodes, buffers = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"node (\d+): (.*?) in \[(.*?)\] out \[(.*?)\]$", line.strip())
    if m:
        ids = lambda s: [int(x) for x in s.split(", ") if x not in ("", "-")]
        nodes[int(m[1])] = (m[2], ids(m[3]), ids(m[4]))
        continue
    m = re.match(r"buffer (\d+): offset (\d+) bytes (\d+) live \[(-?\d+), (-?\d+)\]",
                 line.strip())
    if m:
        buffers[int(m[1])] = tuple(int(m[i]) for i in range(2, 6))

problems = []
items = sorted(buffers.items())
for i, (a, (oa, sa, fa, la)) in enumerate(items):
    for b, (ob, sb, fb, lb) in items[i + 1:]:
        live = fa <= lb and fb <= la
        overlap = oa < ob + max(sb, 1) and ob < oa + max(sa, 1)
        if live and overlap:
            problems.append(f"buffers {a} and {b} are live together and overlap")
print(f"{len(buffers)} buffers, {len(nodes)} nodes")
if not problems:
    print("no two live buffers overlap")

starts = {}
for n, (what, ins, outs) in nodes.items():
    m = re.search(r"async event (\d+)", what)
    if m:
        starts[int(m[1])] = (n, ins + outs)
checked = 0
for n, (what, ins, outs) in nodes.items():
    m = re.match(r"done event (\d+)", what)
    if not m:
        continue
    start, bufs = starts[int(m[1])]
    for b in bufs:
        first, last = buffers[b][2], buffers[b][3]
        if first > start or last < n:
            problems.append(f"buffer {b} of the collective at node {start} is "
                            f"live [{first}, {last}], not through its done at node {n}")
    checked += 1
print(f"{checked} asynchronous collectives; operands and results live until "
      f"their done" if not problems else "")
if problems:
    sys.exit("FAILED: " + "; ".join(problems))
