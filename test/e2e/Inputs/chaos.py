"""The chaos test of restarts: random faults (crash, hang, slow; random
ranks and steps, seeded) over one training run, which must end with the
uninterrupted run's parameters and lose at most one checkpoint interval of
steps per fault.

  chaos.py threads|mpirun SEED FAULTS RANKS STEPS SAVE_EVERY -- COMMAND...

threads: COMMAND (cleave-run ... --ranks N) runs once with every fault and
--max-restarts, and the restart lines it prints are checked. mpirun: COMMAND
(mpirun -np N cleave-run ...) runs in the job-script loop of
docs/guide/cleave-run.md#restarts (--resume=auto, again on a retryable exit status);
each attempt gets the faults that have not fired yet. Prints the seed, the
faults, one line per restart and a summary; exits 1 on a violated bound.
"""
import random
import re
import subprocess
import sys
import time

mode, seed, count, ranks, steps, interval = sys.argv[1], *map(int, sys.argv[2:7])
cmd = sys.argv[sys.argv.index("--") + 1:]
rng = random.Random(seed)
# Distinct steps, none in the last interval's final step (so that each
# fault is followed by steps that show its restart).
fault_steps = sorted(rng.sample(range(2, steps), count))
faults = [(rng.randrange(ranks), s, rng.choice(["crash", "hang", "slow"]))
          for s in fault_steps]
print(f"chaos: seed {seed}, {mode}, {count} faults over {steps} steps "
      f"(checkpoint every {interval})")
for r, s, k in faults:
    print(f"chaos: fault rank={r},step={s},kind={k}")
failing = sum(k != "slow" for _, _, k in faults)
start = time.monotonic()
lost = []
# Restarts no injected fault caused: a peer that was slow past the
# communication timeout on a loaded machine. They are recoveries too, and
# are reported, not counted against the faults.
spurious = 0


def fault_args(pending):
    args = []
    for r, s, k in pending:
        args += ["--inject-fault", f"rank={r},step={s},kind={k}"]
    return args


if mode == "threads":
    p = subprocess.run(cmd + ["--max-restarts", str(2 * count)] + fault_args(faults),
                       capture_output=True, text=True)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        print(f"chaos: FAILED: exit status {p.returncode}")
        sys.exit(1)
    for m in re.finditer(r"restart (\d+) of \d+: rank (\d+) failed at step "
                         r"(\d+) \(([^)]*)\); (.*?), (\d+) steps? lost",
                         p.stderr):
        print(f"chaos: restart {m[1]}: rank {m[2]} at step {m[3]} ({m[4]}); "
              f"{m[5]}, {m[6]} lost")
        if m[4].startswith("injected"):
            lost.append(int(m[6]))
        else:
            spurious += 1
else:
    pending = list(faults)
    attempt = 0
    while True:
        p = subprocess.run(cmd + ["--resume=auto"] + fault_args(pending),
                           capture_output=True, text=True)
        out = p.stdout + p.stderr
        sys.stderr.write(p.stderr)
        resumed = re.search(r"resuming from '[^']*' at step (\d+)", out)
        if attempt > 0 and failed_at == 0:
            print(f"chaos: restart {attempt}: after exit status {last_code} "
                  f"with no fault injected (a timeout under load)")
            spurious += 1
        elif attempt > 0:
            frm = int(resumed[1]) if resumed else 0
            print(f"chaos: restart {attempt}: after exit status {last_code} "
                  f"at step {failed_at}; resumed from step {frm}, "
                  f"{failed_at - 1 - frm} lost")
            lost.append(failed_at - 1 - frm)
        fired = {(int(m[1]), int(m[2]), m[3]) for m in re.finditer(
            r"rank (\d+): injected fault at step (\d+): (\w+)", out)}
        pending = [f for f in pending if f not in fired]
        if p.returncode == 0:
            break
        if p.returncode in (1, 2) or attempt == 2 * count:
            print(f"chaos: FAILED: exit status {p.returncode}")
            sys.exit(1)
        failed_at = max((s for _, s, k in fired if k != "slow"), default=0)
        last_code = p.returncode
        attempt += 1

restarts = len(lost)
worst = max(lost, default=0)
print(f"chaos: {count} faults, {restarts} restarts for them (expected "
      f"{failing}), {spurious} other, at most {worst} steps lost per fault "
      f"(interval {interval}), {time.monotonic() - start:.1f} s")
if restarts != failing or worst > interval:
    print("chaos: FAILED: a bound was violated")
    sys.exit(1)
print("chaos: OK")
