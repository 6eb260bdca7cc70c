"""Tests of module_utils/common/lifecycle.py: the driver branches' type and end of life on a given date."""

from __future__ import annotations

import datetime
import inspect

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import lifecycle as L
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

TODAY = datetime.date(2026, 12, 1)


# The table as NVIDIA's data-center driver pages give it (December 2026).
@pytest.mark.parametrize(
    "branch, kind, end, state",
    [
        (535, "long-term support branch", "2026-06", "past"),
        (550, None, "2025-06", "past"),
        (560, None, "past", "past"),
        (565, None, "past", "past"),
        (570, "production branch", "2026-02", "past"),
        (575, None, "past", "past"),
        (580, "long-term support branch", "2028-06", "supported"),
        (590, "new-feature branch", None, "no_end_date"),
        (595, "production branch", "2027-03", "supported"),
        (610, "new-feature branch", "2026-08", "past"),
        (615, "new-feature branch", None, "no_end_date"),
        (620, "long-term support branch", "2029-09", "supported"),
    ],
)
def test_each_branch_on_2026_12_01(branch, kind, end, state):
    judged = L.judge(branch, TODAY)
    assert (judged["known"], judged["type"], judged["end_of_life"], judged["state"]) == (True, kind, end, state)
    assert judged["text"].startswith("R%d: " % branch)


def test_the_texts_say_type_end_and_notes():
    assert L.judge(535, TODAY)["text"] == (
        "R535: long-term support branch, end of life June 2026 (past on 2026-12-01); CUDA 12 at most"
    )
    assert L.judge(580, TODAY)["text"] == (
        "R580: long-term support branch, end of life June 2028 (supported on 2026-12-01); CUDA 13; the last branch "
        "for Maxwell, Pascal and Volta; an older NVIDIA page gives August 2028"
    )
    assert L.judge(590, TODAY)["text"] == "R590: new-feature branch, no end of life published; short-lived"
    assert L.judge(550, TODAY)["text"] == "R550: branch type not recorded, end of life June 2025 (past on 2026-12-01)"
    assert L.judge(560, TODAY)["text"] == "R560: branch type not recorded, end of life passed"


@pytest.mark.parametrize(
    "today, state",
    [("2026-06-01", "supported"), ("2026-06-30", "supported"), ("2026-07-01", "past"), ("2027-01-01", "past")],
)
def test_the_end_of_life_month_is_the_last_supported_one(today, state):
    assert L.judge(535, today)["state"] == state


@pytest.mark.parametrize("branch", [470, 525, 545, 625, 630])
def test_a_branch_not_in_the_table_says_so_and_guesses_nothing(branch):
    judged = L.judge(branch, TODAY)
    assert judged["known"] is False and judged["state"] == "unknown"
    assert judged["type"] is None and judged["end_of_life"] is None
    assert judged["text"] == (
        "R%d: not in the collection's driver lifecycle table (read 2026-12-03): its support and end of life are unknown"
        % branch
    )


def test_without_a_date_the_end_of_life_is_given_not_compared():
    judged = L.judge(595, None)
    assert judged["state"] == "not_compared"
    assert judged["text"] == "R595: production branch, end of life March 2027"
    # what needs no date keeps its state
    assert L.judge(560, None)["state"] == "past" and L.judge(590, None)["state"] == "no_end_date"


@pytest.mark.parametrize(
    "value",
    [TODAY, datetime.datetime(2026, 12, 1, 23, 59), "2026-12-01", "2026-12-01T18:05:00Z", " 2026-12-01 "],
)
def test_today_is_a_date_in_several_spellings(value):
    assert L.parse_today(value) == TODAY


@pytest.mark.parametrize("value", ["", "2026-12", "01.12.2026", "2026-02-30", "2026-13-01", None, 20261201])
def test_a_bad_today_is_refused_with_what_is_expected(value):
    with pytest.raises(GpuFleetError) as exc:
        L.parse_today(value)
    assert exc.value.msg == "today: '%s' is not a date (expected a date as YYYY-MM-DD, e.g. 2026-12-01)" % value


def test_supported_branches_newest_first_and_capped():
    assert L.supported_branches(TODAY) == [
        "R620 (long-term support branch until September 2029)",
        "R595 (production branch until March 2027)",
        "R580 (long-term support branch until June 2028)",
    ]
    assert L.supported_branches(TODAY, newest=580) == ["R580 (long-term support branch until June 2028)"]
    # on 2026-05-01 R570 is past, R610 and R535 are not
    assert L.supported_branches("2026-05-01")[-1] == "R535 (long-term support branch until June 2026)"
    assert "R610 (new-feature branch until August 2026)" in L.supported_branches("2026-05-01")


def test_the_table_is_well_formed_and_cites_its_sources():
    for branch, (kind, end, note) in L.BRANCHES.items():
        assert kind in (None, L.LONG_TERM, L.PRODUCTION, L.NEW_FEATURE), branch
        assert end in (None, L.PAST) or (len(end) == 2 and 1 <= end[1] <= 12), branch
        assert isinstance(note, str)
    assert L.parse_today(L.READ_ON)
    # NVIDIA's pages and NVIDIA's own repositories (its bulletins, its driver container)
    assert all(source.startswith(("https://docs.nvidia.com/", "https://github.com/NVIDIA/")) for source in L.SOURCES)


def test_nothing_reads_the_clock():
    source = inspect.getsource(L)
    assert "now(" not in source and "today()" not in source and "time.time" not in source
