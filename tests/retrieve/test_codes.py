"""Codes by vocabulary on every candidate: the concept's own id and its cross-references."""

from babelink.retrieve.candidate import concept_codes


def test_codes_come_from_the_concept_id_and_its_cross_references():
    assert concept_codes("HP:0000822", ["UMLS:C0020538", "SNOMEDCT_US:38341003", "UMLS:C0020538"]) == (
        ("HP", "HP:0000822"), ("UMLS", "C0020538"), ("SNOMEDCT_US", "38341003"))
    assert concept_codes("C0011849", ["MSH:D003920", "ICD10:E11", "ICD10:E14"]) == (
        ("UMLS", "C0011849"), ("MSH", "D003920"), ("ICD10", "E11|E14"))
    assert concept_codes("custom-7", ["no colon"]) == (("ID", "custom-7"),)
