"""Compares the step time of each replayed simulation (NAME-replay.txt)
with the simulation of the compiled schedule (NAME.txt)."""
import re
import sys

args = sys.argv[1:]
tolerance = 0.02
if "--tolerance" in args:
    i = args.index("--tolerance")
    tolerance = float(args[i + 1])
    del args[i:i + 2]
folder = args[0]
for name in args[1:]:
    def step(f):
        text = open("%s/%s.txt" % (folder, f)).read()
        return float(re.search(r"step time ([0-9.]+) ms", text).group(1))
    whole, replayed = step(name), step(name + "-replay")
    error = (replayed - whole) / whole
    bound = "%g%%" % (100 * tolerance)
    print("%s: replayed %.3f ms, compiled %.3f ms: %+.2f%% %s" % (
        name, replayed, whole, 100 * error,
        ("within " if abs(error) <= tolerance else "OFF BY MORE THAN ") + bound))
