"""`babelink serve` (the REST service and viewer) and `babelink info` (a bundle's manifest)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated

import typer

from babelink.cli import options
from babelink.errors import InvalidInputError


def info(
    bundle: options.BundleOption = None,
    encoder: Annotated[str | None, typer.Option(
        "--encoder", help="A trained encoder (a packaged name or an artefact file): print its manifest and the "
                          "terms of its training data instead.")] = None,
) -> None:
    """Print a bundle's provenance (what every prediction reports), its manifest and its concept
    types with their counts (the values --types takes).

    Without --bundle, the embedded default's. A bundle whose vectors come from a packaged trained
    encoder also shows what that encoder was trained on, and on what terms."""
    from babelink.bundle.default import default_bundle
    from babelink.bundle.store import load_bundle
    from babelink.encoders.artefacts import artefact_file, packaged, read_manifest, terms

    if encoder is not None:
        if bundle is not None:
            raise InvalidInputError("give --bundle or --encoder, not both")
        manifest = read_manifest(artefact_file(encoder))
        typer.echo(json.dumps({"terms": terms(manifest), "manifest": manifest}, indent=2, ensure_ascii=False))
        return
    loaded = load_bundle(bundle or default_bundle())
    shown = {"provenance": loaded.provenance, "manifest": loaded.manifest, "types": _type_counts(loaded.kb)}
    if loaded.dense is not None and loaded.dense.params.kind == "lazy":  # how far first needs have encoded it
        shown["name_vectors"] = {"store": str(loaded.dense.store.directory), "encoded": loaded.dense.encoded(),
                                 "names": len(loaded.names)}
    name = loaded.encoder_name
    if name in packaged():
        trained = read_manifest(packaged()[name])
        shown["encoder"] = {"name": name, "terms": terms(trained), "training": trained["training"]}
    typer.echo(json.dumps(shown, indent=2, ensure_ascii=False))


def _type_counts(kb) -> dict[str, int]:
    """Concepts per type, most first: the values `--types` takes."""
    counts = Counter(value for types in kb.concepts.column("types").to_pylist() for value in types or ())
    return dict(counts.most_common())


def verify(bundle: options.BundleOption = None) -> None:
    """Check every file of a bundle against the SHA-256 its build recorded (loads check sizes only)."""
    from babelink.bundle.default import default_bundle
    from babelink.bundle.store import load_bundle

    loaded = load_bundle(bundle or default_bundle(), verify=True)
    files = loaded.manifest["files"]
    size = sum((loaded.path / relative).stat().st_size for relative in files)
    typer.echo(f"{loaded.path}: {len(files)} files, {size / 2**20:,.1f} MiB, every checksum matches the manifest")


def serve(
    bundle: options.BundleOption = None,
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")] = 8000,
    context_filter: options.FilterOption = None,
    model: options.ModelOption = None,
    min_probability: options.MinProbabilityOption = None,
    keep_modifiers: options.KeepModifiersOption = False,
    types: options.TypesOption = None,
    sources: options.SourcesOption = None,
    langs: options.LangsOption = None,
    workers: Annotated[int, typer.Option(
        "--workers", min=1, help="Threads running model work (torch already uses every core).")] = 1,
    queue: Annotated[int, typer.Option(
        "--queue", min=1, help="Requests admitted at once; more get 429 with Retry-After.")] = 32,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.001, help="Seconds per request, queueing included; then 503.")] = 30.0,
    max_connections: Annotated[int, typer.Option(
        "--max-connections", min=1, help="Open connections, idle ones included; more get 503.")] = 256,
    keep_alive: Annotated[float, typer.Option(
        "--keep-alive", min=0.1, help="Seconds an idle keep-alive connection stays open.")] = 5.0,
) -> None:
    """Serve normalize and link over HTTP: REST API (OpenAPI at /docs) and a viewer page at /."""
    import uvicorn

    from babelink.linker import Linker
    from babelink.retrieve.filters import NameFilter
    from babelink.serve import ServiceLimits, create_app

    linker = Linker.open(bundle, filter=context_filter, name_filter=NameFilter.of(types, sources, langs), model=model,
                         **options.link_params(min_probability, keep_modifiers))
    service = create_app(linker, ServiceLimits(workers=workers, queue=queue, timeout=timeout))
    typer.echo(f"serving {linker.bundle.path} on http://{host}:{port}/", err=True)
    # Bounds what idle or half-open sockets can hold; read timeouts for slow clients need a proxy (README).
    uvicorn.run(service, host=host, port=port, limit_concurrency=max_connections, timeout_keep_alive=keep_alive)
