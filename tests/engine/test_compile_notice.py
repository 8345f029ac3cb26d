"""The long-compile notice (issue #41): one line when a run's first chunk takes longer than its threshold, none
when the first results come in time or progress is off."""

from __future__ import annotations

import io
import time

from mcacct.engine.compile_notice import CompileNotice


def test_notice_fires_once_when_the_first_chunk_is_late():
    out = io.StringIO()
    n = CompileNotice("verify", True, after=0.05, stream=out).start()
    time.sleep(0.3)
    n.done()
    n.done()
    assert n.fired and out.getvalue().count("\n") == 1
    assert out.getvalue().startswith("[mcacct] verify: still compiling this shape's programs after 0 s")


def test_no_notice_when_results_come_in_time_or_progress_is_off():
    for enabled, wait in ((True, 0.0), (False, 0.3)):
        out = io.StringIO()
        n = CompileNotice("verify", enabled, after=0.1, stream=out).start()
        time.sleep(wait)
        n.done()
        time.sleep(0.2)
        assert not n.fired and out.getvalue() == ""
