"""Figures of `attncli check` on the replayed-mistake suite (issue 10): how far its verdicts can be trusted.

    python benchmarks/grading_figures.py [--details] [--skips] [--per-mistake N]

Builds the suite of tests/replays (careful students carrying 4 decimals, the same students making
each classic mistake at the step where it happens, wrong roundings), grades it with the command
line of this tree, and prints per code: false alarms (a right step failed), missed mistakes (the
file or the step passed), unnamed causes (the step failed without its code, or with other codes
only), steps not carried, files not graded, and the cases skipped because the mistake coincides
with the truth on that exercise. `--details` lists every case that went wrong, `--skips` why
cases were skipped.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.replays import suite as replays

COLUMNS = (
    ("cases", None),
    ("false alarms", (replays.FALSE_ALARM,)),
    ("missed", (replays.MISSED,)),
    ("unnamed", (replays.UNNAMED, replays.MISNAMED)),
    ("misleading", (replays.MISLEADING,)),
    ("not carried", (replays.NOT_CARRIED,)),
    ("not graded", (replays.NOT_GRADED,)),
    ("skipped", ("skipped",)),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true", help="list every case that went wrong")
    parser.add_argument("--skips", action="store_true", help="say why cases were skipped")
    parser.add_argument("--per-mistake", type=int, default=replays.PER_MISTAKE, help="cases of each mistake")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        suite = replays.build(Path(directory), per_mistake=args.per_mistake)
        seconds = time.perf_counter() - started
        table = replays.figures(suite)
        verdicts = {case.id: replays.verdict(case) for case in suite.cases}
    width = max(map(len, table)) + 2
    print(f"{'':{width}}" + "".join(f"{name:>14}" for name, _ in COLUMNS))
    totals = dict.fromkeys((name for name, _ in COLUMNS), 0)
    for row in sorted(table):
        counts = table[row]
        cells = []
        for name, outcomes in COLUMNS:
            n = (
                sum(v for k, v in counts.items() if k != "skipped")
                if outcomes is None
                else sum(counts[o] for o in outcomes)
            )
            totals[name] += n
            cells.append(f"{n:>14}")
        print(f"{row:{width}}" + "".join(cells))
    print(f"{'total':{width}}" + "".join(f"{totals[name]:>14}" for name, _ in COLUMNS))
    careful = sum(1 for c in suite.cases if c.kind == "careful")
    wrong = len(suite.cases) - careful
    print(
        f"\n{len(suite.exercises)} exercises; {careful} right files, {wrong} wrong ones; "
        f"false alarms {totals['false alarms']}, missed {totals['missed']}, unnamed {totals['unnamed']}, "
        f"misleading {totals['misleading']}; "
        f"built and graded in {seconds:.1f} s"
    )
    if args.details:
        print()
        for case in suite.cases:
            outcome, detail = verdicts[case.id]
            if outcome != replays.GOOD:
                print(f"{case.id}: {outcome} {detail}")
    if args.skips:
        print()
        for (code, reason), n in sorted(suite.skipped.items()):
            print(f"{code}: {n} skipped, {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
