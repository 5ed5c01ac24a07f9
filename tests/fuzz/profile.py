"""Fuzz profiles: `short` (default, CI: the whole fuzz suite well under 60 s on 2 cores)
and `long` (by hand: `YKBUS_FUZZ=long`, or `make fuzz-long`)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("YKBUS_FUZZ", "short")
if PROFILE not in ("short", "long"):
    raise ValueError(f"YKBUS_FUZZ={PROFILE!r}: expected short or long")
LONG = PROFILE == "long"

_common = dict(deadline=None, derandomize=False, suppress_health_check=list(HealthCheck))
settings.register_profile("ykbus-fuzz-short", max_examples=120, stateful_step_count=20,
                          # CI reports the failing example unshrunk: a shrink replays entries that
                          # may each run to the apply budget; the long profile shrinks
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], **_common)
settings.register_profile("ykbus-fuzz-long", max_examples=5000, stateful_step_count=50, **_common)
FUZZ = settings.get_profile(f"ykbus-fuzz-{PROFILE}")
READER = settings(FUZZ, max_examples=FUZZ.max_examples * 3)

# the bus fuzzer: malformed messages published per run, and how many of them are near
# the server's max payload
BUS_MESSAGES = int(os.environ.get("YKBUS_FUZZ_MESSAGES", "50000" if LONG else "2000"))
BUS_HUGE = 200 if LONG else 8
