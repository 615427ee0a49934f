"""Starts N processes of a command as torchrun starts its workers, without
torchrun: each gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, so cleave-run's ranks meet
over Gloo. Like torchrun's agent, it stops the others (SIGTERM, then SIGKILL
after 5 s) as soon as one fails, and all of them after SECONDS.

  launch_ranks.py N [--timeout SECONDS] -- COMMAND...

The processes share this one's stdout and stderr. Exits with the first
failure's exit code (128 + signal for one killed by a signal), 124 after
the deadline, else 0.
"""
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    n = int(sys.argv[1])
    args = sys.argv[2:sys.argv.index("--")]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    seconds = float(args[args.index("--timeout") + 1]) if "--timeout" in args else 600
    port = str(free_port())
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port)
        procs.append(subprocess.Popen(cmd, env=env))
    deadline = time.monotonic() + seconds
    first = None
    while any(p.poll() is None for p in procs):
        if first is None:
            failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
            if failed:
                first = failed[0] if failed[0] > 0 else 128 - failed[0]
        if first is not None or time.monotonic() > deadline:
            if first is None:
                print(f"launch_ranks: still running after {seconds:g} s",
                      file=sys.stderr)
                first = 124
            stop(procs)
            break
        time.sleep(0.05)
    if first is None:
        failed = [p.returncode for p in procs if p.returncode != 0]
        first = 0 if not failed else (failed[0] if failed[0] > 0 else 128 - failed[0])
    sys.exit(first)


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    end = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

if __name__ == "__main__":
    main()
