"""The benchmarks' lazy systems (`report.emptied_store`): each first pass starts from an empty store."""

import gc

from support import benchmark_script

from babelink.bundle.store import build_bundle, load_bundle
from babelink.index.dense import DenseParams
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.linker import Linker

report = benchmark_script("report")


def test_an_emptied_lazy_bundle_gets_no_vector_its_predecessor_held(tmp_path, monkeypatch, tiny_encoder_dir):
    monkeypatch.setenv("BABELINK_HOME", str(tmp_path / "home"))
    builder = KnowledgeBaseBuilder()
    for concept_id, name in {"C1": "Asthma", "C2": "Diabetes mellitus", "C3": "Hypertension"}.items():
        builder.add_name(concept_id, name, preferred=True)
    bundle = load_bundle(build_bundle(builder.build(), tmp_path / "lazy", encoder=tiny_encoder_dir,
                                      dense_params=DenseParams(kind="lazy")))
    linker = Linker(bundle)
    linker.normalize(["asthma", "diabetes"])  # names encoded and held, not yet saved
    emptied = report.emptied_store(bundle)
    del bundle, linker
    gc.collect()  # the first bundle's store is released: it must have nothing left to write
    assert len(emptied.dense.store) == 0
    assert load_bundle(emptied.path).dense.encoded() == 0
