"""Checks a `cleave-compile --report` table for consistency: the bytes of
each class live at the peak add up to the peak, the arena holds the peak,
and every collective row adds up to the `all` row."""
import re
import sys

text = open(sys.argv[1]).read()
classes = ("parameters", "master parameters", "optimizer states", "state buffers", "gradients",
           "activations", "temporaries", "inputs", "constants")
row = re.compile(r"^  (%s)\s+(-|\d+)(?: \([\d.]+ MiB\))?\s+(\d+)" %
                 "|".join(classes), re.M)
at_peak = sum(int(m.group(3)) for m in row.finditer(text))
peak = int(re.search(r"^  peak: (\d+)", text, re.M).group(1))
arena = int(re.search(r"; arena (\d+)", text).group(1))
if at_peak != peak:
    sys.exit(f"classes at the peak add up to {at_peak}, the peak is {peak}")
if arena < peak:
    sys.exit(f"the arena ({arena}) is smaller than the peak ({peak})")
coll = re.compile(r"^  (\S+)\s+(\S+)\s+(\d+)\s+(\d+)(?: \([\d.]+ MiB\))?"
                  r"\s+(\d+)\s+(\d+)", re.M)
rows = [m for m in coll.finditer(text) if m.group(1) != "axes"]
if rows:
    total = [m for m in rows if m.group(1) == "all"]
    parts = [m for m in rows if m.group(1) != "all"]
    for i, what in ((3, "count"), (4, "bytes"), (5, "async"), (6, "overlapped")):
        if sum(int(m.group(i)) for m in parts) != int(total[0].group(i)):
            sys.exit(f"collective {what} do not add up to the 'all' row")
print(f"consistent: {len(classes)} classes add up to the peak, the arena "
      f"holds it, {len(rows)} collective rows")
