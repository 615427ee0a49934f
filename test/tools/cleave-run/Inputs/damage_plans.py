"""Damages a partitioned plan many ways, with the checksum fixed up so the
damage reaches the decoder and validator, and runs each copy on its ranks:
every run must end (within a deadline) with exit status 0, 1 or 2, never a
signal. The damage lands anywhere in the payload but the kernel object
(native code: changing it is running other code, which only the checksum
guards against), so also in the new parts of the format: shardings,
collective records, streams and events, the mesh.

  damage_plans.py CLEAVE_RUN PLAN.cleave RANKS COUNT -- ARGS...
"""
import random
import struct
import subprocess
import sys

run, plan, ranks, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
args = sys.argv[sys.argv.index("--") + 1:]
data = bytearray(open(plan, "rb").read())
HEADER = 32


def fnv1a64(b):
    h = 0xcbf29ce484222325
    for x in b:
        h ^= x
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


# The kernel object: a u64 size, then an ELF file.
elf = data.find(b"\x7fELF")
code = (elf - 8, elf + struct.unpack_from("<Q", data, elf - 8)[0]) if elf > 0 else (0, 0)
places = [i for i in range(HEADER, len(data)) if not code[0] <= i < code[1]]

rng = random.Random(12)
outcomes = {}
for i in range(count):
    d = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4])):
        pos = rng.choice(places)
        kind = rng.random()
        if kind < 0.5:
            d[pos] ^= 1 << rng.randrange(8)
        elif kind < 0.8:
            d[pos] = rng.choice([0, 1, 2, 0x7F, 0x80, 0xFF])
        else:  # a little-endian integer set to an edge value
            pos = min(pos, len(d) - 8)
            if code[0] - 8 < pos < code[1]:
                continue
            d[pos:pos + 8] = struct.pack("<q", rng.choice([-1, 0, 1, 2, 3, 1 << 31, 1 << 62]))
    d[24:32] = struct.pack("<Q", fnv1a64(d[HEADER:]))
    path = plan + f".damaged{i}"
    open(path, "wb").write(d)
    try:
        r = subprocess.run([run, path, "--ranks", str(ranks)] + args,
                           capture_output=True, text=True, errors="replace",
                           timeout=60)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAILED: damaged plan {i} ran past the deadline")
    if r.returncode < 0 or r.returncode > 2:
        sys.exit(f"FAILED: damaged plan {i} ended with status {r.returncode}:\n"
                 f"{r.stderr[-2000:]}")
    outcomes[r.returncode] = outcomes.get(r.returncode, 0) + 1
print(f"{count} damaged plans: " + ", ".join(
    f"{n} exited {code}" for code, n in sorted(outcomes.items())))
print("no crash, no hang")
