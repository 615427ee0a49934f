#!/usr/bin/env bash
# Fails when a C/C++ source of Cleave is not formatted as .clang-format says
# (LLVM style); prints the files and clang-format's first complaints.
# Fix with: clang-format-22 -i FILE...
set -euo pipefail
root=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
format=${CLANG_FORMAT:-$(command -v clang-format-22 || true)}
if [ -z "$format" ]; then
  echo "check_format: clang-format-22 not found (tools/setup.sh installs it)" >&2
  exit 1
fi
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp' '*.c' '*.cc' '*.cu' '*.cuh')
else
  mapfile -t files < <(find dialects include lib python_bindings runtime test tools \
    -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.c' \
    -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | sort)
fi
# One clang-format run; its warnings start with the file's name.
complaints=$("$format" --dry-run "${files[@]}" 2>&1 || true)
if [ -n "$complaints" ]; then
  mapfile -t bad < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' <<<"$complaints" \
    | cut -d: -f1 | sort -u)
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  head -20 <<<"$complaints" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
