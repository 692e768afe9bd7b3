"""Language codes: ISO 639-1 inside babelink, UMLS `LAT` codes accepted wherever a user types one."""

from __future__ import annotations

# UMLS MRCONSO `LAT` → ISO 639-1 (https://www.nlm.nih.gov/research/umls/knowledge_sources/metathesaurus/release/abbreviations.html).
UMLS_TO_ISO = {
    "ARA": "ar", "BAQ": "eu", "CHI": "zh", "CZE": "cs", "DAN": "da", "DUT": "nl", "ENG": "en",
    "EST": "et", "FIN": "fi", "FRE": "fr", "GER": "de", "GRE": "el", "HEB": "he", "HRV": "hr",
    "HUN": "hu", "ITA": "it", "JPN": "ja", "KOR": "ko", "LAV": "lv", "LIT": "lt", "NOR": "no",
    "POL": "pl", "POR": "pt", "RUS": "ru", "SCR": "hr", "SLO": "sk", "SPA": "es", "SWE": "sv",
    "THA": "th", "TUR": "tr", "UKR": "uk", "VIE": "vi", "PER": "fa", "HIN": "hi", "BUL": "bg",
    "RUM": "ro", "SLV": "sl", "SRP": "sr", "GLE": "ga", "ICE": "is", "MAY": "ms", "IND": "id",
}


def to_iso(code: str) -> str:
    """Map a UMLS `LAT`, ISO 639-1 or ISO 639-2/3 code to babelink's lower-case form."""
    cleaned = code.strip()
    return UMLS_TO_ISO.get(cleaned.upper(), cleaned.lower())


def parse_languages(codes: list[str] | tuple[str, ...] | None) -> frozenset[str] | None:
    """`--lang es --lang ENG` or `--lang es,en` → {"es", "en"}; None or empty means every language."""
    if not codes:
        return None
    return frozenset(to_iso(part) for code in codes for part in code.split(",") if part.strip())
