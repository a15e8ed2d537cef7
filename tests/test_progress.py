"""Progress lines' time elapsed and time left (``common.progress``), on a clock the test sets."""

from __future__ import annotations

from common.progress import Eta, clock_text


def test_clock_text_is_minutes_and_seconds_or_hours_from_an_hour():
    assert [clock_text(s) for s in (0, 59.6, 61, 3599, 3600, 7325)] == ["0:00", "1:00", "1:01", "59:59", "1:00:00",
                                                                        "2:02:05"]


def test_time_left_is_the_mean_step_times_the_steps_left():
    now = [100.0]
    eta = Eta(5, clock=lambda: now[0])
    assert eta.text(0) == "elapsed 0:00"  # no step done: no estimate
    now[0] = 160.0
    assert eta.text(2) == "elapsed 1:00, about 1:30 left"  # 30 s a step, 3 left
    now[0] = 250.0
    assert eta.text(5) == "elapsed 2:30"  # all done
