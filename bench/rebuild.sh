#!/usr/bin/env bash
# The edit-and-rebuild loop a developer lives in: one line added to a server file, then to a
# kernel, a warm debug rebuild after each, the line taken out again. Prints each rebuild's
# seconds and the median per edit.
#   bench/rebuild.sh [RUNS] [--tests]   RUNS rebuilds per edit (default 3); --tests rebuilds
#                                       the test executables too (cargo test --no-run)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
build=(cargo build --locked --quiet)
[ "${2:-}" != --tests ] || build=(cargo test --locked --quiet --workspace --no-run)

# The files are found by name so that the script measures a tree before and after a move.
server=$(git ls-files '*server/reply.rs' | head -1)
kernel=kernels/otsu.cl
[ -f "$server" ] && [ -f "$kernel" ] || { echo "rebuild.sh: no $server or $kernel" >&2; exit 1; }

"${build[@]}" 2>/dev/null || "${build[@]}"
trap 'git checkout -- "$server" "$kernel"' EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for file in "$server" "$kernel"; do
    times=()
    for i in $(seq "$runs"); do
        echo "// rebuild probe $i $$" >> "$file"
        start=$(date +%s.%N)
        "${build[@]}"
        end=$(date +%s.%N)
        git checkout -- "$file"
        times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')")
        # Put back, the tree is built again before the next probe, off the clock.
        "${build[@]}"
    done
    printf '%-40s %s  median %s s\n' "$file" "${times[*]}" "$(printf '%s\n' "${times[@]}" | median)"
done
