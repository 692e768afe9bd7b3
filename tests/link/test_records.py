from babelink.link.records import tsv_header, tsv_rows
from babelink.retrieve.candidate import Candidate


def test_a_tsv_row_stays_one_row_of_its_columns_whatever_the_mention_holds():
    candidate = Candidate("X:1", "Head\\ache", "Head ache", 0.5, probability=0.25, codes=(("X", "X:1"),))
    rows = tsv_rows("head\tache\r\nnow", [candidate], ["X"])
    assert rows.count("\n") == 1
    cells = rows.rstrip("\n").split("\t")
    assert len(cells) == len(tsv_header(["X"]).split("\t"))
    assert cells == ["head\\tache\\r\\nnow", "1", "X:1", "Head\\\\ache", "Head ache", "0.500000", "0.2500", "X:1"]


def test_a_mention_without_candidates_keeps_its_row():
    rows = tsv_rows("xqzt \udc80", [], ["X", "UMLS"])
    assert rows.split("\t") == ["xqzt \\udc80", "", "", "", "", "", "", "", "\n"]
    rows.encode("utf-8")
