"""OBO flat-file ontologies (HPO, MONDO, DO, …): the `[Term]` stanzas, streamed one at a time.

Only what a name table needs is kept: id, label, synonyms with their scope (EXACT, RELATED,
BROAD, NARROW) and synonym type, database cross-references, alternative ids, `is_a` parents and
the obsolete flag with `replaced_by`. Other relations, definitions and `[Typedef]` stanzas are
skipped.

A term's *branches* are the children of a root on its `is_a` paths (HPO: Phenotypic abnormality,
Clinical modifier, Frequency, Mode of inheritance, …). They are the concept types an ontology
gives, kept in a concept's `types` like UMLS semantic types, and what tells a disease from a
qualifier such as "Severe" or "Chronic" that no annotator links on its own (`link.modifiers`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from babelink.errors import InputFormatError
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder
from babelink.textio import iter_lines

#: Term types of the synonyms kept: EXACT ones are the term's own names, RELATED ones only near it.
SYNONYM_TERM_TYPES = {"EXACT": "SY", "RELATED": "RT"}
# synonym: "text with \" escapes" SCOPE [optional_type] [dbxrefs] {optional modifiers}
_SYNONYM = re.compile(r'"((?:[^"\\]|\\.)*)"\s+(EXACT|RELATED|BROAD|NARROW)(?:\s+([^\s\[]+))?\s*\[')
_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"n": "\n", "t": "\t", "W": " "}


class OboSynonym(NamedTuple):
    text: str
    scope: str  # EXACT, RELATED, BROAD or NARROW
    type: str | None  # synonymtypedef such as "layperson", "abbreviation", "obsolete_synonym"


@dataclass
class OboTerm:
    id: str
    line: int  # line of the `[Term]` header, for error messages downstream
    name: str | None = None
    synonyms: list[OboSynonym] = field(default_factory=list)
    xrefs: list[str] = field(default_factory=list)  # bare ids: `UMLS:C0011849`, description dropped
    alt_ids: list[str] = field(default_factory=list)
    obsolete: bool = False
    replaced_by: list[str] = field(default_factory=list)  # successors of an obsolete term
    parents: list[str] = field(default_factory=list)  # `is_a` targets


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda match: _ESCAPED.get(match.group(1), match.group(1)), text)


def _first_token(value: str, tag: str, path: str | Path, number: int) -> str:
    """The identifier in `id:`, `alt_id:` and `xref:` values; trailing text is a description or comment."""
    token = value.split(maxsplit=1)[0] if value.strip() else ""
    if not token or token.startswith(("!", "{", '"')):
        raise InputFormatError(path, number, f"empty {tag!r} value")
    return token


def _finish(term: OboTerm | None, path: str | Path) -> OboTerm | None:
    if term is not None and not term.id:
        raise InputFormatError(path, term.line, "[Term] stanza without an 'id' tag")
    return term


def iter_obo_terms(lines: Iterable[tuple[int, str]], path: str | Path) -> Iterator[OboTerm]:
    """Yield each `[Term]` stanza of `lines` ((line number, text) pairs, as from `iter_lines`).

    Obsolete terms are yielded with `obsolete=True` (callers decide); a stanza without an id,
    a second `id:`/`name:`, a tag line without `:` or an unparsable synonym raises
    `InputFormatError` with the line number, as does a term id defined twice.
    """
    first_line: dict[str, int] = {}
    for term in _stanzas(lines, path):
        if term.id in first_line:
            raise InputFormatError(path, term.line, f"term {term.id} is defined again (first at line "
                                                    f"{first_line[term.id]})")
        first_line[term.id] = term.line
        yield term


def _stanzas(lines: Iterable[tuple[int, str]], path: str | Path) -> Iterator[OboTerm]:
    term: OboTerm | None = None
    for number, raw in lines:
        line = raw.strip()
        if not line or line.startswith("!"):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise InputFormatError(path, number, f"malformed stanza header {line!r}")
            if (finished := _finish(term, path)) is not None:
                yield finished
            term = OboTerm(id="", line=number) if line == "[Term]" else None
            continue
        tag, separator, value = line.partition(":")
        if not separator:
            raise InputFormatError(path, number, f"expected 'tag: value', got {line[:60]!r}")
        if term is None:  # header or a non-Term stanza
            continue
        value = value.strip()
        if tag == "id":
            if term.id:
                raise InputFormatError(path, number, f"second 'id' in the stanza of {term.id}")
            term.id = _first_token(value, tag, path, number)
        elif tag == "name":
            if term.name is not None:
                raise InputFormatError(path, number, f"second 'name' in the stanza of {term.id or 'a term'}")
            term.name = _unescape(value)
        elif tag == "synonym":
            match = _SYNONYM.match(value)
            if match is None:
                raise InputFormatError(path, number, f"malformed synonym {value[:60]!r}")
            term.synonyms.append(OboSynonym(_unescape(match.group(1)), match.group(2), match.group(3)))
        elif tag == "xref":
            term.xrefs.append(_first_token(value, tag, path, number))
        elif tag == "alt_id":
            term.alt_ids.append(_first_token(value, tag, path, number))
        elif tag == "replaced_by":
            term.replaced_by.append(_first_token(value, tag, path, number))
        elif tag == "is_a":
            term.parents.append(_first_token(value, tag, path, number))
        elif tag == "is_obsolete":
            term.obsolete = value.split(" ", 1)[0].lower() == "true"
    if (finished := _finish(term, path)) is not None:
        yield finished


def term_branches(terms: Iterable[OboTerm]) -> dict[str, frozenset[str]]:
    """Each live term's branches: the ids of the roots' children it descends from by `is_a` (a
    root has none; a child of a root is its own branch). Roots are the live terms without a live
    parent; an `is_a` cycle, which no root reaches, gives its terms no branch."""
    parents = {term.id: term.parents for term in terms if not term.obsolete}
    parents = {term: [parent for parent in found if parent in parents] for term, found in parents.items()}
    branches: dict[str, frozenset[str]] = {}
    for start in parents:
        stack = [start]
        while stack:  # iterative depth-first: HPO is ~20 levels deep, other ontologies deeper
            term = stack[-1]
            if term in branches:
                stack.pop()
                continue
            pending = [parent for parent in parents[term] if parent not in branches and parent not in stack]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            # a child of a root is its own branch; below, a term takes its parents' branches
            branches[term] = frozenset().union(*({term} if not parents[parent] else branches.get(parent, ())
                                                 for parent in parents[term]))
    return branches


def add_obo_terms(builder: KnowledgeBaseBuilder, terms: Iterable[OboTerm], *, source: str, lang: str = "en") -> None:
    """Label (`PT`) and EXACT (`SY`) and RELATED (`RT`) synonyms of each live term (BROAD/NARROW name other concepts,
    `obsolete_synonym`s are retired names); xrefs kept (`UMLS:C…` among them), branches as types.
    An obsolete term only lends its id, as an alternative ID, to its single `replaced_by` successor."""
    terms = list(terms)
    branches = term_branches(terms)
    for term in terms:
        if term.obsolete:
            if len(term.replaced_by) == 1:
                builder.add_concept(term.replaced_by[0], alt_ids=[term.id])
            continue
        synonyms = [(s.text, SYNONYM_TERM_TYPES[s.scope]) for s in term.synonyms
                    if s.scope in SYNONYM_TERM_TYPES and s.type != "obsolete_synonym"]
        builder.add_names(term.id, [(term.name or "", "PT"), *synonyms], lang=lang, source=source)
        builder.add_concept(term.id, types=sorted(branches[term.id]), xrefs=term.xrefs, alt_ids=term.alt_ids)


def types_from_ontology(kb: KnowledgeBase, branches: Mapping[str, frozenset[str]]) -> tuple[KnowledgeBase, int]:
    """`kb` with each concept's types extended by the branches of the ontology terms it is or
    cross-references (its id, alternative ids, xrefs, or an xref's code: MRCONSO's `HPO:HP:0012828`),
    and how many concepts gained a type. How a KB without semantic types (no MRSTY) learns that
    "Severe" is a clinical modifier from the HPO it maps to."""
    import pyarrow as pa

    columns = {name: kb.concepts.column(name).to_pylist() for name in ("concept_id", "types", "xrefs", "alt_ids")}
    typed, gained = [], 0
    for concept_id, types, xrefs, alt_ids in zip(*columns.values()):
        codes = [concept_id, *(alt_ids or ()), *(xrefs or ()),
                 *(xref.partition(":")[2] for xref in xrefs or () if ":" in xref)]
        found = frozenset().union(*(branches.get(code, frozenset()) for code in codes))
        added = sorted(found.difference(types or ()))
        gained += bool(added)
        typed.append([*(types or ()), *added])
    concepts = kb.concepts.set_column(kb.concepts.schema.get_field_index("types"), "types",
                                      pa.array(typed, kb.concepts.schema.field("types").type))
    return KnowledgeBase(kb.names, concepts), gained


def read_obo_branches(path: str | Path) -> dict[str, frozenset[str]]:
    """The branches of every live term of the OBO file at `path` (`term_branches`)."""
    path = Path(path)
    return term_branches(iter_obo_terms(iter_lines(path), path))


def read_obo(
    path: str | Path, *, source: str | None = None, lang: str = "en", languages: frozenset[str] | None = None
) -> KnowledgeBase:
    """An OBO ontology as a KB keyed by term id; `source` defaults to the file's stem upper-cased."""
    path = Path(path)
    builder = KnowledgeBaseBuilder(languages=languages)
    label = source or path.name.split(".")[0].upper()
    add_obo_terms(builder, iter_obo_terms(iter_lines(path), path), source=label, lang=lang)
    return builder.build()
