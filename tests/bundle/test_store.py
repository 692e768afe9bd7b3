import json
import os
import threading
import time

import pytest
from support import babelink

from babelink import text
from babelink.bundle import store
from babelink.bundle.store import MANIFEST, build_bundle, load_bundle
from babelink.errors import BundleError, InvalidInputError
from babelink.fsutil import staging_directory
from babelink.kb.base import KnowledgeBaseBuilder
from babelink.link.documents import LinkParams
from babelink.linker import Linker
from babelink.retrieve.candidate import MAX_TOP_K


@pytest.fixture
def kb():
    builder = KnowledgeBaseBuilder()
    for concept_id, names in {
        "C1": ["Myocardial infarction", "Heart attack", "Infarto de miocardio"],
        "C2": ["Diabetes mellitus", "Diabetes"],
        "C3": ["Asthma", "Asma"],
    }.items():
        for position, name in enumerate(names):
            builder.add_name(concept_id, name, preferred=position == 0, lang="es" if name[-1] in "oa" else "en")
    return builder.build()


def test_round_trip(kb, tmp_path):
    path = build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    bundle = load_bundle(path)
    assert bundle.kb.content_hash() == kb.content_hash()
    assert bundle.manifest["kb"]["concepts"] == 3 and bundle.manifest["retriever"] == "sparse"
    assert bundle.scripts == bundle.manifest["kb"]["scripts"] == {"LATIN": 1.0}  # recorded at build
    linker = Linker(bundle)
    [top] = linker.normalize("infarto de miocardio", top_k=1)
    assert (top.concept_id, top.name, top.matched_name, top.score) == (
        "C1",
        "Myocardial infarction",
        "Infarto de miocardio",
        pytest.approx(1.0),
    )
    assert [[c.concept_id for c in r][:1] for r in linker.normalize(["asthma", "diabetis", "asthma"])] == [
        ["C3"],
        ["C2"],
        ["C3"],
    ]


def test_rebuild_replaces_atomically_and_leaves_no_staging(kb, tmp_path):
    build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


def test_refuses_to_replace_a_non_bundle_directory(kb, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    with pytest.raises(BundleError, match="not a babelink bundle"):
        build_bundle(kb, tmp_path / "data", retriever="sparse")
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me"


def test_a_truncated_or_grown_file_fails_the_load_an_edited_one_fails_verify(kb, tmp_path):
    path = build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    params = path / "sparse" / "tfidf_params.json"
    original = params.read_bytes()
    params.write_bytes(original + b" ")
    with pytest.raises(BundleError, match="tfidf_params.json is .* bytes, the manifest says"):
        load_bundle(path)
    params.write_bytes(original.replace(b"2", b"3", 1))  # same size, other bytes
    load_bundle(path)  # the cheap load does not read every byte
    with pytest.raises(BundleError, match="tfidf_params.json does not match the manifest checksum"):
        load_bundle(path, verify=True)
    result = babelink("verify", "--bundle", path)
    assert result.returncode != 0 and "does not match the manifest checksum" in result.stderr
    params.write_bytes(original)
    assert "every checksum matches" in babelink("verify", "--bundle", path).stdout


def test_a_bundle_without_recorded_sizes_is_checked_by_checksum(kb, tmp_path):
    path = build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    manifest = json.loads((path / MANIFEST).read_text())
    del manifest["sizes"]
    (path / MANIFEST).write_text(json.dumps(manifest))
    with open(path / "sparse" / "tfidf_params.json", "a") as stream:
        stream.write(" ")
    with pytest.raises(BundleError, match="does not match the manifest checksum"):
        load_bundle(path)


def test_count_mismatch_is_an_error(kb, tmp_path):
    path = build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["kb"]["concepts"] = 4
    (path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="manifest says 4 concepts, the bundle holds 3"):
        load_bundle(path)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: (p / MANIFEST).unlink(), "not a babelink bundle"),
        (lambda p: (p / MANIFEST).write_text("{broken"), "unreadable manifest"),
        (lambda p: (p / "kb" / "names.parquet").unlink(), "kb/names.parquet listed in the manifest is missing"),
        (lambda p: (p / MANIFEST).write_text('{"format_version": 99}'), "bundle format 99"),
    ],
)
def test_unreadable_bundles(kb, tmp_path, damage, message):
    path = build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    damage(path)
    with pytest.raises(BundleError, match=message):
        load_bundle(path)


def test_missing_bundle_directory(tmp_path):
    with pytest.raises(BundleError, match="no such bundle directory"):
        Linker.open(tmp_path / "nowhere")
    (tmp_path / "kb.tsv").write_text("id\tname\nC1\tasthma\n")
    with pytest.raises(BundleError, match="kb.tsv: a file, not a bundle directory"):
        Linker.open(tmp_path / "kb.tsv")


def test_a_damaged_file_of_the_right_size_names_its_part_of_the_bundle(kb, tmp_path):
    path = build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    damaged = next((path / "names").glob("*.parquet"))
    damaged.write_bytes(bytes(damaged.stat().st_size))  # a load checks sizes only: `verify` would catch it
    with pytest.raises(BundleError, match=f"{path / 'names'}: cannot load this part of the bundle"):
        load_bundle(path)


def test_bad_mentions_raise_specific_errors(kb, tmp_path):
    linker = Linker(load_bundle(build_bundle(kb, tmp_path / "bundle", retriever="sparse")))
    with pytest.raises(InvalidInputError, match="mentions must be a string or a list of strings, got NoneType"):
        linker.normalize(None)
    with pytest.raises(InvalidInputError, match="got bytes"):
        linker.normalize(b"fever")
    with pytest.raises(InvalidInputError, match="empty"):
        linker.normalize("")
    with pytest.raises(InvalidInputError, match="exceeds"):
        linker.normalize("x" * 1_000_000)
    for top_k in (0, MAX_TOP_K + 1, 1_000_000_000, 2.5):
        with pytest.raises(InvalidInputError, match=f"top_k must be an integer from 1 to {MAX_TOP_K}"):
            linker.normalize("asthma", top_k=top_k)
    assert len(linker.normalize("asthma", top_k=MAX_TOP_K)) >= 1
    with pytest.raises(InvalidInputError, match="top_k"):
        LinkParams(top_k=10**9)


def test_empty_kb_is_refused(tmp_path):
    with pytest.raises(Exception, match="no concepts"):
        build_bundle(KnowledgeBaseBuilder().build(), tmp_path / "bundle", retriever="sparse")


@pytest.mark.parametrize("damage", ["manifest without kb", "unlisted file", "unlisted truncated npz"])
def test_bundle_damage_outside_the_checksums_is_reported(kb, tmp_path, damage):
    path = build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    manifest = json.loads((path / MANIFEST).read_text())
    if damage == "manifest without kb":
        del manifest["kb"]
    elif damage == "unlisted file":
        (path / "names" / "extra.parquet").write_bytes(b"stray")
    else:
        npz = next(name for name in manifest["files"] if name.endswith(".npz"))
        del manifest["files"][npz]
        (path / npz).write_bytes((path / npz).read_bytes()[:100])
    (path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="is missing or malformed|is not in the manifest"):
        load_bundle(path)


def _kb_of(names: dict[str, str]):
    builder = KnowledgeBaseBuilder()
    for concept_id, name in names.items():
        builder.add_name(concept_id, name)
    return builder.build()


def test_loads_during_in_place_rebuilds_see_one_build(tmp_path):
    """Two KBs whose rows differ: a load that mixed their files would give "fever" another concept."""
    builds = [_kb_of({"A1": "fever", "A2": "nausea"}), _kb_of({"B1": "nausea", "B2": "fever", "B3": "asthma"})]
    path = build_bundle(builds[0], tmp_path / "bundle", retriever="sparse")
    stop, rebuilt = threading.Event(), []

    def rebuild():
        while not stop.is_set():
            build_bundle(builds[len(rebuilt) % 2], path, retriever="sparse")
            rebuilt.append(True)
            time.sleep(0.1)  # rebuilds minutes apart in real use; here often enough to overlap loads

    thread = threading.Thread(target=rebuild)
    thread.start()
    try:
        while len(rebuilt) < 8:  # loads overlap several rebuilds
            bundle = load_bundle(path)
            top = Linker(bundle).normalize("fever", top_k=1)[0]
            assert (top.concept_id, top.matched_name) == (("A1" if len(bundle.kb) == 2 else "B2"), "fever")
    finally:
        stop.set()
        thread.join()


def test_a_build_removes_what_killed_builds_left_behind(kb, tmp_path):
    dead = 2**22 + 12345  # above the default pid_max: no such process
    # the last two: an earlier process with this one's id (containers reuse process ids)
    for leftover in (f".bundle.{dead}.x1y2", f".bundle.old-{dead}", f".bundle.{os.getpid()}.zz",
                     f".bundle.old-{os.getpid()}"):
        (tmp_path / leftover / "kb").mkdir(parents=True)
    running = staging_directory(tmp_path / "bundle")  # a build in progress in this process is left alone
    build_bundle(kb, tmp_path / "bundle", retriever="sparse")
    build_bundle(kb, tmp_path / "bundle", retriever="sparse")  # replacing: its retired directory is its own
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["bundle", running.name])


def test_a_bundle_whose_names_normalise_otherwise_now_loads_and_says_how_many(kb, tmp_path, monkeypatch, capsys):
    builder = KnowledgeBaseBuilder()
    builder.add_name("C9", "Hyper\u00adtension", preferred=True, lang="en")  # a soft hyphen, removed since revision 2
    builder.add_name("C9", "High blood pressure", lang="en")
    path = build_bundle(builder.build(), tmp_path / "bundle", retriever="sparse")
    assert json.loads((path / MANIFEST).read_text())["name_normalization"] == text.NAME_NORMALIZATION
    load_bundle(path)
    assert capsys.readouterr().err == ""  # built by this babelink: nothing to say, nothing re-normalised

    # the same bundle read by a babelink that normalises the soft hyphen otherwise (keeps it)
    monkeypatch.setattr(store, "NAME_NORMALIZATION", text.NAME_NORMALIZATION + 1)
    monkeypatch.setattr(store, "normalize_name", lambda name: " ".join(name.casefold().split()))
    bundle = load_bundle(path)
    warning = capsys.readouterr().err
    assert "1 of 2 name strings normalise otherwise" in warning and "'Hyper\\xadtension'" in warning
    assert "rebuild the bundle" in warning and str(path) in warning
    assert len(bundle.names) == 2  # still usable

    # a bundle from before bundles recorded their normalisation counts as revision 1
    manifest = json.loads((path / MANIFEST).read_text())
    del manifest["name_normalization"]
    (path / MANIFEST).write_text(json.dumps(manifest))
    monkeypatch.undo()
    load_bundle(path)
    assert capsys.readouterr().err == ""  # and every string normalises now as it did then


def test_a_bundle_links_at_the_thresholds_its_build_recorded_unless_told_otherwise(kb, tmp_path):
    """Another encoder's cosines are on their own scale: the thresholds chosen on dev for it travel
    with the bundle (`build --link-threshold`), through an update too."""
    from babelink.bundle.update import update_bundle
    from babelink.kb.base import KnowledgeBaseBuilder

    path = build_bundle(kb, tmp_path / "b", retriever="sparse", link_thresholds={"link_threshold": 0.7})
    assert load_bundle(path).manifest["link"] == {"link_threshold": 0.7}
    assert Linker.open(path).link_params == LinkParams(link_threshold=0.7)
    assert Linker(load_bundle(path)).link_params.link_threshold == 0.7
    assert Linker.open(path, link_threshold=0.9, recall_threshold=0.4).link_params == LinkParams(
        link_threshold=0.9, recall_threshold=0.4)
    # the misspelt phrase reaches 0.7 as a whole; at 0.98 only the exact name inside it does
    assert [m.text for m in Linker.open(path).link("Diabetes melitus.").mentions] == ["Diabetes melitus"]
    assert [m.text for m in Linker.open(path, link_threshold=0.98).link("Diabetes melitus.").mentions] == ["Diabetes"]
    assert Linker.open(build_bundle(kb, tmp_path / "plain", retriever="sparse")).link_params == LinkParams()

    more = KnowledgeBaseBuilder()
    more.add_name("C4", "Fever", preferred=True, lang="en")
    update_bundle(path, more.build())
    assert load_bundle(path).manifest["link"] == {"link_threshold": 0.7}
    with pytest.raises(store.BabelinkError, match="'min_probability' is not one a bundle records"):
        build_bundle(kb, tmp_path / "c", retriever="sparse", link_thresholds={"min_probability": 0.5})
    with pytest.raises(store.BabelinkError, match="link_threshold must be between 0 and 1, got 1.5"):
        build_bundle(kb, tmp_path / "c", retriever="sparse", link_thresholds={"link_threshold": 1.5})
