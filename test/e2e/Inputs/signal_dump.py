"""Signals a running command once it has reached a point, and waits for the
flight-recorder dumps the signal makes:

  signal_dump.py SIGNAL COUNT DIR TRIGGER -- COMMAND...

Runs COMMAND (stdout and stderr merged) until a line containing TRIGGER
appears, waits a second (so that the other ranks are inside the
collective they will wait in), sends SIGNAL (USR1, ABRT, SEGV, ...) to it,
then waits until DIR holds COUNT rank-<r>.json files, and kills the command
if it is still running. Prints "dumps: N" and how the command ended; exits
1 if the trigger or the dumps do not come within 60 s.
"""
import glob
import os
import signal
import subprocess
import sys
import time

sig = getattr(signal, "SIG" + sys.argv[1])
count, directory, trigger = int(sys.argv[2]), sys.argv[3], sys.argv[4]
cmd = sys.argv[sys.argv.index("--") + 1:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
deadline = time.time() + 60
for line in p.stdout:
    if trigger in line:
        break
else:
    sys.exit("signal_dump.py: the command ended before '" + trigger + "'")
time.sleep(1.0)
p.send_signal(sig)
while len(glob.glob(os.path.join(directory, "rank-*.json"))) < count:
    if time.time() > deadline:
        p.kill()
        sys.exit("signal_dump.py: no dumps within 60 s")
    time.sleep(0.1)
time.sleep(0.5)  # the last file renamed into place
try:
    code = p.wait(timeout=5)
except subprocess.TimeoutExpired:
    p.kill()
    code = p.wait()
    print(f"dumps: {count}; still running, killed")
else:
    print(f"dumps: {count}; " + (f"killed by signal {-code}" if code < 0 else f"exit code {code}"))
