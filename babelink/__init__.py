"""babelink: cross-lingual biomedical entity linking.

    from babelink import Linker
    linker = Linker.open()                      # the embedded default bundle
    linker.normalize(["infarto de miocardio"])  # ranked concepts per mention
    linker.link("El paciente tiene diabetes.")  # mentions with offsets and concepts

`Linker` and `NameFilter` (filters inside retrieval: `linker.filtered(NameFilter.of(types=["T047"]))`)
are imported on first use, so that `import babelink.<module>` stays as light as that module.
"""

__all__ = ["Linker", "NameFilter"]


def __getattr__(name: str):
    if name == "Linker":
        from babelink.linker import Linker

        return Linker
    if name == "NameFilter":
        from babelink.retrieve.filters import NameFilter

        return NameFilter
    raise AttributeError(f"module 'babelink' has no attribute {name!r}")
