"""Provenance: every prediction names the bundle build, the KB release and the babelink version."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest
from support import MRCONSO, babelink

from babelink.bundle.store import kb_identity, load_bundle
from babelink.link.documents import LinkParams
from babelink.link.settings import settings_id


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kb")
    (folder / "MRCONSO.RRF").write_text(MRCONSO, encoding="utf-8")
    out = folder / "bundle"
    built = babelink("build", "--kb", folder / "MRCONSO.RRF", "--out", out, "--retriever", "sparse",
                     "--kb-name", "UMLS", "--kb-version", "2024AA")
    assert built.returncode == 0, built.stderr
    return out


def test_provenance_names_the_build_the_kb_release_and_babelink(bundle):
    provenance = load_bundle(bundle).provenance
    assert provenance["kb"] == {"name": "UMLS", "version": "2024AA"}
    assert provenance["babelink"] == version("babelink")
    assert len(provenance["bundle"]) == 12 and provenance == load_bundle(bundle).provenance  # stable across loads


def test_kb_identity_defaults_to_the_file_name_and_a_content_hash():
    assert kb_identity({"source": {"path": "/data/CTD_diseases.tsv.gz"}, "hash": "abcdef0123456789"}) == {
        "name": "CTD_diseases.tsv.gz", "version": "content-abcdef012345"}


def test_every_output_format_carries_provenance(bundle, tmp_path):
    expected = load_bundle(bundle).provenance
    normalized = json.loads(babelink("normalize", "--bundle", bundle, "asthma").stdout)
    assert normalized["provenance"] == expected
    linked = json.loads(babelink("link", "--bundle", bundle, "Asthma and diabetes mellitus.").stdout)
    assert linked["provenance"] == {**expected, "settings": settings_id(LinkParams())}
    keeping = json.loads(babelink("link", "--bundle", bundle, "--keep-modifiers", "Asthma.").stdout)["provenance"]
    assert keeping == {**expected, "settings": settings_id(LinkParams(modifier_types=frozenset()))}
    assert keeping["settings"] != linked["provenance"]["settings"]
    bioc = babelink("link", "--bundle", bundle, "--format", "bioc", "Asthma.").stdout
    assert f'<infon key="babelink_bundle">{expected["bundle"]}</infon>' in bioc
    assert '<infon key="babelink_kb_version">2024AA</infon>' in bioc
    assert f'<infon key="babelink_settings">{linked["provenance"]["settings"]}</infon>' in bioc
    info = json.loads(babelink("info", "--bundle", bundle).stdout)
    assert info["provenance"] == expected and info["manifest"]["kb"]["source"]["version"] == "2024AA"


def test_rest_and_spacy_carry_provenance(bundle):
    from fastapi.testclient import TestClient

    from babelink.linker import Linker
    from babelink.serve import create_app

    linker = Linker.open(bundle)
    client = TestClient(create_app(linker))
    assert client.post("/normalize", json={"mentions": ["asthma"]}).json()["results"][0]["provenance"] == (
        linker.bundle.provenance)
    assert client.post("/link", json={"text": "asthma"}).json()["provenance"] == linker.provenance
    assert linker.provenance == {**linker.bundle.provenance, "settings": settings_id(LinkParams())}
    filtered = client.post("/link", json={"text": "asthma", "langs": ["en"]}).json()["provenance"]
    assert filtered["bundle"] == linker.bundle.provenance["bundle"]
    assert filtered["settings"] != linker.provenance["settings"]  # a name filter links otherwise
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    nlp.add_pipe("babelink", config={"bundle": str(bundle)})
    assert nlp("He has asthma.")._.babelink_provenance == linker.provenance
