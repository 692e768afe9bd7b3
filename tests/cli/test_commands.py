"""The CLI as users run it: a real subprocess, exit codes, one-line errors, output files."""

import json

import pytest
from support import MRCONSO, babelink


def test_normalize_arguments_to_jsonl(bundle):
    result = babelink("normalize", "--bundle", bundle, "infarto de miocardio", "asthma", "--top-k", "2")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["mention"] for r in records] == ["infarto de miocardio", "asthma"]
    best = records[0]["candidates"][0]
    assert 0.0 <= best.pop("probability") <= 1.0
    assert best == {
        "id": "C0027051",
        "name": "Myocardial Infarction",
        "matched_name": "Infarto de miocardio",
        "score": 1.0,
        "codes": {"UMLS": "C0027051", "MESH": "D009203", "MSHSPA": "D009203"},  # from MRCONSO's SAB and CODE
    }
    assert all(len(r["candidates"]) <= 2 for r in records)


def test_normalize_file_contract_keeps_order(bundle, tmp_path):
    mentions = ["asthma", "diabetes melitus", "asthma", "myocardial infarct"]
    (tmp_path / "mentions.txt").write_text("\n".join(mentions) + "\n")
    result = babelink(
        "normalize",
        "--bundle",
        bundle,
        "--input",
        tmp_path / "mentions.txt",
        "--output",
        tmp_path / "out.jsonl",
        "--top-k",
        "1",
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["mention"] for r in records] == mentions
    assert [r["candidates"][0]["id"] for r in records] == ["C0004096", "C0011849", "C0004096", "C0027051"]


def test_normalize_stdin_to_tsv(bundle):
    result = babelink("normalize", "--bundle", bundle, "--input", "-", "--format", "tsv", "-k", "1", stdin="asthma\n")
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()[0].split("\t"), result.stdout.splitlines()[1].split("\t")
    assert row[:3] == ["asthma", "1", "C0004096"] and header[-2:] == ["score", "probability"]
    assert 0.0 <= float(row[-1]) <= 1.0  # the calibrated probability JSON gives
    nil = babelink("normalize", "--bundle", bundle, "--input", "-", "--format", "tsv", "-k", "1",
                   "--min-probability", "0.5", stdin="zqxj\tvwk\nasthma\n")
    assert nil.returncode == 0, nil.stderr
    rows = [line.split("\t") for line in nil.stdout.splitlines()[1:]]  # one per mention, its tab escaped
    assert [row[0] for row in rows] == ["zqxj\\tvwk", "asthma"] and rows[0][1:] == [""] * 6 and rows[1][1] == "1"


def test_codes_keeps_the_vocabularies_asked_for_in_their_order(bundle):
    tsv = babelink("normalize", "--bundle", bundle, "infarto de miocardio", "-k", "1", "--format", "tsv",
                   "--codes", "MSH,UMLS")
    assert tsv.returncode == 0, tsv.stderr
    header, row = (line.split("\t") for line in tsv.stdout.splitlines())
    assert header[-2:] == ["MESH", "UMLS"] and row[2] == "C0027051" and row[-2:] == ["D009203", "C0027051"]
    linked = babelink("link", "--bundle", bundle, "asthma and myocardial infarction", "--codes", "MSH")
    assert linked.returncode == 0, linked.stderr
    mentions = json.loads(linked.stdout)["mentions"]
    assert mentions and all(set(m.get("codes", {})) <= {"MESH"} for m in mentions)  # UMLS's SAB MSH is MeSH
    assert any(m.get("codes") == {"MESH": "D009203"} for m in mentions)
    unknown = babelink("normalize", "--bundle", bundle, "asthma", "--codes", "ICD-10")
    assert unknown.returncode != 0 and "ICD10" in unknown.stderr and "MESH" in unknown.stderr  # ICD-10 is ICD10
    assert "Traceback" not in unknown.stderr
    empty = babelink("normalize", "--bundle", bundle, "asthma", "--codes", " , ")
    assert empty.returncode != 0 and "no vocabulary named" in empty.stderr and "Traceback" not in empty.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["normalize", "--bundle", "{bundle}", ""], None, "<arguments>:1: mention '' is empty"),
        (["normalize", "--bundle", "{bundle}", "asthma", "--output", "{tmp}"], None, "is a directory; name a file"),
        (["normalize", "--bundle", "{bundle}", "x" * 100_000], None, "exceeds the 1,000-character limit"),
        (
            ["normalize", "--bundle", "{bundle}", "--input", "-"],
            "asthma\n" + "x" * 1_000_000,
            "exceeds the 1,000-character limit",
        ),
        (["normalize", "--bundle", "{tmp}/missing", "asthma"], None, "no such bundle directory"),
        (["normalize", "--bundle", "{bundle}", "--input", "{tmp}/absent.txt"], None, "absent.txt: no such file"),
        (["normalize", "--bundle", "{bundle}", "--input", "-"], "asthma\n\nfever\n", "<stdin>:2: mention '' is empty"),
        (["build", "--kb", "{tmp}/bad.RRF", "--out", "{tmp}/b"], None, "bad.RRF:1: invalid UTF-8"),
        (["build", "--kb", "{tmp}/absent.RRF", "--out", "{tmp}/b"], None, "absent.RRF: no such file"),
        (
            ["build", "--kb", "{tmp}/ok.RRF", "--out", "{tmp}/b", "--encoder", "{tmp}/no-model"],
            None,
            "no-model: not a transformers checkpoint directory",
        ),
        (
            [
                "build",
                "--kb",
                "{tmp}/ok.RRF",
                "--out",
                "{tmp}/b",
                "--retriever",
                "sparse",
                "--spans-from",
                "{tmp}/absent",
            ],
            None,
            "absent: no such file or directory",
        ),
    ],
)
def test_bad_input_gives_one_line_error_and_nonzero_exit(bundle, tmp_path, args, stdin, message):
    (tmp_path / "bad.RRF").write_bytes(b"C1|ENG|P|L|PF|S|Y|A||||MSH|MH|D1|caf\xe9|0|N||\n")
    (tmp_path / "ok.RRF").write_text(MRCONSO)
    args = [a.format(bundle=bundle, tmp=tmp_path) for a in args]
    result = babelink(*args, stdin=stdin)
    assert result.returncode == 1
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_failed_run_leaves_no_partial_output(bundle, tmp_path):
    (tmp_path / "mentions.txt").write_text("asthma\n\n")
    result = babelink(
        "normalize", "--bundle", bundle, "--input", tmp_path / "mentions.txt", "--output", tmp_path / "out.jsonl"
    )
    assert result.returncode == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mentions.txt"]


def test_corrupt_bundle_is_reported(bundle, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    (copy / "names" / "strings.parquet").write_bytes(b"garbage")
    result = babelink("normalize", "--bundle", copy, "asthma")
    assert result.returncode == 1 and "strings.parquet is 7 bytes, the manifest says" in result.stderr
    assert "Traceback" not in result.stderr


TRAIN = """\
1|t|Heart attack in MI patients
1|a|No DM.
1\t0\t12\tHeart attack\tDisease\tC0027051
1\t16\t18\tMI\tDisease\tC0027051
1\t31\t33\tDM\tDisease\tC0011849

2|t|Asthma
2|a|BA
2\t0\t6\tAsthma\tDisease\tC0004096
2\t7\t9\tBA\tDisease\tC0004096

"""


def test_build_hybrid_with_spans_and_dft_then_normalize(tmp_path, tiny_encoder_dir):
    (tmp_path / "MRCONSO.RRF").write_text(MRCONSO)
    (tmp_path / "train.pubtator").write_text(TRAIN)
    out = tmp_path / "bundle"
    result = babelink("build", "--kb", tmp_path / "MRCONSO.RRF", "--kb-format", "umls", "--out", out,
                      "--encoder", tiny_encoder_dir, "--pooling", "mean", "--spans-from", tmp_path / "train.pubtator",
                      "--dft-from", tmp_path / "train.pubtator", "--dft-ratio", "0.5")
    assert result.returncode == 0, result.stderr
    assert (
        "hybrid retriever" in result.stderr
        and "labeled spans" in result.stderr
        and "DFT names from 1 documents" in result.stderr
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dense"]["encoder"]["pooling"] == "mean" and manifest["dft"]["documents"] == 1
    result = babelink("normalize", "--bundle", out, "BA", "diabetes", "-k", "2")
    assert result.returncode == 0, result.stderr
    ba, diabetes = [json.loads(line)["candidates"] for line in result.stdout.splitlines()]
    assert ba[0]["index"] == "spans" and ba[0]["id"] == "C0004096"
    assert diabetes[0]["id"] == "C0011849" and {"sparse_score", "dense_score"} <= set(diabetes[0])


def test_train_sap_output_is_an_encoder_build_accepts(tmp_path, tiny_encoder_dir):
    (tmp_path / "MRCONSO.RRF").write_text(
        MRCONSO + "C0011849|SPA|P|L9|PF|S9|Y|A9||||MSHSPA|MH|D003920|Diabetes mellitus tipo|0|N||\n"
    )
    (tmp_path / "en-es.tsv").write_text("fever\tfiebre\nheart\tcorazón\nasthma\tasma\n")
    out = tmp_path / "sap"
    result = babelink("train", "sap", "--kb", tmp_path / "MRCONSO.RRF", "--pairs", tmp_path / "en-es.tsv",
                      "--init", tiny_encoder_dir, "--out", out, "--max-steps", "2", "--batch-pairs", "2")
    assert result.returncode == 0, result.stderr
    assert "training on 5 positive pairs, 2 steps" in result.stderr
    assert json.loads((out / "sap_config.json").read_text())["steps"] == 2
    result = babelink("build", "--kb", tmp_path / "MRCONSO.RRF", "--out", tmp_path / "bundle", "--encoder", out,
                      "--ef-search", "300")
    assert result.returncode == 0, result.stderr
    assert f"with encoder {out} (32-d, precision auto, hnsw index)" in result.stderr
    assert json.loads((tmp_path / "bundle" / "manifest.json").read_text())["dense"]["index"]["ef_search"] == 300
    result = babelink("train", "sap", "--out", out)
    assert result.returncode == 1 and "give --kb" in result.stderr
    result = babelink("train", "sap", "--kb", tmp_path / "MRCONSO.RRF", "--synonyms", "none", "--pairs",
                      tmp_path / "en-es.tsv", "--init", out, "--out", tmp_path / "continued", "--max-steps", "1",
                      "--batch-pairs", "2")
    assert result.returncode == 0, result.stderr
    assert "training on 3 positive pairs" in result.stderr, "translation pairs alone: 001 §2.2 continued training"


def test_train_sap_task_fine_tuning_keeps_the_best_dev_checkpoint(tmp_path, tiny_encoder_dir, shared_data):
    out = tmp_path / "ncbi"
    result = babelink(
        "train",
        "sap",
        "--kb",
        shared_data / "kb" / "ctd-medic" / "CTD_diseases.tsv.gz",
        "--mentions-from",
        shared_data / "bench" / "ncbi_disease" / "NCBItrainset_corpus.txt",
        "--init",
        tiny_encoder_dir,
        "--out",
        out,
        "--max-steps",
        "2",
        "--batch-pairs",
        "4",
        "--eval",
        "ncbi-dev",
        "--eval-data",
        shared_data,
        "--eval-every",
        "1",
        "--eval-distractors",
        "100",
    )
    assert result.returncode == 0, result.stderr
    assert "best ncbi-dev Acc@1" in result.stderr
    record = json.loads((out / "sap_config.json").read_text())
    assert [step for step, _ in record["evaluations"]] == [0, 1, 2][: len(record["evaluations"])]
    result = babelink("train", "sap", "--pairs", tmp_path / "x.tsv", "--out", out, "--eval", "ncbi-dev")
    assert result.returncode == 1 and "give --kb" in result.stderr


def test_normalize_jsonl_context_resolves_defined_abbreviations(bundle, tmp_path):
    context = "Patients with diabetes mellitus (DM) and asthma. DM was treated."
    lines = [json.dumps({"mention": "DM", "context": context}), json.dumps({"mention": "asthma"}), json.dumps("DM")]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    result = babelink("normalize", "--bundle", bundle, "--input", tmp_path / "in.jsonl", "-k", "1")
    assert result.returncode == 0, result.stderr
    with_context, asthma, bare = [json.loads(line) for line in result.stdout.splitlines()]
    assert (with_context["mention"], with_context["searched"]) == ("DM", "diabetes mellitus")
    assert with_context["candidates"][0]["id"] == "C0011849"
    assert "searched" not in asthma and "searched" not in bare and asthma["candidates"][0]["id"] == "C0004096"
    (tmp_path / "bad.jsonl").write_text(json.dumps({"mention": "DM", "context": 3}) + "\n")
    result = babelink("normalize", "--bundle", bundle, "--input", tmp_path / "bad.jsonl")
    assert (
        result.returncode == 1 and 'bad.jsonl:1: expected a JSON string or an object with a "mention"' in result.stderr
    )


@pytest.mark.parametrize("name", ["in.JSONL", "in.jsonl.gz"])
def test_normalize_reads_jsonl_by_its_suffix_in_any_case_and_gzipped(bundle, tmp_path, name):
    import gzip

    content = (json.dumps({"mention": "DM", "context": "diabetes mellitus (DM)"}) + "\n").encode()
    (tmp_path / name).write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    result = babelink("normalize", "--bundle", bundle, "--input", tmp_path / name, "-k", "1")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert (record["mention"], record["searched"]) == ("DM", "diabetes mellitus")


def test_link_reads_gzipped_jsonl_and_refuses_other_gzipped_inputs(bundle, tmp_path):
    import gzip

    (tmp_path / "in.jsonl.gz").write_bytes(gzip.compress(b'{"id": "a", "text": "She has asthma."}\n'))
    linked = babelink("link", "--bundle", bundle, "--input", tmp_path / "in.jsonl.gz")
    assert linked.returncode == 0 and json.loads(linked.stdout)["id"] == "a", linked.stderr
    (tmp_path / "in.xml.gz").write_bytes(gzip.compress(b"<collection/>"))
    refused = babelink("link", "--bundle", bundle, "--input", tmp_path / "in.xml.gz")
    assert refused.returncode == 1 and "read as JSONL only" in refused.stderr and "Traceback" not in refused.stderr


def test_top_k_beyond_the_cap_is_a_clear_error(bundle):
    result = babelink("normalize", "--bundle", bundle, "asthma", "--top-k", "1000000000")
    assert result.returncode != 0 and "--top-k" in result.stderr and "Traceback" not in result.stderr


def test_an_unusable_mention_is_named_by_its_line_or_skipped(bundle, tmp_path):
    source = tmp_path / "mentions.jsonl"
    source.write_text('"asthma"\n"\\ud800"\n"---"\n""\n"diabetes mellitus"\n')
    result = babelink("normalize", "--bundle", bundle, "--input", source)
    assert result.returncode != 0 and f"{source}:2: mention" in result.stderr and "--skip-invalid" in result.stderr
    result = babelink("normalize", "--bundle", bundle, "--input", source, "--skip-invalid")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r.get("line") for r in records] == [None, 2, 3, 4, None]  # a blank mention is skipped too
    assert records[0]["candidates"] and records[4]["candidates"][0]["id"] == "C0011849"
    assert "not valid Unicode" in records[1]["error"] and "empty after normalisation" in records[2]["error"]
    assert f"{source}:3: skipped" in result.stderr
