"""Fuzzing the edges users reach first: KB readers and `normalize` / `link` on arbitrary input.

Whatever the bytes, a reader returns a KB or raises a `BabelinkError` naming the file; `normalize`
returns candidates or refuses the mention with `InvalidInputError`; `link` returns mentions whose
offsets point at their text. Bounded example counts keep the suite fast.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import build_sparse_bundle

from babelink.errors import BabelinkError, InvalidInputError
from babelink.kb.readers import read_kb
from babelink.linker import Linker

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

#: Text that looks like a KB file often enough to get past the header: delimiters, ids, names, junk.
kb_text = st.lists(
    st.one_of(
        st.sampled_from(["id\tname", "concept_id\tname\tlang", "C1\tasthma", "C2\t\tes", "\t\t", "|", "#x"]),
        st.text(alphabet=st.sampled_from("C1|\t ,;\"'{}[]:aé漢\u200b\r"), max_size=30),
        st.text(max_size=20),
    ),
    max_size=8,
).map("\n".join)


@FUZZ
@given(content=kb_text, suffix=st.sampled_from([".tsv", ".jsonl", ".RRF", ".obo", "_diseases.tsv"]))
def test_kb_readers_return_a_kb_or_a_clear_error(tmp_path_factory, content, suffix):
    path = tmp_path_factory.mktemp("kb") / f"kb{suffix}"
    path.write_bytes(content.encode("utf-8", "surrogatepass"))
    try:
        kb = read_kb(path)
    except BabelinkError as error:
        assert str(path.name) in str(error) or "--" in str(error)
    else:
        assert len(kb) > 0


@pytest.fixture(scope="module")
def linker(tmp_path_factory):
    names = {"C1": ["Asthma", "asma"], "C2": ["Diabetes mellitus", "diabète"], "C3": ["Myocardial infarction"]}
    return Linker.open(build_sparse_bundle(names, tmp_path_factory.mktemp("fuzz") / "bundle"))


@FUZZ
@given(mention=st.text(max_size=60))
def test_normalize_returns_candidates_or_refuses_the_mention(linker, mention):
    try:
        candidates = linker.normalize(mention, top_k=3)
    except InvalidInputError:
        return
    assert len(candidates) <= 3
    assert all(0.0 <= candidate.score <= 1.0 + 1e-6 for candidate in candidates)


@FUZZ
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=200))
def test_link_offsets_point_at_the_mention_text(linker, text):
    document = linker.link(text)
    for mention in document.mentions:
        assert text[mention.start : mention.end] == mention.text
