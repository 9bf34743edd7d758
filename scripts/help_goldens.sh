#!/usr/bin/env bash
# Write what every `--help`, `-h`, `--version` and bare command line of the two binaries prints
# into cli/tests/data/help/, for cli/tests/help.rs: the texts a refactor of the flags must keep
# byte for byte. Run from the repository root after `cargo build --workspace`:
#   bash scripts/help_goldens.sh [TARGET_DIR]
# Each case is one line of cases.txt: the binary, the file, then the arguments. The file holds
# the exit status on its first line, then stdout, then a line `--- stderr`, then stderr.
set -euo pipefail
target=${1:-target/debug}
out=cli/tests/data/help
rm -f "$out"/*.txt
cases=()
for bin in attention-lab attention-lab-classroom; do
    subs=(show solve exercise grade)
    [[ $bin == attention-lab ]] && subs+=(replay lab hub kernel "kernel install" "kernel uninstall" "kernel serve" encode generate)
    cases+=("$bin|" "$bin|--help" "$bin|-h" "$bin|--version" "$bin|help")
    for sub in "${subs[@]}"; do
        cases+=("$bin|$sub --help" "$bin|$sub -h")
    done
    cases+=("$bin|kernel" "$bin|nope")
done
for case in "${cases[@]}"; do
    bin=${case%%|*}
    args=${case#*|}
    [[ $bin == attention-lab-classroom && $args == kernel ]] && continue
    name="$bin${args:+ $args}"
    file=${name// /_}.txt
    set +e
    # shellcheck disable=SC2086  # the arguments split on spaces on purpose
    "$target/$bin" $args > /tmp/help.out 2> /tmp/help.err
    status=$?
    set -e
    { echo "$status"; cat /tmp/help.out; echo "--- stderr"; cat /tmp/help.err; } > "$out/$file"
    echo "$bin|$file|$args" >> "$out/cases.txt.new"
done
mv "$out/cases.txt.new" "$out/cases.txt"
rm -f /tmp/help.out /tmp/help.err
