"""Language codes: ISO 639-1 inside babelink; UMLS `LAT`, ISO 639-2/3 and locale tags (`pt-BR`,
`zh_CN`) accepted wherever a user types one."""

from __future__ import annotations

import functools
import re

from babelink.errors import InvalidInputError
from babelink.text import comma_list

# UMLS MRCONSO `LAT` → ISO 639-1 (https://www.nlm.nih.gov/research/umls/knowledge_sources/metathesaurus/release/abbreviations.html).
UMLS_TO_ISO = {
    "ARA": "ar", "BAQ": "eu", "CHI": "zh", "CZE": "cs", "DAN": "da", "DUT": "nl", "ENG": "en",
    "EST": "et", "FIN": "fi", "FRE": "fr", "GER": "de", "GRE": "el", "HEB": "he", "HRV": "hr",
    "HUN": "hu", "ITA": "it", "JPN": "ja", "KOR": "ko", "LAV": "lv", "LIT": "lt", "NOR": "no",
    "POL": "pl", "POR": "pt", "RUS": "ru", "SCR": "hr", "SLO": "sk", "SPA": "es", "SWE": "sv",
    "THA": "th", "TUR": "tr", "UKR": "uk", "VIE": "vi", "PER": "fa", "HIN": "hi", "BUL": "bg",
    "RUM": "ro", "SLV": "sl", "SRP": "sr", "GLE": "ga", "ICE": "is", "MAY": "ms", "IND": "id",
}

#: Every ISO 639-1 code: a two-letter code outside it ("zz", "qq") is a typo, not a language.
ISO_639_1 = frozenset({
    "aa", "ab", "ae", "af", "ak", "am", "an", "ar", "as", "av", "ay", "az", "ba", "be", "bg", "bh", "bi", "bm",
    "bn", "bo", "br", "bs", "ca", "ce", "ch", "co", "cr", "cs", "cu", "cv", "cy", "da", "de", "dv", "dz", "ee",
    "el", "en", "eo", "es", "et", "eu", "fa", "ff", "fi", "fj", "fo", "fr", "fy", "ga", "gd", "gl", "gn", "gu",
    "gv", "ha", "he", "hi", "ho", "hr", "ht", "hu", "hy", "hz", "ia", "id", "ie", "ig", "ii", "ik", "io", "is",
    "it", "iu", "ja", "jv", "ka", "kg", "ki", "kj", "kk", "kl", "km", "kn", "ko", "kr", "ks", "ku", "kv", "kw",
    "ky", "la", "lb", "lg", "li", "ln", "lo", "lt", "lu", "lv", "mg", "mh", "mi", "mk", "ml", "mn", "mr", "ms",
    "mt", "my", "na", "nb", "nd", "ne", "ng", "nl", "nn", "no", "nr", "nv", "ny", "oc", "oj", "om", "or", "os",
    "pa", "pi", "pl", "ps", "pt", "qu", "rm", "rn", "ro", "ru", "rw", "sa", "sc", "sd", "se", "sg", "si", "sk",
    "sl", "sm", "sn", "so", "sq", "sr", "ss", "st", "su", "sv", "sw", "ta", "te", "tg", "th", "ti", "tk", "tl",
    "tn", "to", "tr", "ts", "tt", "tw", "ty", "ug", "uk", "ur", "uz", "ve", "vi", "vo", "wa", "wo", "xh", "yi",
    "yo", "za", "zh", "zu"
})
#: Withdrawn ISO 639-1 codes that software still writes (Java's `Locale` gives "iw" and "in").
WITHDRAWN_ISO_639_1 = {"iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro", "sh": "hr"}
#: ISO 639-2's codes for no one language: undetermined, multiple, no linguistic content, uncoded.
UNKNOWN = frozenset({"und", "mul", "zxx", "mis"})
#: A language subtag (2–3 letters) and optionally a region or script (`pt-BR`, `zh_Hans_CN`).
_LANGUAGE_TAG = re.compile(r"([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{2,8})*")


def to_iso(code: str) -> str:
    """Map a UMLS `LAT`, ISO 639-1 or ISO 639-2/3 code, or a locale tag, to babelink's lower-case
    form (the language alone: `pt-BR` → `pt`); anything else is only lower-cased."""
    tag = _LANGUAGE_TAG.fullmatch(code.strip())
    return code.strip().lower() if tag is None else _iso_of(tag)


def _iso_of(tag: re.Match) -> str:
    """A two-letter code stays (withdrawn ones renamed); a three-letter one is UMLS's, or the ISO
    639-1 code of its language or macrolanguage where there is one (`cat` → `ca`, Mandarin `cmn`
    → `zh`, Standard Arabic `arb` → `ar`, by the CLDR data of `langcodes`), else itself."""
    language = tag.group(1).lower()
    if len(language) == 2:
        return WITHDRAWN_ISO_639_1.get(language, language)
    return UMLS_TO_ISO.get(language.upper()) or _two_letters(language)


@functools.cache
def _two_letters(language: str) -> str:
    import langcodes  # 40 ms: only for three-letter codes

    iso = langcodes.standardize_tag(language, macro=True).split("-")[0]
    return iso if len(iso) == 2 else language


def check_language(code: str | None, field: str = "lang") -> str | None:
    """A language a user gave (None, or one of ISO 639-2's `UNKNOWN` codes: guess it) in babelink's
    form, or an error naming `field`: a word such as "english", or a two-letter code no language
    has ("zz"), would otherwise pass as a code babelink has no stop words or lexicon for, and
    change the answer without a word. Three-letter codes are not checked further: ISO 639-3
    names thousands of languages."""
    if code is None:
        return None
    tag = _LANGUAGE_TAG.fullmatch(code.strip()) if isinstance(code, str) else None
    if tag is not None and tag.group(1).lower() in UNKNOWN:
        return None
    iso = None if tag is None else _iso_of(tag)
    if iso is None or (len(iso) == 2 and iso not in ISO_639_1):
        raise InvalidInputError(f"{field}: {code!r} is not a language code (ISO 639-1 such as 'en', "
                                "ISO 639-2/3 or UMLS LAT such as 'ENG', or a locale such as 'pt-BR')")
    return iso


def parse_languages(codes: list[str] | tuple[str, ...] | None, field: str = "--lang") -> frozenset[str] | None:
    """`--lang es --lang ENG` or `--lang es,en` → {"es", "en"}; None, empty or blank (`--langs ""`)
    means every language, as an empty `--types` or `--sources` means every type or source; a part
    that is not a code is an error naming `field` (`check_language`)."""
    return frozenset(check_language(code, field) for code in comma_list(codes)) or None
