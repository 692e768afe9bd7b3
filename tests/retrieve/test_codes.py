"""Codes by vocabulary on every candidate: the concept's own id and its cross-references."""

from babelink.retrieve.candidate import concept_codes


def test_codes_come_from_the_concept_id_and_its_cross_references():
    assert concept_codes("HP:0000822", ["UMLS:C0020538", "SNOMEDCT_US:38341003", "UMLS:C0020538"]) == (
        ("HP", "HP:0000822"), ("UMLS", "C0020538"), ("SNOMEDCT_US", "38341003"))
    assert concept_codes("C0011849", ["MSH:D003920", "ICD10:E11", "ICD-10:E14", "PMID:123"]) == (
        ("UMLS", "C0011849"), ("MESH", "D003920"), ("ICD10", "E11|E14"))
    assert concept_codes("MESH:D003920", ["MSH:D003920"]) == (("MESH", "D003920"),)  # CTD's id, HPO's xref
    assert concept_codes("custom-7", ["no colon"]) == (("ID", "custom-7"),)


def test_an_own_id_is_written_as_its_vocabulary_writes_it_and_as_its_cross_references_are():
    assert concept_codes("ICD10:K40.1", []) == (("ICD10", "K40.1"),)
    assert concept_codes("MESH:D006552", ["ICD-10:K40"]) == (("MESH", "D006552"), ("ICD10", "K40"))
    assert concept_codes("HP:0000822", ["SNOMED_CT:38341003", "SNOMEDCT_US:38341003"]) == (
        ("HP", "HP:0000822"), ("SNOMEDCT_US", "38341003"))
