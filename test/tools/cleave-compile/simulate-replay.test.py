"""Compares the step time of each replayed simulation (NAME-replay.txt)
with the simulation of the compiled schedule (NAME.txt)."""
import re
import sys

folder = sys.argv[1]
for name in sys.argv[2:]:
    def step(f):
        text = open("%s/%s.txt" % (folder, f)).read()
        return float(re.search(r"step time ([0-9.]+) ms", text).group(1))
    whole, replayed = step(name), step(name + "-replay")
    error = (replayed - whole) / whole
    print("%s: replayed %.3f ms, compiled %.3f ms: %+.2f%% %s" % (
        name, replayed, whole, 100 * error, "within 2%" if abs(error) <= 0.02 else "OFF BY MORE THAN 2%"))
