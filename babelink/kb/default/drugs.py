"""Drug names from drug-named-entity-recognition, merged into MeSH descriptors where safe."""

from __future__ import annotations

import bz2
import pickle
from pathlib import Path

from babelink.errors import InputFormatError
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.kb.default.wheels import member_label, open_member


class _DataOnlyUnpickler(pickle.Unpickler):
    """Plain containers and strings only: a pickle that names any class or function is refused, not run."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def add_drugs(builder: KnowledgeBaseBuilder, wheel: Path, mesh_headings: dict[str, str]) -> None:
    """Drug names (canonical as `PT`, brand names and other variants as `SY`), merged into MeSH where safe;
    every drug is CHEM (`groups`)."""
    member = "drug_named_entity_recognition/drug_ner_dictionary.pkl.bz2"
    label = member_label(wheel, member)
    try:
        with open_member(wheel, member) as stream, bz2.open(stream) as unpacked:
            data = _DataOnlyUnpickler(unpacked).load()
        records = data["drug_canonical_to_data"]
        variants_of: dict[str, list[str]] = {}
        for variant, canonicals in data["drug_variant_to_canonical"].items():
            for canonical in canonicals:
                variants_of.setdefault(canonical, []).append(variant)
    except (OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError, AttributeError) as error:
        raise InputFormatError(label, None, f"not the expected drug dictionary: {error!r}") from None
    descriptor_of = {heading.casefold(): descriptor for descriptor, heading in mesh_headings.items()}
    for canonical in dict.fromkeys([*records, *variants_of]):
        record = records.get(canonical, {})
        names = [record.get("name") or canonical, *(record.get("synonyms") or ()), *variants_of.get(canonical, ())]
        folded = [" ".join(name.split()).casefold() for name in names]
        descriptor = record.get("mesh_id")
        if descriptor not in mesh_headings or mesh_headings[descriptor].casefold() not in folded:
            descriptor = descriptor_of.get(folded[0])
        ids = [f"MESH:{descriptor}"] if descriptor else []
        ids += [
            f"{prefix}:{record[key]}"
            for prefix, key in (("DRUGBANK", "drugbank_id"), ("MEDLINEPLUS", "medline_plus_id"))
            if record.get(key)
        ]
        concept_id = ids[0] if ids else f"DRUG-NER:{canonical}"
        builder.add_names(
            concept_id,
            [(names[0], "PT"), *((name, "SY") for name in names[1:])],
            lang="en",
            source="DRUG-NER",
            skip=[mesh_headings[descriptor]] if descriptor else (),
        )
        builder.add_concept(concept_id, types=["CHEM"], alt_ids=ids[1:])
