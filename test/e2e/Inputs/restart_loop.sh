#!/bin/bash
# The job-script restart recipe of docs/guide/cleave-run.md#restarts, as the tests
# run it: runs COMMAND with --resume=auto until it succeeds, fails with a
# user error (exit status 1 or 2: running again will not help) or has been
# restarted MAX times. FAULTS holds one line of extra options per attempt
# (the tests' --inject-fault; attempt k takes line k, later ones none).
#
#   restart_loop.sh MAX FAULTS -- COMMAND...
max=$1
faults=$2
shift 3
attempt=0
while :; do
  extra=$(sed -n "$((attempt + 1))p" "$faults" 2>/dev/null)
  # shellcheck disable=SC2086
  "$@" --resume=auto $extra
  code=$?
  case $code in
  0) exit 0 ;;
  1 | 2) echo "job script: exit status $code: not retryable" >&2; exit $code ;;
  esac
  attempt=$((attempt + 1))
  if [ "$attempt" -gt "$max" ]; then
    echo "job script: giving up after $max restarts" >&2
    exit $code
  fi
  echo "job script: restart $attempt after exit status $code" >&2
done
