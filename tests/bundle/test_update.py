"""Adding names to a built bundle: found afterwards, as a rebuild would find them, and nothing half-written."""

from __future__ import annotations

import json
import shutil

import pytest
import scipy.sparse as sp
from support import babelink

from babelink.bundle.integrity import file_records
from babelink.bundle.store import MANIFEST, build_bundle, load_bundle
from babelink.bundle.update import read_additions, update_bundle
from babelink.errors import BundleError, InputFormatError
from babelink.index.dense import DenseParams
from babelink.index.sparse import LEGACY_MATRIX_FILE, TfidfNameIndex
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.linker import Linker
from babelink.retrieve.filters import NameFilter
from babelink.text import NAME_NORMALIZATION

BASE = {"C1": ["Myocardial infarction"], "C2": ["Asthma"], "C3": ["Diabetes mellitus"]}
ADDED = {"C1": ["Heart attack"], "C4": ["Gout", "Podagra", "痛风"]}


def knowledge_base(names: dict[str, list[str]]):
    builder = KnowledgeBaseBuilder()
    for concept_id, concept_names in names.items():
        for position, name in enumerate(concept_names):
            builder.add_name(concept_id, name, lang="en", preferred=position == 0)
    return builder.build()


@pytest.mark.parametrize("retriever", ["sparse", "hybrid", "hybrid, lazy index"])
def test_added_names_are_found_as_after_a_rebuild(tmp_path, tiny_encoder_dir, retriever, monkeypatch):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))  # the lazy index's vector store
    encoder = {"encoder": tiny_encoder_dir} if retriever != "sparse" else {}
    if retriever.endswith("lazy index"):
        retriever, encoder["dense_params"] = "hybrid", DenseParams(kind="lazy")
    path = build_bundle(knowledge_base(BASE), tmp_path / "b", retriever=retriever, **encoder)
    updated = update_bundle(path, knowledge_base(ADDED), tmp_path / "u", source="added.tsv")
    rebuilt = build_bundle(knowledge_base({**BASE, "C1": BASE["C1"] + ADDED["C1"], "C4": ADDED["C4"]}),
                           tmp_path / "r", retriever=retriever, **encoder)
    queries = ["heart attack", "podagra", "gout", "asthma", "myocardial infarction", "痛风"]
    by_update, by_rebuild = (Linker.open(p).normalize(queries, top_k=2) for p in (updated, rebuilt))
    assert [c[0].concept_id for c in by_update] == ["C1", "C4", "C4", "C2", "C1", "C4"]
    assert [[(c.concept_id, round(c.score, 4)) for c in found] for found in by_update][1:3] == [
        [(c.concept_id, round(c.score, 4)) for c in found] for found in by_rebuild][1:3]
    manifest = load_bundle(updated, verify=True).manifest
    assert manifest["kb"]["concepts"] == 4 and manifest["kb"]["names"] == 7
    assert manifest["kb"]["scripts"] == {"LATIN": 6 / 7, "CJK": 1 / 7}  # the new names' scripts counted
    assert manifest["updates"][0] | {"source": "added.tsv", "given": 4, "names": 4, "new_concepts": 1,
                                     "new_strings": 4} == (
        manifest["updates"][0])
    assert load_bundle(path).manifest["kb"]["concepts"] == 3  # --out leaves the original as it was


def test_names_already_there_are_not_added_again_and_alternative_ids_reach_their_concept(tmp_path):
    builder = KnowledgeBaseBuilder()
    builder.add_name("HP:1", "Hypertension", lang="en", preferred=True)
    builder.add_concept("HP:1", alt_ids=["MESH:D006973"])  # MeSH's heading joined into the HPO concept
    path = build_bundle(builder.build(), tmp_path / "b", retriever="sparse")
    additions = knowledge_base({"MESH:D006973": ["High blood pressure", "Hypertension"]})
    built_from = load_bundle(path).provenance["kb"]["version"]
    update_bundle(path, additions)
    files = {file: file.read_bytes() for file in path.rglob("*") if file.is_file()}
    update_bundle(path, additions)  # nothing new: the bundle stays byte for byte, its id with it
    assert {file: file.read_bytes() for file in path.rglob("*") if file.is_file()} == files
    update_bundle(path, additions, tmp_path / "copy")
    assert {f.relative_to(tmp_path / "copy"): f.read_bytes() for f in (tmp_path / "copy").rglob("*") if f.is_file()} \
        == {file.relative_to(path): data for file, data in files.items()}
    assert not [entry for entry in tmp_path.iterdir() if entry.name.startswith(".")]
    bundle = load_bundle(path)
    assert len(bundle.kb) == 1 and bundle.kb.num_names == 2
    assert [(u["given"], u["names"], u["new_concepts"]) for u in bundle.manifest["updates"]] == [(2, 1, 0)]
    assert bundle.provenance["kb"]["version"] == built_from + "+1-update"  # the release read, and what was added
    assert Linker(bundle).normalize("high blood pressure", top_k=1)[0].concept_id == "HP:1"


def test_cli_update_in_place_and_its_errors(tmp_path):
    kb = tmp_path / "kb.tsv"
    kb.write_text("id\tname\nC1\tMyocardial infarction\nC2\tAsthma\n", encoding="utf-8")
    bundle = tmp_path / "bundle"
    assert babelink("build", "--kb", kb, "--out", bundle, "--retriever", "sparse").returncode == 0
    before = (bundle / MANIFEST).read_text()
    bad = tmp_path / "bad.tsv"
    bad.write_text("id\tname\nC9\tGout\nC10\n", encoding="utf-8")
    failed = babelink("update", "--bundle", bundle, "--add", bad)
    assert failed.returncode != 0 and "bad.tsv:3" in failed.stderr and "Traceback" not in failed.stderr
    assert (bundle / MANIFEST).read_text() == before  # untouched
    good = tmp_path / "add.tsv"
    good.write_text("id\tname\nC1\tHeart attack\n", encoding="utf-8")
    assert babelink("update", "--bundle", bundle, "--add", good).returncode == 0
    again = babelink("update", "--bundle", bundle, "--add", good)
    assert again.returncode == 0 and "unchanged, the bundle has every name and code of" in again.stderr
    found = json.loads(babelink("normalize", "--bundle", bundle, "--top-k", "1", "heart attack").stdout)
    assert found["candidates"][0]["id"] == "C1" and found["candidates"][0]["matched_name"] == "Heart attack"


def test_an_update_is_read_as_the_build_read_and_gives_known_concepts_their_new_codes(tmp_path):
    kb = tmp_path / "kb.tsv"
    kb.write_text("id\tname\tlang\nC1\tMyocardial infarction\ten\nC2\tAsthme\tfr\nC3\tGout\ten\n", encoding="utf-8")
    bundle = tmp_path / "bundle"
    assert babelink("build", "--kb", kb, "--lang", "en", "--out", bundle, "--retriever", "sparse").returncode == 0
    add = tmp_path / "add.jsonl"
    add.write_text('{"id": "C1", "name": "MI", "xrefs": ["UMLS:C0027051"], "types": ["T047"]}\n'
                   '{"id": "C1", "name": "Infarctus du myocarde", "lang": "fr"}\n'
                   '{"id": "C9", "name": "Goutte", "lang": "fr"}\n', encoding="utf-8")
    additions, notes = read_additions(bundle, add)
    assert notes == [] and additions.languages() == {"en": 1} and len(additions) == 1
    update_bundle(bundle, additions)
    updated = load_bundle(bundle)
    assert updated.kb.languages() == {"en": 3} and "C9" not in updated.kb
    assert updated.manifest["updates"][0] | {"names": 1, "new_concepts": 0, "enriched_concepts": 1} == (
        updated.manifest["updates"][0])
    found = Linker(updated).filtered(NameFilter.of(types=["T047"])).normalize("MI", top_k=1)[0]
    assert found.concept_id == "C1" and dict(found.codes)["UMLS"] == "C0027051"
    french = tmp_path / "french.tsv"
    french.write_text("id\tname\tlang\nC9\tGoutte\tfr\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"french.tsv: no name in the bundle's languages \(en\)"):
        read_additions(bundle, french)


def test_an_update_without_new_strings_needs_no_vector(tmp_path, tiny_encoder_dir):
    """Codes for a known concept, and a known string named by a new concept: no string to encode."""
    path = build_bundle(knowledge_base(BASE), tmp_path / "b", retriever="hybrid", encoder=tiny_encoder_dir)
    builder = KnowledgeBaseBuilder()
    builder.add_name("C1", "Myocardial infarction", lang="en")
    builder.add_concept("C1", xrefs=["UMLS:C0027051"])
    builder.add_name("C9", "Asthma", lang="en")
    dense_files = {file.name: file.read_bytes() for file in (path / "dense").iterdir()}
    update_bundle(path, builder.build())
    updated = load_bundle(path, verify=True)
    assert len(updated.kb) == 4 and len(updated.names) == 3
    assert {file.name: file.read_bytes() for file in (path / "dense").iterdir()} == dense_files
    found = Linker(updated).normalize("myocardial infarction", top_k=1)[0]
    assert found.concept_id == "C1" and dict(found.codes)["UMLS"] == "C0027051"


def test_a_bundle_with_the_legacy_sparse_matrix_updates_to_the_current_layout(tmp_path):
    path = build_bundle(knowledge_base(BASE), tmp_path / "b", retriever="sparse")
    sparse = path / "sparse"
    sp.save_npz(sparse / LEGACY_MATRIX_FILE, TfidfNameIndex.load(sparse).matrix, compressed=False)
    for stored in sparse.glob("tfidf_*.npy"):
        stored.unlink()
    manifest = json.loads((path / MANIFEST).read_text())
    manifest.update(file_records(path, (f for f in path.rglob("*") if f.is_file() and f.name != MANIFEST)))
    (path / MANIFEST).write_text(json.dumps(manifest))
    update_bundle(path, knowledge_base(ADDED))
    assert not (sparse / LEGACY_MATRIX_FILE).exists()
    assert Linker.open(path).normalize("gout", top_k=1)[0].concept_id == "C4"


def test_an_update_with_another_encoder_is_refused(tmp_path, tiny_encoder_dir):
    encoder = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, encoder)
    path = build_bundle(knowledge_base(BASE), tmp_path / "b", retriever="dense", encoder=encoder)
    config = encoder / "config.json"
    config.write_text(config.read_text().replace("{", '{"babelink_test_change": 1, ', 1))  # another checkpoint
    with pytest.raises(BundleError, match="fingerprint differs"):
        update_bundle(path, knowledge_base(ADDED), tmp_path / "u")
    assert not (tmp_path / "u").exists()


def test_an_update_records_the_name_normalisation_that_normalised_every_string_again(tmp_path):
    path = build_bundle(knowledge_base(BASE), tmp_path / "b", retriever="sparse")
    manifest = json.loads((path / MANIFEST).read_text())
    del manifest["name_normalization"]  # built before bundles recorded it
    (path / MANIFEST).write_text(json.dumps(manifest))
    updated = update_bundle(path, knowledge_base(ADDED), tmp_path / "u", source="added.tsv")
    assert load_bundle(updated).manifest["name_normalization"] == NAME_NORMALIZATION
