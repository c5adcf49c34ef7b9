"""Whether two outputs of the same benchmark command hold the same figures, leaving out what differs from run to run
(timings, the date, the revision, the machine, the command line): ``bench/memory.py --report`` files, or
``bench/followups.py``'s per-task records (``bench/.cache/records-<domain>-<precision>.json``: each task's query,
route and ranked passages with their scores).

    python bench/compare_reports.py BEFORE.json AFTER.json [--show N]

A change of rooms (moving code, no behaviour) must print 0 differences; otherwise each differing value is printed
with its path. Turn-by-turn realdocs-dev dumps have their own comparison (``bench/compare_dumps.py``).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path

# run-to-run values: any key naming milliseconds or seconds, and the run's provenance
VARIES = re.compile(r"(^|_)ms(_|$)|seconds|^(date|revision|machine|command)$")


def differences(before: object, after: object, path: str = "") -> Iterator[str]:
    """The paths at which ``after`` differs from ``before`` (keys that vary from run to run left out)."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(before.keys() | after.keys()):
            if VARIES.search(key):
                continue
            if key not in before or key not in after:
                yield f"{path}/{key}: only in {'after' if key in after else 'before'}"
            else:
                yield from differences(before[key], after[key], f"{path}/{key}")
    elif isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            yield f"{path}: {len(before)} items before, {len(after)} after"
        for index, (old, new) in enumerate(zip(before, after, strict=False)):
            yield from differences(old, new, f"{path}[{index}]")
    elif before != after:
        yield f"{path}: {before!r} -> {after!r}"


def count_values(value: object) -> int:
    if isinstance(value, dict):
        return sum(count_values(v) for k, v in value.items() if not VARIES.search(k))
    if isinstance(value, list):
        return sum(count_values(v) for v in value)
    return 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--show", type=int, default=10, help="differences to print")
    args = parser.parse_args()
    before, after = json.loads(args.before.read_text()), json.loads(args.after.read_text())
    found = list(differences(before, after))
    for line in found[: args.show]:
        print(line)
    print(f"{count_values(before)} values compared, {len(found)} differ")


if __name__ == "__main__":
    main()
