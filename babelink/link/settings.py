"""A short id of the settings that decide which mentions a linker finds and which concepts it gives
them, beyond its bundle: the link parameters, the name filter, and the detector, contextual filter
or one-pass model it runs (each by its files' fingerprint, wherever it lies).

Every linked document's provenance carries it beside the bundle's id, so two outputs can be told
apart by how they were linked, and a resumed corpus run refuses to append answers given with other
settings to an output that holds some (`corpus.resume`). `--codes` only trims the codes shown and
`--candidates` what a record includes: neither is part of it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from babelink.encoders.transformer import checkpoint_fingerprint

if TYPE_CHECKING:  # `link.documents` and `link.mentions` (which names the key) import this module's users
    from babelink.link.documents import LinkParams
    from babelink.retrieve.filters import NameFilter

#: The provenance key that holds it.
SETTINGS_KEY = "settings"


def settings_id(link_params: LinkParams, *, name_filter: NameFilter | None = None, detector: object = None,
                context_filter: object = None, model: object = None, calibrated: bool = True) -> str:
    """12 hex digits over the settings; `detector`, `context_filter`, `model`: a directory, or a
    loaded model with a `path` (one without is known by its class)."""
    settings = {"link_params": asdict(link_params), "name_filter": asdict(name_filter) if name_filter else None,
                "detector": _identity(detector), "context_filter": _identity(context_filter),
                "model": _identity(model), "calibrated": calibrated}
    text = json.dumps(settings, sort_keys=True, default=lambda value: sorted(value) if isinstance(value, frozenset)
                      else str(value))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def with_settings(provenance: dict, link_params: LinkParams, **components) -> dict:
    """A bundle's `provenance` with the id of the settings that link with it (`settings_id`'s
    `components`): what every linked document carries."""
    return {**provenance, SETTINGS_KEY: settings_id(link_params, **components)}


def _identity(component: object) -> str | None:
    """A model directory's fingerprint (`checkpoint_fingerprint`): the same model moved elsewhere
    is the same setting, a retrained one in the same place is not."""
    if component is None:
        return None
    path = component if isinstance(component, str | Path) else getattr(component, "path", None)
    if path is None or not Path(path).is_dir():
        return f"{type(component).__module__}.{type(component).__qualname__}"
    return checkpoint_fingerprint(Path(path))
