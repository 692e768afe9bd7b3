"""`babelink link --engine ray`: the same linking spread over Ray Data actors, each loading the
bundle once per chunk of documents, results streamed back to the driver in input order.

The driver reads the input with babelink's own readers (ids, languages and errors exactly as
with the local engine) and hands it over `CHUNK_DOCUMENTS` at a time, so its memory stays flat
on any corpus. (`ray.data.read_json` would read on the workers, but infers column types:
the id "001" comes back as 1.0.) On a cluster, babelink must be installed on every node and the
bundle (and filter) path readable from each.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from babelink.batching import batched
from babelink.errors import BabelinkError, InvalidInputError
from babelink.formats.document import Document
from babelink.link.mentions import LinkedDocument

if TYPE_CHECKING:
    import pyarrow

#: Documents per Ray dataset: bounds the driver's and object store's share of the corpus; each
#: chunk starts a new actor pool, whose bundle load is small next to linking this many documents.
CHUNK_DOCUMENTS = 10_000


class LinkActor:
    """One per worker: the linker is built once and links every batch the actor is sent. Errors
    come back as an `error` column, since Ray passes the driver only a traceback string."""

    def __init__(self, bundle: str | None, context_filter: str | None, params: dict):
        from babelink.linker import Linker

        self.linker, self.error = None, None
        try:
            self.linker = Linker.open(bundle, filter=context_filter, **params)
        except BabelinkError as error:
            self.error = str(error)

    def __call__(self, batch: pyarrow.Table) -> dict[str, list]:
        """`id`, `text`, `lang` columns in; `text`, `record` (the linked document's JSON, with its
        candidates, for `LinkedDocument.from_dict`) and `error` out."""
        try:
            if self.error is not None:
                raise BabelinkError(self.error)
            columns = [batch.column(name).to_pylist() for name in ("id", "text", "lang")]
            linked = self.linker.link_documents(
                [Document(doc_id, text, lang=lang) for doc_id, text, lang in zip(*columns)]
            )
        except BabelinkError as error:
            return {"text": [None], "record": [None], "error": [str(error)]}
        return {
            "text": [document.text for document in linked],
            "record": [json.dumps(document.to_dict(with_candidates=True), ensure_ascii=False) for document in linked],
            "error": [None] * len(linked),
        }


def link_with_ray(documents: Iterable[Document], skip: set[str], *, bundle: Path | None, context_filter: Path | None,
                  batch_size: int, workers: int, address: str | None, params: dict | None = None
                  ) -> Iterator[LinkedDocument]:
    """Linked documents, in input order, except those whose id is in `skip`; `params` are
    `LinkParams` fields."""
    ray, data = _import_ray()
    actor_options = {"bundle": _path(bundle), "context_filter": _path(context_filter), "params": params or {}}
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    context = data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False  # babelink's own counter reports documents
    started = False  # a Ray runtime this call started, at the first document: a finished run needs none
    try:
        pending = ({"id": d.id, "text": d.text, "lang": d.lang} for d in documents if d.id not in skip)
        for chunk in batched(pending, CHUNK_DOCUMENTS):
            if not ray.is_initialized():
                # A local cluster gets a CPU beyond the actors': Ray Data's own tasks never run without one.
                ray.init(address=address, num_cpus=None if address else workers + 1, include_dashboard=False,
                         log_to_driver=False, logging_level=logging.WARNING)
                started = True
            batches = math.ceil(len(chunk) / batch_size)
            # A block goes to one actor: a few blocks per actor keep them all busy to the end.
            linked = data.from_items(chunk, override_num_blocks=min(batches, 4 * workers)).map_batches(
                LinkActor, fn_constructor_kwargs=actor_options, batch_size=batch_size, batch_format="pyarrow",
                compute=data.ActorPoolStrategy(size=min(workers, batches)), num_cpus=1)
            for row in linked.iter_rows():
                if row["error"] is not None:
                    raise BabelinkError(row["error"])
                yield LinkedDocument.from_dict(json.loads(row["record"]), row["text"])
    finally:
        if started:
            ray.shutdown()


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise InvalidInputError("--engine ray needs Ray Data: pip install 'babelink[ray]'") from None
    return ray, ray.data


def _path(path: Path | None) -> str | None:
    """Absolute, so workers started in another directory find it."""
    return str(path.absolute()) if path is not None else None
