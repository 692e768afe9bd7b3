"""Packages import only packages below them: a new cycle, or a shortcut upwards, fails here."""

import ast
from pathlib import Path

import babelink

#: Lowest first. A package may import itself and the packages before it, never one after it.
LAYERS = ["errors", "fsutil", "text", "lang", "home", "textio", "batching", "progress", "cancel", "checkpoint",
          "abbreviations", "formats", "kb", "augment", "encoders", "index", "detect", "translate", "retrieve", "eval",
          "bundle", "link", "dual", "linker", "corpus", "serve", "spacy_component", "train", "cli"]
ROOT = Path(babelink.__file__).parent


def imported_packages(path: Path) -> set[str]:
    """Top-level babelink packages a module imports, in functions too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "babelink":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("babelink."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names if alias.name.startswith("babelink.")}
    return found


def test_every_package_has_a_layer():
    packages = {path.relative_to(ROOT).parts[0].removesuffix(".py") for path in ROOT.rglob("*.py")} - {"__init__"}
    assert packages <= set(LAYERS), f"give {sorted(packages - set(LAYERS))} a place in LAYERS"


def test_no_package_imports_one_above_it():
    upward = []
    for path in ROOT.rglob("*.py"):
        package = path.relative_to(ROOT).parts[0].removesuffix(".py")
        if package == "__init__":
            continue  # the package's front door re-exports the top
        for target in imported_packages(path) - {package}:
            if LAYERS.index(target) > LAYERS.index(package):
                upward.append(f"{path.relative_to(ROOT)} imports babelink.{target}")
    assert not upward, "\n".join(sorted(upward))


def test_the_front_door():
    from babelink.linker import Linker

    assert babelink.Linker is Linker
