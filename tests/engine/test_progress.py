"""Progress on stderr: plain lines off a terminal (rate-limited, the first after compilation without an ETA,
the last never twice), an in-place tqdm bar on a terminal, nothing when disabled."""

import io

from mcacct.engine.progress import Progress, format_seconds, stage


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_first_after_compilation_and_last_once():
    out = io.StringIO()
    p = Progress("verify", 300, True, every=1e9, stream=out)
    p.update(0)  # nothing done yet: no line
    p.update(100)  # the first completed chunk: compiled; no ETA (its time includes compilation)
    p.update(200)  # rate-limited: no line
    p.close(300)
    p.close(300)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "100/300" in lines[0] and "compiled and ran the first 100" in lines[0] and "ETA" not in lines[0]
    assert "300/300" in lines[1] and "ETA 0s" in lines[1] and "samples/s" in lines[1]
    assert "\r" not in out.getvalue()


def test_eta_is_measured_after_the_first_chunk():
    p = Progress("x", 1000, True, stream=io.StringIO())
    p.first = (10.0, 100)  # the first chunk finished at t = 10 s (compilation included)
    rate, eta = p.rate_and_eta(300, 12.0)  # 200 more in 2 s
    assert rate == 100 and eta == 7.0


def test_disabled_prints_nothing():
    out = io.StringIO()
    p = Progress("x", 10, False, stream=out)
    p.update(5, force=True)
    p.close(10)
    with stage("pld", False, stream=out):
        pass
    assert out.getvalue() == ""


def test_terminal_bar_updates_in_place():
    out = _Tty()
    p = Progress("verify", 300, True, stream=out)
    assert p.bar is not None
    p.update(100, force=True)
    p.close(300)
    text = out.getvalue()
    assert "\r" in text and "300/300" in text and "verify" in text
    assert text.count("\n") <= 1  # one bar, redrawn in place
    # one comma between the count and the rate (tqdm adds its own before the postfix), none doubled
    assert "300/300, " in text and "/300, compiling" in text and ", ," not in text and "samples/s" in text


def test_stage_and_format_seconds():
    out = io.StringIO()
    with stage("pld calibrate: FFT accounting", True, stream=out):
        pass
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("...") and "done in 0s" in lines[1]
    assert [format_seconds(s) for s in (5, 185, 7620, 86400 * 309.1, float("inf"))] == [
        "5s", "3m05s", "2h07m", "309.1 days", "?"]
