from babelink.abbreviations import abbreviation_map, expand_abbreviations

TEXT = ("Duchenne muscular dystrophy (DMD) is X-linked. Primary hyperparathyroidism (HPT) and the "
        "hyperparathyroidism-jaw tumour (HPT-JT) syndrome were seen; DMD patients had no HPT.")


def test_defined_short_forms_are_found():
    assert abbreviation_map(TEXT) == {"DMD": "Duchenne muscular dystrophy", "HPT": "hyperparathyroidism",
                                      "HPT-JT": "hyperparathyroidism-jaw tumour"}
    assert abbreviation_map("no definitions here") == {}


def test_whole_token_short_forms_are_expanded():
    abbreviations = abbreviation_map(TEXT)
    assert expand_abbreviations("DMD", abbreviations) == "Duchenne muscular dystrophy"
    assert expand_abbreviations("primary HPT", abbreviations) == "primary hyperparathyroidism"
    assert expand_abbreviations("HPT-JT syndrome", abbreviations) == "hyperparathyroidism-jaw tumour syndrome"
    assert expand_abbreviations("DMDX and sHPT", abbreviations) == "DMDX and sHPT"  # not whole tokens
    assert expand_abbreviations("asthma", {}) == "asthma"


def test_importing_the_extractor_leaves_logging_alone():
    import logging
    import subprocess
    import sys

    code = ("import logging; from babelink.abbreviations import abbreviation_map; abbreviation_map('a (b)'); "
            "root = logging.getLogger(); print(len(root.handlers), root.level)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["0", str(logging.WARNING)]
