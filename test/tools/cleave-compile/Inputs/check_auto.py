"""Checks cleave-compile --auto's prediction against --simulate of the plan
it compiled: the predicted step (the '--auto chose ... (predicted step X
ms' line) within TOLERANCE of the simulated one ('step time Y ms').

    check_auto.py LOG TOLERANCE"""
import re
import sys

text = open(sys.argv[1]).read()
predicted = float(re.search(r"--auto chose .* \(predicted step ([0-9.]+) ms", text).group(1))
simulated = float(re.search(r"step time ([0-9.]+) ms", text).group(1))
error = predicted / simulated - 1
print("predicted %.3f ms, simulated %.3f ms: %+.1f%%" % (predicted, simulated, 100 * error))
sys.exit(0 if abs(error) <= float(sys.argv[2]) else 1)
