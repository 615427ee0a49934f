"""Checks cleave-compile --auto's prediction against --simulate of the plan
it compiled: the predicted step (the '--auto chose ... (predicted step X
ms, Y MiB per device' line) within TOLERANCE of the simulated one ('step
time Z ms'), and with MEMORY_TOLERANCE the predicted memory within it of
the largest rank's ('memory N bytes').

    check_auto.py LOG TOLERANCE [MEMORY_TOLERANCE]"""
import re
import sys

text = open(sys.argv[1]).read()
chose = re.findall(r"--auto chose .* \(predicted step ([0-9.]+) ms, ([0-9.]+) (MiB|GiB) per device", text)[-1]
predicted = float(chose[0])
simulated = float(re.search(r"step time ([0-9.]+) ms", text).group(1))
error = predicted / simulated - 1
print("predicted %.3f ms, simulated %.3f ms: %+.1f%%" % (predicted, simulated, 100 * error))
ok = abs(error) <= float(sys.argv[2])
if len(sys.argv) > 3:
    predicted_bytes = float(chose[1]) * 1024.0 ** (2 if chose[2] == "MiB" else 3)
    compiled = max(int(m) for m in re.findall(r"memory (\d+) bytes", text))
    memory_error = predicted_bytes / compiled - 1
    print("predicted %.0f bytes per device, compiled %d: %+.1f%%" % (predicted_bytes, compiled, 100 * memory_error))
    ok = ok and abs(memory_error) <= float(sys.argv[3])
sys.exit(0 if ok else 1)
