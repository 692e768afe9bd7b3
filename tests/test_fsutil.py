"""Stopping a command: SIGTERM cleans up like Ctrl-C, and neither stops a swap between its two renames."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from babelink.fsutil import exit_on_signals, write_directory


@pytest.fixture
def sigterm_exits():
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    exit_on_signals()
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def test_sigterm_mid_write_leaves_no_staging_directory(tmp_path, sigterm_exits):
    def write(staging):
        (staging / "half").write_text("written")
        os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(SystemExit) as stopped:
        write_directory(tmp_path / "bundle", write)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_a_signal_during_the_swap_waits_for_it(tmp_path):
    """A SIGTERM that arrives between moving the old directory aside and renaming the new one in is
    delivered after both renames: the target is never missing."""
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from babelink import fsutil
        fsutil.exit_on_signals()
        target = Path({str(tmp_path / "bundle")!r})
        fsutil.write_directory(target, lambda staging: (staging / "v").write_text("1"))
        rename = Path.rename
        def rename_then_signal(self, other):
            moved = rename(self, other)
            if self == target:  # the old directory has just been moved aside
                os.kill(os.getpid(), signal.SIGTERM)
            return moved
        Path.rename = rename_then_signal
        try:
            fsutil.write_directory(target, lambda staging: (staging / "v").write_text("2"))
        finally:
            print((target / "v").read_text())
    """)
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True)
    assert result.returncode == 128 + signal.SIGTERM and result.stdout.strip() == "2", result.stderr
    assert [entry.name for entry in tmp_path.iterdir()] == ["bundle"]
