"""Filters inside retrieval: top-k holds k concepts of the requested types, sources or languages."""

from __future__ import annotations

import json

import pytest
from support import babelink

from babelink import NameFilter  # the public path the docs give
from babelink.bundle.store import build_bundle
from babelink.errors import InvalidInputError
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.link.documents import LinkParams
from babelink.linker import Linker

#: concept → (semantic type, [(name, lang, source)])
CONCEPTS = {
    "D1": ("T047", [("Cold", "en", "MSH"), ("Common cold", "en", "MSH"), ("Resfriado", "es", "MSHSPA")]),
    "D2": ("T047", [("Cold urticaria", "en", "MSH")]),
    "P1": ("T033", [("Cold sensation", "en", "HPO"), ("Cold", "en", "HPO")]),  # shares "Cold" with D1
    "P2": ("T033", [("Cold hands", "en", "HPO")]),
    "P3": ("T033", [("Cold feet", "en", "HPO")]),
    "C1": ("T121", [("Cold medicine", "en", "MSH")]),
}


@pytest.fixture(scope="module", params=["sparse", "hybrid"])
def linker(request, tmp_path_factory, tiny_encoder_dir):
    builder = KnowledgeBaseBuilder()
    for concept_id, (semantic_type, names) in CONCEPTS.items():
        for position, (name, lang, source) in enumerate(names):
            builder.add_name(concept_id, name, lang=lang, source=source, preferred=position == 0)
        builder.add_concept(concept_id, types=[semantic_type])
    encoder = {"encoder": tiny_encoder_dir} if request.param == "hybrid" else {}
    return Linker.open(build_bundle(builder.build(), tmp_path_factory.mktemp("b") / "b", retriever=request.param,
                                    **encoder))


def ids(candidates):
    return [candidate.concept_id for candidate in candidates]


def test_top_k_holds_k_concepts_of_the_type(linker):
    phenotypes = linker.filtered(NameFilter.of(types=["T033"])).normalize("cold", top_k=3)
    assert sorted(ids(phenotypes)) == ["P1", "P2", "P3"]
    diseases = linker.filtered(NameFilter.of(types=["T047"])).normalize("cold", top_k=3)
    assert set(ids(diseases)) == {"D1", "D2"}
    assert ids(diseases)[0] == "D1" and diseases[0].matched_name == "Cold"  # the shared string, for D1 only


def test_sources_and_languages(linker):
    assert ids(linker.filtered(NameFilter.of(sources=["HPO"])).normalize("cold", top_k=5)) != []
    assert set(ids(linker.filtered(NameFilter.of(sources=["HPO"])).normalize("cold", top_k=5))) <= {"P1", "P2", "P3"}
    spanish = linker.filtered(NameFilter.of(langs=["SPA"])).normalize("resfriado", top_k=5)
    assert ids(spanish) == ["D1"] and spanish[0].matched_name == "Resfriado"


def test_a_filter_that_matches_nothing_answers_nothing(linker):
    assert linker.filtered(NameFilter.of(types=["T033"], sources=["MSH"])).normalize("cold", top_k=5) == []


@pytest.mark.parametrize("blank", [[""], [" "], [","], []])
def test_a_blank_value_means_no_filter_on_every_field(blank):
    assert not NameFilter.of(types=blank, sources=blank, langs=blank)


def test_many_unknown_values_make_a_short_error(linker):
    with pytest.raises(InvalidInputError) as error:
        linker.filtered(NameFilter.of(types=[f"T{n:05d}" for n in range(15_000)]))
    assert "… (15,000 in all)" in str(error.value) and len(str(error.value)) < 1_000


def test_unknown_values_are_clear_errors(linker):
    with pytest.raises(InvalidInputError, match=r"types: T999 not in this bundle's KB \(it has: T033, T047, T121\)"):
        linker.filtered(NameFilter.of(types=["T999"]))
    with pytest.raises(InvalidInputError, match="sources: UMLS"):
        linker.filtered(NameFilter.of(sources=["UMLS,HPO"]))
    with pytest.raises(InvalidInputError, match="types: T999 .*; sources: NOPE"):  # every unknown value at once
        linker.filtered(NameFilter.of(types=["T999"], sources=["NOPE"]))


def test_a_semantic_group_stands_for_its_types(linker):
    disorders = linker.filtered(NameFilter.of(types=["DISO"])).normalize("cold medicine", top_k=10)
    assert set(ids(disorders)) == {"D1", "D2", "P1", "P2", "P3"}  # Disease or Syndrome and Finding, no drug
    assert ids(linker.filtered(NameFilter.of(types=["CHEM", "T033"])).normalize("cold medicine", top_k=1)) == ["C1"]
    with pytest.raises(InvalidInputError, match="types: ANAT not in this bundle's KB"):  # no Anatomy type here
        linker.filtered(NameFilter.of(types=["ANAT"]))


def test_an_error_names_the_groups_a_kb_carries(tmp_path):
    builder = KnowledgeBaseBuilder()
    builder.add_name("D1", "Asthma", preferred=True)
    builder.add_concept("D1", types=["DISO"])
    linker = Linker.open(build_bundle(builder.build(), tmp_path / "b", retriever="sparse"))
    with pytest.raises(InvalidInputError, match=r"types: diso not in this bundle's KB \(it has: DISO \(Disorders\)\)"):
        linker.filtered(NameFilter.of(types=["diso"]))


def test_filtered_linking(linker):
    linked = linker.filtered(NameFilter.of(types=["T047"])).link("Cold feet and cold urticaria.", lang="en")
    assert {mention.concept.concept_id for mention in linked.mentions} <= {"D1", "D2"}
    assert linker.filtered(NameFilter.of(types=["T047"])) is linker.filtered(NameFilter.of(types=["T047"]))


def test_filtered_and_reoptioned_linkers_share_what_the_whole_kb_gives_linking(linker):
    phenotypes = linker.filtered(NameFilter.of(types=["T033"]))
    stricter = phenotypes.with_options(link_params=LinkParams(link_threshold=0.99))
    for other in (phenotypes, stricter):  # protected stop words are counted over every name, once
        assert other.documents.stopwords is linker.documents.stopwords
        assert other.documents.concept_types is linker.documents.concept_types
    assert stricter.documents.params.link_threshold == 0.99 and phenotypes.documents.params == linker.link_params


def test_cli_and_rest(linker):
    bundle = linker.bundle.path
    result = babelink("normalize", "--bundle", bundle, "--types", "T033", "--top-k", "3", "cold")
    assert sorted(c["id"] for c in json.loads(result.stdout)["candidates"]) == ["P1", "P2", "P3"]
    refused = babelink("normalize", "--bundle", bundle, "--sources", "NOPE", "cold")
    assert refused.returncode != 0 and "sources: NOPE not in this bundle's KB" in refused.stderr
    from fastapi.testclient import TestClient

    from babelink.serve import create_app

    client = TestClient(create_app(linker))
    answer = client.post("/normalize", json={"mentions": ["cold"], "top_k": 3, "types": ["T033"]}).json()
    assert sorted(c["id"] for c in answer["results"][0]["candidates"]) == ["P1", "P2", "P3"]
    assert client.post("/normalize", json={"mentions": ["cold"], "types": ["T999"]}).status_code == 422

