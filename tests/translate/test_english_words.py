"""The English words a rendering keeps: computed from distinct raw words, equal to normalising every name."""

from hypothesis import given, settings
from hypothesis import strategies as st

from babelink.kb.base import KnowledgeBaseBuilder
from babelink.text import normalize_name
from babelink.translate import english_words

# Whitespace of several kinds, delimiters, combining marks, traditional Han, compatibility forms.
CHARACTERS = list("ab Ä\t\u00a0\u2003\u3000-/(é\u0301臺灣ﬁ¨\x1cß")
names = st.text(alphabet=st.sampled_from(CHARACTERS), min_size=1, max_size=16)


@settings(max_examples=200, deadline=None)
@given(st.lists(names.filter(str.strip), min_size=1, max_size=6))
def test_equal_to_the_words_of_every_normalised_name(raw_names):
    builder = KnowledgeBaseBuilder()
    for number, name in enumerate(raw_names):
        builder.add_name(f"C{number}", name, lang="en" if number % 3 else None)
    builder.add_name("C99", "Fiebre alta", lang="es")
    kb = builder.build()
    expected = {word for name in raw_names for word in normalize_name(name).split()}
    assert english_words(kb) == expected
