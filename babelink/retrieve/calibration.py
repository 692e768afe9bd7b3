"""Calibrated probabilities: how likely a ranked candidate is the right concept.

A raw cosine means different things in different languages: cross-lingual cosines of correct
pairs sit where monolingual wrong pairs sit, so one threshold cannot decide for every language
(issue 18; 002 §6.2 thresholds). The keep/drop decision of 000 §4.4 is learned instead, here from
features of the ranking rather than from the text: a logistic regression maps a candidate's
scores, its margins to its neighbours, whether a rendering or the labeled-span index found it,
whether it matched a KB name exactly, the mention's length and whether the KB has names in the
mention's script, to the probability that it is correct. Two models share the features:
`normalize` (is this concept the mention's?) and `link` (is this span a mention of this concept?).
They are plain coefficients in JSON, trained by `benchmarks/calibrate.py` on dev data of several
languages, shipped with babelink and replaceable per bundle.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np

from babelink.errors import BundleError, InvalidInputError
from babelink.retrieve.candidate import Candidate
from babelink.text import script_of

#: Knots of the score's hinge features `max(0, score − k)`: the logit is piecewise linear in the
#: score, so the model can be as sharp near 1.0, where cosines of right and wrong concepts crowd, as
#: a threshold is.
SCORE_KNOTS = (0.85, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995)
FEATURES = ("score", *(f"score_above_{knot}" for knot in SCORE_KNOTS), "gap_to_best", "margin_to_next", "is_best",
            "dense", "sparse", "translated", "spans", "exact", "log_length", "kb_script_share")
KINDS = ("normalize", "link")
#: Candidates beyond the last one asked for that are searched for the features' sake: the last
#: candidate's `margin_to_next` reads the score after it, so a candidate's probability does not
#: depend on how many candidates a caller asks for.
LOOKAHEAD = 1


def ranking_depth(top_k: int, calibration: Calibration | None) -> int:
    """Candidates to rank for `top_k` answers: `LOOKAHEAD` more where they will be calibrated."""
    return top_k if calibration is None else top_k + LOOKAHEAD
#: The shipped calibrator (a package resource), and a bundle's own under the same name.
CALIBRATION_FILE = "calibration.json"
#: A packaged trained encoder's calibrator: `babelink/encoders/trained/<name><suffix>`.
SHIPPED_SUFFIX = ".calibration.json"


def check_probability(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"min_probability must be a number within [0, 1], got {value!r}")
    return value


def script_shares(strings: Iterable[str]) -> dict[str, float]:
    """Share of name strings written in each script: whether the KB can match a mention's
    script directly, or only across scripts."""
    counts = Counter(script_of(string) for string in strings)
    total = sum(counts.values()) or 1
    return {script: count / total for script, count in counts.items()}


def candidate_features(normalized: str, candidates: Sequence[Candidate], shares: dict[str, float]) -> np.ndarray:
    """One row of `FEATURES` per candidate (best first, as ranked)."""
    scores = [candidate.score for candidate in candidates]
    length = math.log1p(len(normalized.split()) if " " in normalized else len(normalized) / 4)
    share = shares.get(script_of(normalized), 0.0)
    rows = []
    for position, candidate in enumerate(candidates):
        after = scores[position + 1] if position + 1 < len(scores) else 0.0
        rows.append((
            candidate.score,
            *(max(0.0, candidate.score - knot) for knot in SCORE_KNOTS),
            scores[0] - candidate.score,
            candidate.score - after,
            float(position == 0),
            candidate.score if candidate.dense_score is None else candidate.dense_score,
            candidate.score if candidate.sparse_score is None else candidate.sparse_score,
            float(candidate.translated is not None),
            float(candidate.index == "spans"),
            float(candidate.matched_string == normalized),
            length,
            share,
        ))
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))


@dataclass(frozen=True)
class Model:
    """Standardised logistic regression: `p = σ(w · (x − mean) / scale + b)`."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        logits = ((features - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(self.weights) + self.bias
        return 1.0 / (1.0 + np.exp(-logits))

    @classmethod
    def fit(cls, features: np.ndarray, labels: np.ndarray, regularization: float = 1.0) -> Model:
        from sklearn.linear_model import LogisticRegression

        mean = features.mean(axis=0)
        scale = features.std(axis=0)
        scale[scale == 0] = 1.0
        regression = LogisticRegression(C=regularization, max_iter=1000).fit((features - mean) / scale, labels)
        return cls(tuple(mean.tolist()), tuple(scale.tolist()), tuple(regression.coef_[0].tolist()),
                   float(regression.intercept_[0]))


@dataclass(frozen=True)
class Calibration:
    """A calibrator bound to one bundle's names (their script shares)."""

    calibrator: Calibrator
    shares: dict[str, float]

    def annotate(self, kind: str, normalized: str, candidates: Sequence[Candidate]) -> list[Candidate]:
        return self.calibrator.annotate(kind, normalized, candidates, self.shares)


@dataclass(frozen=True)
class Calibrator:
    """The `normalize` and `link` models and what they were trained on."""

    models: dict[str, Model]
    trained_on: dict

    def probabilities(self, kind: str, normalized: str, candidates: Sequence[Candidate],
                      shares: dict[str, float]) -> list[float]:
        if not candidates:
            return []
        return self.models[kind].probabilities(candidate_features(normalized, candidates, shares)).tolist()

    def annotate(self, kind: str, normalized: str, candidates: Sequence[Candidate],
                 shares: dict[str, float]) -> list[Candidate]:
        """The candidates with their `probability` set."""
        return [replace(candidate, probability=probability)
                for candidate, probability in zip(candidates, self.probabilities(kind, normalized, candidates, shares))]

    def to_dict(self) -> dict:
        return {"features": list(FEATURES), "trained_on": self.trained_on,
                "models": {kind: model.__dict__ for kind, model in self.models.items()}}

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def shipped(cls, encoder: str | None = None) -> Calibrator:
        """The calibrator shipped for bundles encoded by `encoder`: a packaged trained encoder's own
        (`trained/NAME.calibration.json` beside it), fitted on its scores, whose cosines lie
        elsewhere than the bundled e5's; else babelink's, fitted on the bundled e5's."""
        from babelink.encoders.artefacts import packaged

        artefact = packaged().get(str(encoder))  # a checkpoint directory's path names none
        own = artefact.with_name(f"{encoder}{SHIPPED_SUFFIX}") if artefact is not None else None
        return cls.load(own if own is not None and own.is_file() else None)

    @classmethod
    def load(cls, path: Path | None = None) -> Calibrator:
        """A calibrator file, or the one shipped with babelink (None)."""
        try:
            text = (path.read_text(encoding="utf-8") if path is not None
                    else resources.files("babelink.retrieve").joinpath(CALIBRATION_FILE).read_text(encoding="utf-8"))
            fields = json.loads(text)
            if fields["features"] != list(FEATURES):
                raise ValueError(f"features {fields['features']} are not this babelink's {list(FEATURES)}")
            models = {kind: Model(**{key: tuple(value) if isinstance(value, list) else value
                                     for key, value in fields["models"][kind].items()}) for kind in KINDS}
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise BundleError(f"{path or CALIBRATION_FILE}: unusable calibrator: {error}") from None
        return cls(models, fields.get("trained_on", {}))
