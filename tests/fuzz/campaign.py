"""The long fuzz campaign: counts instead of stopping at the first failure.

    python -m tests.fuzz.campaign [--logs N] [--seed S] [--bus] [--messages M]

Mutated logs (the same mutations and checks as tests/fuzz/test_core_fuzz.py, driven by a
seeded `random.Random`) go through fresh in-process cores; the JSONL reader gets mutated
lines; with `--bus`, a real nats-server and `ykbus core` get M malformed messages. Prints
the figures: entries tried, crashes (apply raised), runs over the time budget, unanswered
entries, invariant violations (and wire, replay, snapshot, log failures), and one line per
distinct failure class with the log that shows it (in `.fuzz-failures/`).
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time

from tests.fuzz.checks import Failure, Run
from tests.fuzz.mutate import generated_log, mutated_log, trace_logs
from ykbus.log.jsonl import LogError, encode_entry, read_entries


def core_campaign(logs: int, seed: int) -> tuple[collections.Counter, dict[str, Failure], int]:
    from tests.fuzz.test_core_fuzz import mutate_line

    bases = {**trace_logs(), "generated": generated_log()}
    names = sorted(bases)
    counts: collections.Counter = collections.Counter()
    classes: dict[str, Failure] = {}
    per_class: collections.Counter = collections.Counter()
    entries_tried = 0
    for i in range(logs):
        rng = random.Random(seed * 1_000_003 + i)
        log = mutated_log(rng, bases[rng.choice(names)], rng.randint(1, 4), rng.randint(0, 2))
        run = Run()
        try:
            run.apply_all(log)
            run.finish(cuts=sorted({rng.randint(0, len(log)) for _ in range(2)}))
        except Failure as f:
            counts[f.category] += 1
            per_class[f.signature] += 1
            classes.setdefault(f.signature, f)
        entries_tried += run.applied
        # the reader: mutated lines may only raise LogError
        lines = [encode_entry(e) for e in bases[rng.choice(names)]]
        k = rng.randrange(len(lines))
        lines[k] = mutate_line(rng, lines[k])
        try:
            list(read_entries(lines))
        except LogError:
            pass
        except Exception as exc:  # noqa: BLE001
            sig = f"read_entries raised {type(exc).__name__}"
            counts["reader"] += 1
            per_class[sig] += 1
            classes.setdefault(sig, Failure("reader", f"line {lines[k][:200]!r}: {exc!r}", sig))
        if (i + 1) % 500 == 0:
            print(f"  {i + 1} logs, {entries_tried} entries, {sum(counts.values())} failing", file=sys.stderr)
    for sig, n in per_class.items():
        classes[sig].count = n  # type: ignore[attr-defined]
    return counts, classes, entries_tried


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logs", type=int, default=5000)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--bus", action="store_true", help="also fuzz a real nats-server + ykbus core")
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--exclude", default="", help="mutation families to switch off, comma-separated "
                   "(to look past known classes): see tests/fuzz/mutate.py DISABLED")
    args = p.parse_args(argv)
    from tests.fuzz import mutate

    mutate.DISABLED.update(x for x in args.exclude.split(",") if x)
    t0 = time.perf_counter()
    counts, classes, entries = core_campaign(args.logs, args.seed)
    print(f"core: seed {args.seed}, {args.logs} logs, {entries} entries applied in {time.perf_counter() - t0:.0f} s")
    print(f"  crashes (apply raised): {counts['crash']}")
    print(f"  over the time budget:   {counts['slow']}")
    print(f"  unanswered entries:     {counts['unanswered']}")
    print(f"  invariant violations:   {counts['invariant']}")
    print(f"  unpublishable outputs:  {counts['wire']}")
    print(f"  replay / snapshot / log round trip: {counts['replay']} / {counts['snapshot']} / {counts['log']}")
    print(f"  reader raised other than LogError: {counts['reader']}")
    print(f"  distinct failure classes: {len(classes)}")
    for sig, f in sorted(classes.items(), key=lambda kv: -kv[1].count):  # type: ignore[attr-defined]
        print(f"  {f.count:6d}  [{f.category}] {sig}")  # type: ignore[attr-defined]
        for line in str(f).splitlines()[1:]:
            print("          " + line.strip()[:400])
    failed = bool(classes)
    if args.bus:
        from tests.fuzz.busfuzz import run_bus_campaign

        failed |= run_bus_campaign(args.messages, args.seed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
