#!/usr/bin/env bash
# Checks the formatting of the C++ and CUDA lines changed since BASE (default: the commit that
# added .clang-format) with git clang-format, so that the house style holds for new code without
# reformatting every file at once. Exit 1 naming the changes it wants; --fix applies them.
#
#   scripts/check_format.sh [--fix] [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
if [ "${1:-}" = --fix ]; then fix=1; shift; fi
base=${1:-$(git log --diff-filter=A --format=%H -- .clang-format | tail -1)}
if [ -z "$base" ] || ! git rev-parse -q --verify "$base^{commit}" > /dev/null; then
  # A shallow clone lacks the history: say so loudly rather than pass a check that did not run.
  echo "check_format: SKIPPED: the base commit '${base}' is not in this clone's history (shallow clone?)" >&2
  exit 0
fi
command -v git-clang-format > /dev/null || { echo "check_format: git-clang-format not found (Debian: clang-format)" >&2; exit 2; }
exts=cc,h,cu,cuh
if [ $fix = 1 ]; then
  git clang-format --force --extensions "$exts" "$base" -- src include tests python examples bench || true
  exit 0
fi
out=$(git clang-format --diff --extensions "$exts" "$base" -- src include tests python examples bench 2>&1 || true)
case "$out" in
  "" | *"no modified files to format"* | *"did not modify any files"*)
    echo "check_format: the lines changed since $(git rev-parse --short "$base") are formatted"
    exit 0 ;;
esac
echo "$out"
echo "check_format: lines changed since $(git rev-parse --short "$base") are not in the house style;" \
  "scripts/check_format.sh --fix formats them" >&2
exit 1
