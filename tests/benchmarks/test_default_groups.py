"""`benchmarks/default_groups.py` reads Mantra GSC's annotator notes into gold groups per MeSH heading."""

from support import benchmark_script

default_groups = benchmark_script("default_groups")

ANN = """\
T1\tC0030705 0 8\tpatients
#1\tAnnotatorNotes T1\t"C0030705", "Patients", "Patient or Disabled Group" ,"LIVB"
T2\tC0011849 13 21\tdiabetes
#2\tAnnotatorNotes T2\t"C0011849", "Diabetes Mellitus", "Disease or Syndrome" ,"DISO"
T3\tC0037494 30 36\tsodium
#3\tAnnotatorNotes T3\t"C0037494", "Sodium, Dietary", "Food|Element, Ion, or Isotope" ,"OBJC|CHEM"
T4\tC0036375 40 47\tschools
#4\tAnnotatorNotes T4\t"C0036375", "Schools", "Manufactured Object"
T5\tC0036376 50 60\tpublication
#5\tAnnotatorNotes T5\t"C0034036", "Publications", "Manufactured Object", "Manufactured Object"
T6\tC9999999 61 65\tnone
#6\tAnnotatorNotes T6\t"C9999999", "Not A Heading", "Finding" ,"DISO"
"""


def test_mantra_notes_give_each_heading_the_groups_annotators_noted(tmp_path):
    (tmp_path / "bench" / "mantra_gsc" / "English").mkdir(parents=True)
    (tmp_path / "bench" / "mantra_gsc" / "English" / "doc.ann").write_text(ANN, encoding="utf-8")
    headings = {"D010361": "Patients", "D003920": "Diabetes Mellitus", "D017673": "Sodium, Dietary",
                "D012574": "Schools", "D011642": "Publications"}
    labels = default_groups.mantra_labels(tmp_path, headings)
    # a group that is a semantic type's name, or none at all, is no label; several groups are all kept
    assert labels == {"D010361": {"LIVB"}, "D003920": {"DISO"}, "D017673": {"OBJC", "CHEM"}}
