"""Runs a command with a deadline and reports how it ended, so a test can
tell "exited non-zero in time" from "hung":

  expect_exit.py SECONDS OUT_FILE -- COMMAND...

Writes the command's stdout and stderr to OUT_FILE and prints
"exit code N" (or "killed by signal S"), or "DEADLINE: still running after
SECONDS s" (and kills it, exit status 1).
"""
import subprocess
import sys

seconds, out = float(sys.argv[1]), sys.argv[2]
cmd = sys.argv[sys.argv.index("--") + 1:]
with open(out, "w") as f:
    p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    try:
        code = p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        print(f"DEADLINE: still running after {seconds:g} s")
        sys.exit(1)
print(f"killed by signal {-code}" if code < 0 else f"exit code {code}")
