"""The UMLS Semantic Groups: 15 coarse groups of the 127 semantic types (McCray, Burgun and
Bodenreider 2001, "Aggregating UMLS semantic types for reducing conceptual complexity"; NLM's
SemGroups.txt).

A user asks for disorders, not for the twelve semantic types that make them up, and Mantra GSC
and QUAERO annotate by group. `--types DISO` therefore means the group on every KB: on a UMLS
bundle it stands for the group's semantic types (`expand_groups`); the embedded default, which has
no semantic types, carries the groups themselves (`kb.default.groups`).
"""

from __future__ import annotations

from collections.abc import Collection

#: Group code → (name, its semantic types' TUIs).
SEMANTIC_GROUPS: dict[str, tuple[str, frozenset[str]]] = {
    code: (name, frozenset(tuis.split()))
    for code, name, tuis in (
        ("ACTI", "Activities & Behaviors", "T051 T052 T053 T054 T055 T056 T057 T064 T066"),
        ("ANAT", "Anatomy", "T017 T018 T021 T022 T023 T024 T025 T026 T029 T030 T031"),
        ("CHEM", "Chemicals & Drugs",
         "T103 T104 T109 T114 T116 T120 T121 T122 T123 T125 T126 T127 T129 T130 T131 T192 T195 T196 T197 T200"),
        ("CONC", "Concepts & Ideas", "T077 T078 T079 T080 T081 T082 T089 T102 T169 T170 T171 T185"),
        ("DEVI", "Devices", "T074 T075 T203"),
        ("DISO", "Disorders", "T019 T020 T033 T037 T046 T047 T048 T049 T050 T184 T190 T191"),
        ("GENE", "Genes & Molecular Sequences", "T028 T085 T086 T087 T088"),
        ("GEOG", "Geographic Areas", "T083"),
        ("LIVB", "Living Beings",
         "T001 T002 T004 T005 T007 T008 T010 T011 T012 T013 T014 T015 T016 T096 T097 T098 T099 T100 T101 T194 T204"),
        ("OBJC", "Objects", "T071 T072 T073 T167 T168"),
        ("OCCU", "Occupations", "T090 T091"),
        ("ORGA", "Organizations", "T092 T093 T094 T095"),
        ("PHEN", "Phenomena", "T034 T038 T067 T068 T069 T070"),
        ("PHYS", "Physiology", "T032 T039 T040 T041 T042 T043 T044 T045 T201"),
        ("PROC", "Procedures", "T058 T059 T060 T061 T062 T063 T065"),
    )
}


def expand_groups(wanted: frozenset[str], known: Collection[str]) -> frozenset[str]:
    """`wanted` types with each group code the KB does not carry itself (`known`: its types) replaced
    by the group's semantic types it does carry; a group neither way stays, to be reported unknown."""
    known, expanded = frozenset(known), set()
    for value in wanted:
        tuis = SEMANTIC_GROUPS[value][1] & known if value in SEMANTIC_GROUPS and value not in known else None
        expanded |= tuis or {value}
    return frozenset(expanded)
