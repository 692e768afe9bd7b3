"""Progress lines for logs: a long job off a terminal prints its rate and time left."""

from __future__ import annotations

from babelink.progress import ProgressLines


def test_lines_every_interval_with_rate_and_time_left(capsys):
    now = [0.0]
    progress = ProgressLines(every=10.0, clock=lambda: now[0])
    now[0] = 50.0  # reading the KB took 50 s before the first count: not part of the rate
    for second in range(31):
        now[0] = 50.0 + second
        progress("encoding names", 100 + second * 100, 6_100)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["babelink: encoding names: 1,100/6,100 (100/s, about 50 s left)",
                     "babelink: encoding names: 2,100/6,100 (100/s, about 40 s left)",
                     "babelink: encoding names: 3,100/6,100 (100/s, about 30 s left)"]


def test_the_last_count_and_a_new_stage(capsys):
    now = [0.0]
    progress = ProgressLines(every=10.0, clock=lambda: now[0])
    progress("reading", 0, 50)
    now[0] = 2.0
    progress("reading", 50, 50)  # finished: printed at once
    now[0] = 3.0
    progress("linking", 0, None)  # the count went back: a new stage starts here
    now[0] = 13.0
    progress("linking", 20, None)
    assert capsys.readouterr().err.splitlines() == ["babelink: reading: 50/50 (25/s)",
                                                    "babelink: linking: 20 (2/s)"]


def test_a_slow_rate_keeps_its_significant_figures(capsys):
    now = [0.0]
    progress = ProgressLines(every=10.0, clock=lambda: now[0])
    progress("training steps, loss 4.1374", 1, 310)
    now[0] = 40.0
    progress("training steps, loss 3.9", 9, 310)
    line = "babelink: training steps, loss 3.9: 9/310 (0.2/s, about 1,505 s left)"
    assert capsys.readouterr().err.splitlines() == [line]


def test_a_stage_done_at_its_first_count_has_no_rate(capsys):
    progress = ProgressLines(every=10.0, clock=lambda: 5.0)
    progress("encoding names", 2_957, 2_957)  # a small KB: the first count is the last
    assert capsys.readouterr().err.splitlines() == ["babelink: encoding names: 2,957/2,957"]
