"""Whether two realdocs-dev dumps (``bench/realdocs.py --dump FILE``) hold the same answers and queries, turn by turn.

    python bench/compare_dumps.py BEFORE.jsonl[.gz] AFTER.jsonl[.gz] [--fields answer,query]

A change of rooms (moving code, no behaviour) must print 0 differences; a change of behaviour prints the turns it
changed, by corpus and kind. Memory ids (new in every run) are compared as ``[memory]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import Counter
from pathlib import Path

_MEMORY_ID = re.compile(r"\[memory:[0-9a-f]+\]")  # a memory's id is new in every run


def same(a: object, b: object) -> bool:
    return _MEMORY_ID.sub("[memory]", str(a)) == _MEMORY_ID.sub("[memory]", str(b))


def turns(path: Path) -> dict[tuple[str, int, str], dict]:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    rows = (json.loads(line) for line in text.splitlines() if line.strip())
    return {(r["conversation"], r["turn"], r.get("run", "first")): r for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--fields", default="answer,query")
    parser.add_argument("--show", type=int, default=5, help="differing turns to print")
    args = parser.parse_args()
    before, after = turns(args.before), turns(args.after)
    fields = args.fields.split(",")
    common = sorted(before.keys() & after.keys())
    differing = [key for key in common if not all(same(before[key].get(f), after[key].get(f)) for f in fields)]
    by = Counter((before[k]["corpus"], before[k]["kind"]) for k in differing)
    print(f"{len(common)} turns in both ({len(before)} before, {len(after)} after)", end="; ")
    print(f"{len(differing)} differ in {fields}")
    for (corpus, kind), n in sorted(by.items()):
        print(f"  {corpus:14} {kind:10} {n}")
    for key in differing[: args.show]:
        print(f"\n{key}: {before[key]['user']!r}")
        for f in fields:
            if not same(before[key].get(f), after[key].get(f)):
                print(f"  {f} before: {str(before[key].get(f))[:200]!r}")
                print(f"  {f} after:  {str(after[key].get(f))[:200]!r}")


if __name__ == "__main__":
    main()
