"""CTD MEDIC reader (`CTD_diseases.tsv[.gz]`), the KB of NCBI-disease and BC5CDR."""

from __future__ import annotations

from pathlib import Path

from babelink.errors import InputFormatError
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder
from babelink.textio import iter_lines

# DiseaseName, DiseaseID, AltDiseaseIDs, Definition, ParentIDs, TreeNumbers, ParentTreeNumbers, Synonyms, SlimMappings
NAME, ID, ALT_IDS, SYNONYMS, SLIM_MAPPINGS = 0, 1, 2, 7, 8
MIN_FIELDS = 8


def _split(cell: str) -> list[str]:
    return [value.strip() for value in cell.split("|") if value.strip()]


def read_ctd(path: str | Path, *, languages: frozenset[str] | None = None) -> KnowledgeBase:
    """MEDIC rows → concepts keyed by `DiseaseID`; `AltDiseaseIDs` resolve to it (`kb.resolve`).

    MEDIC is English; `languages` without `en` therefore gives an empty KB.
    """
    builder = KnowledgeBaseBuilder(languages=languages)
    first_line: dict[str, int] = {}  # a DiseaseID on two rows is a broken file, not two concepts to merge
    for number, line in iter_lines(path):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < MIN_FIELDS:
            raise InputFormatError(
                path, number, f"expected at least {MIN_FIELDS} tab-separated fields, found {len(fields)}"
            )
        concept_id, name = fields[ID].strip(), fields[NAME].strip()
        if not concept_id or not name:
            raise InputFormatError(path, number, "empty DiseaseName or DiseaseID")
        if concept_id in first_line:
            raise InputFormatError(
                path, number, f"DiseaseID {concept_id} again (first at line {first_line[concept_id]})"
            )
        first_line[concept_id] = number
        builder.add_name(concept_id, name, source="MEDIC", term_type="PT", preferred=True)
        for synonym in _split(fields[SYNONYMS]):
            builder.add_name(concept_id, synonym, source="MEDIC", term_type="SY")
        slim = _split(fields[SLIM_MAPPINGS]) if len(fields) > SLIM_MAPPINGS else []
        builder.add_concept(concept_id, preferred_name=name, types=slim, alt_ids=_split(fields[ALT_IDS]))
    return builder.build()
