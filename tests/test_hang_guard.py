"""The suite's hang guard (tests/hangguard.py) stops what it claims to: a blocking call, code that
catches every ``Exception``, and a regular expression backtracking for ever; and it leaves the
alarm as it found it."""

from __future__ import annotations

import re
import signal
import time

import pytest
from hangguard import Hung, hang_guard


def test_it_stops_a_blocking_call_that_swallows_exceptions():
    with pytest.raises(Hung, match="a sleep"), hang_guard("a sleep", seconds=0.2):
        try:
            time.sleep(60)
        except Exception:  # noqa: BLE001 - the point: a retry loop's catch must not swallow the hang
            pass


def test_it_stops_a_regular_expression_backtracking_for_ever():
    with pytest.raises(Hung), hang_guard("a backtracking pattern", seconds=0.2):
        re.match(r"(a+)+$", "a" * 64 + "b")


def test_it_leaves_the_alarm_as_it_found_it():
    before = signal.getsignal(signal.SIGALRM)
    with hang_guard("nothing"):
        pass
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
