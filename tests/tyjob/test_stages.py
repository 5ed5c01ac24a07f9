"""The TYJob stage and schedule-state tables: every listed move, every unlisted one refused,
and docs/tyjob.md drawn from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ykbus.core.lifecycle import IllegalTransition
from ykbus.tyjob.stages import SCHEDULE, STAGE, ScheduleEvent, ScheduleState, Stage, StageEvent, render_docs

S, E, U, V = Stage, StageEvent, ScheduleState, ScheduleEvent
STAGE_MOVES = [
    (S.PENDING, E.LEADER_CREATED, S.STARTING),
    (S.PENDING, E.TERMINATING, S.SUCCEEDED),
    (S.PENDING, E.SCHEDULE_FAILED, S.FAILED),
    (S.STARTING, E.WORKERS_READY, S.RUNNING),
    (S.STARTING, E.PODS_LOST, S.RESCHEDULING),
    (S.STARTING, E.LEADER_SUCCEEDED, S.SUCCEEDED),
    (S.STARTING, E.TERMINATING, S.SUCCEEDED),
    (S.STARTING, E.SCHEDULE_FAILED, S.FAILED),
    (S.STARTING, E.RESTARTS_EXCEEDED, S.FAILED),
    (S.RUNNING, E.PODS_LOST, S.RESCHEDULING),
    (S.RUNNING, E.LEADER_SUCCEEDED, S.SUCCEEDED),
    (S.RUNNING, E.TERMINATING, S.SUCCEEDED),
    (S.RUNNING, E.SCHEDULE_FAILED, S.FAILED),
    (S.RUNNING, E.RESTARTS_EXCEEDED, S.FAILED),
    (S.RESCHEDULING, E.PODS_BACK, S.STARTING),
    (S.RESCHEDULING, E.LEADER_SUCCEEDED, S.SUCCEEDED),
    (S.RESCHEDULING, E.TERMINATING, S.SUCCEEDED),
    (S.RESCHEDULING, E.SCHEDULE_FAILED, S.FAILED),
    (S.RESCHEDULING, E.RESTARTS_EXCEEDED, S.FAILED),
]
SCHEDULE_MOVES = [
    (U.UNSCHEDULED, V.PLACED_SOME, U.SCHEDULED_PARTLY),
    (U.UNSCHEDULED, V.PLACED_ALL, U.SCHEDULED_SUCCEED),
    (U.UNSCHEDULED, V.NEVER_FITS, U.SCHEDULED_FAILED),
    (U.SCHEDULED_PARTLY, V.PLACED_ALL, U.SCHEDULED_SUCCEED),
    (U.SCHEDULED_PARTLY, V.LOST, U.SCHEDULED_PARTLY),
    (U.SCHEDULED_PARTLY, V.NEVER_FITS, U.SCHEDULED_FAILED),
    (U.SCHEDULED_SUCCEED, V.LOST, U.SCHEDULED_PARTLY),
    (U.SCHEDULED_SUCCEED, V.NEVER_FITS, U.SCHEDULED_FAILED),
]


@pytest.mark.parametrize(("src", "event", "dst"), STAGE_MOVES)
def test_stage_moves(src, event, dst):
    assert STAGE.advance(src, event) is dst


@pytest.mark.parametrize(("src", "event", "dst"), SCHEDULE_MOVES)
def test_schedule_moves(src, event, dst):
    assert SCHEDULE.advance(src, event) is dst


@pytest.mark.parametrize(("table", "states", "events", "moves"), [
    (STAGE, Stage, StageEvent, STAGE_MOVES), (SCHEDULE, ScheduleState, ScheduleEvent, SCHEDULE_MOVES)])
def test_every_other_move_is_refused(table, states, events, moves):
    listed = {(s, e) for s, e, _ in moves}
    assert set(table.table) == listed
    for s in states:
        for e in events:
            if (s, e) not in listed:
                with pytest.raises(IllegalTransition):
                    table.advance(s, e)


def test_finished_jobs_stay_finished():
    for e in StageEvent:
        assert not STAGE.allows(Stage.SUCCEEDED, e) and not STAGE.allows(Stage.FAILED, e)


def test_docs_are_drawn_from_the_tables():
    text = (Path(__file__).parents[2] / "docs" / "tyjob.md").read_text()
    assert render_docs() in text, "run: python -m ykbus.tyjob.stages and paste into docs/tyjob.md"
