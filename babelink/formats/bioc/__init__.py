"""BioC (BioCreative's interchange format, https://bioc.sourceforge.net) as XML and as JSON.

The writers put each document's whole text in one passage at offset 0 with character offsets,
as babelink uses everywhere; annotations carry infons `type` and `identifier` (ids joined by
`|`) and one location per fragment. The readers also take BioC from other tools: passages and
sentences with their own absolute offsets, identifiers under `identifier`, `MESH` or `CUI`.
"""

from __future__ import annotations

from babelink.formats.bioc.reader import read_bioc_json, read_bioc_xml
from babelink.formats.bioc.writer import write_bioc_json, write_bioc_xml

__all__ = ["read_bioc_json", "read_bioc_xml", "write_bioc_json", "write_bioc_xml"]
