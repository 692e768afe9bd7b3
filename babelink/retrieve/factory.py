"""The candidate generator a bundle was built for: one place that turns a manifest into a retriever."""

from __future__ import annotations

from babelink.bundle.store import Bundle
from babelink.encoders import Encoder
from babelink.retrieve.candidate import CandidateGenerator
from babelink.retrieve.filters import AllowedNames, NameFilter, allowed_concepts, allowed_names, concepts_only
from babelink.retrieve.generators import DenseGenerator, HybridGenerator, HybridParams, SparseGenerator
from babelink.retrieve.switching import SwitchingGenerator
from babelink.retrieve.translation import TranslatingGenerator


def generator_for(bundle: Bundle, encoder: Encoder | None = None, retriever: str | None = None,
                  name_filter: NameFilter | None = None) -> CandidateGenerator:
    """The candidate generator a bundle was built for (its manifest's `retriever`, or the given
    one), behind index switching when it has a labeled-span index, and searching through English
    renderings too when it has translation lexicons. Both indexes share one cached encoder
    (`Bundle.query_encoder`). A `name_filter` restricts the names searched (`retrieve.filters`);
    in the labeled-span index, to the spans of the concepts the filter allows."""
    retriever = retriever or bundle.retriever
    if retriever != "sparse":
        encoder = bundle.query_encoder(encoder)
    allowed = allowed_names(bundle.kb, bundle.names, name_filter) if name_filter else None
    generator = _kb_generator(bundle, retriever, encoder, allowed)
    if bundle.spans is not None:
        spans_allowed = None if allowed is None else concepts_only(
            bundle.spans.kb, bundle.spans.names, allowed_concepts(bundle.kb, bundle.names, allowed))
        spans = _kb_generator(bundle.spans, retriever, encoder, spans_allowed)
        generator = SwitchingGenerator(spans, generator, bundle.manifest["spans"]["switch_threshold"])
    if bundle.renderer is not None:
        generator = TranslatingGenerator(generator, bundle.renderer, bundle.names)
    return generator


def _kb_generator(bundle: Bundle, retriever: str, encoder: Encoder | None,
                  allowed: AllowedNames | None) -> CandidateGenerator:
    if retriever == "sparse":
        return SparseGenerator(bundle.kb, bundle.names, bundle.sparse, allowed=allowed)
    if retriever == "dense":
        return DenseGenerator(bundle.kb, bundle.names, bundle.dense, encoder, allowed=allowed)
    return HybridGenerator(bundle.kb, bundle.names, bundle.sparse, bundle.dense, encoder,
                           HybridParams(**bundle.manifest["hybrid"]), allowed=allowed)
