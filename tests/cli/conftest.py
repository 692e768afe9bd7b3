"""The small UMLS-layout bundle that the CLI tests share, built once per module through the CLI."""

import pytest
from support import MRCONSO, babelink


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli")
    (directory / "MRCONSO.RRF").write_text(MRCONSO)
    result = babelink(
        "build", "--kb", directory / "MRCONSO.RRF", "--out", directory / "bundle", "--retriever", "sparse"
    )
    assert result.returncode == 0, result.stderr
    assert "3 concepts, 4 names" in result.stderr
    return directory / "bundle"
