"""Options and choices shared by several commands."""

from __future__ import annotations

import contextlib
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from babelink.errors import InvalidInputError
from babelink.lang import check_language

BundleOption = Annotated[
    Path | None, typer.Option("--bundle", "-b", help="Bundle directory; the embedded default when omitted.")
]
FilterOption = Annotated[
    Path | None, typer.Option("--filter", help="Contextual filter directory (babelink train filter).")
]
ModelOption = Annotated[
    Path | None, typer.Option(
        "--model", help="Dual encoder directory (babelink train dual) or a packaged one-pass model's name: "
                        "detects and links every mention in one pass.")
]
InitOption = Annotated[
    str, typer.Option("--init", help="'default' (bundled multilingual-e5-small), a packaged trained encoder's name "
                                     "or a checkpoint directory.")
]
LoraRankOption = Annotated[int, typer.Option(
    "--lora-rank", min=0, help="Train low-rank adapters of this rank only (a small file, out/"
                               "lora_adapters.safetensors, beside the merged checkpoint); 0: every weight.")]
DeviceOption = Annotated[str | None, typer.Option(
    "--device", help="cuda, cuda:1, cpu, …; a GPU when one is present, else the CPU.")]
MinProbabilityOption = Annotated[
    float | None, typer.Option(
        "--min-probability", min=0.0, max=1.0,
        help="Keep only concepts whose calibrated probability of being right reaches this (default 0: link "
             "decides by its cosine threshold, measured the better rule on dev; normalize: a mention with none "
             "left is NIL).")
]
LinkThresholdOption = Annotated[float | None, typer.Option(
    "--link-threshold", min=0.0, max=1.0,
    help="Score a span's best concept needs to be linked (default: the bundle's, recorded at its build, else "
         "0.98, chosen on dev for the bundled encoder; another encoder's cosines need their own).")]
RecallThresholdOption = Annotated[float | None, typer.Option(
    "--recall-threshold", min=0.0, max=1.0,
    help="TF-IDF score a span needs to be ranked at all (default: the bundle's, recorded at its build, else 0.55).")]
TranslationsOption = Annotated[list[str] | None, typer.Option(
    "--translations",
    help="Bilingual lexicons mentions are also searched through in English: en-XX.tsv files ('english<TAB>foreign'), "
         "directories of them, or XX=FILE; repeat for several.")]
KeepModifiersOption = Annotated[bool, typer.Option(
    "--keep-modifiers", help="Also link words that only qualify a mention (severe, chronic, bilateral: HPO Clinical "
                             "modifier and Frequency, UMLS T079–T082), left out by default.")]
TypesOption = Annotated[list[str] | None, typer.Option(
    "--types", help="Search only names of concepts of these types: MRSTY's semantic types (T047), an ontology's "
                    "branches, or UMLS semantic groups (DISO disorders, CHEM chemicals and drugs, ANAT, LIVB, PROC, "
                    "…: a KB with MRSTY reads them as their types, the embedded default carries them); repeat or "
                    "comma-separate.")]
SourcesOption = Annotated[list[str] | None, typer.Option(
    "--sources", help="Search only names from these source vocabularies (SAB; repeat or comma-separate).")]
LangsOption = Annotated[list[str] | None, typer.Option(
    "--langs", help="Search only names in these languages (ISO 639-1 or LAT; repeat or comma-separate).")]
CodesOption = Annotated[list[str] | None, typer.Option(
    "--codes", help="Give each concept's codes in these vocabularies only (HP, ICD10, MESH, UMLS, …; repeat or "
                    "comma-separate); `normalize --format tsv` adds a column for each.")]
EpochsOption = Annotated[int, typer.Option("--epochs", min=1, help="Passes over the training data.")]
EncoderRateOption = Annotated[float, typer.Option("--lr", help="Encoder learning rate.")]
MaxStepsOption = Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop (and save) after this many "
                                                                              "steps.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of every random choice: the same seed, the same model.")]
MaxMinutesOption = Annotated[float | None, typer.Option("--max-minutes", help="Stop (and save) after this long.")]
LearnTypesOption = Annotated[list[str] | None, typer.Option(
    "--types", help="Learn only annotations of these types (repeat); all when omitted.")]
KbFormatOption = Annotated[
    str | None, typer.Option("--kb-format", help="umls|ctd|obo|tsv|jsonl|parquet; inferred when omitted.")
]


def language_option(code: str | None) -> str | None:
    """`--lang` in babelink's form (`ENG`, `en-US` → `en`), or a usage error for a word that is no code."""
    try:
        return check_language(code, "--lang")
    except InvalidInputError as error:
        raise typer.BadParameter(str(error).removeprefix("--lang: ")) from None


class Retriever(str, Enum):
    sparse = "sparse"
    dense = "dense"
    hybrid = "hybrid"


class IndexKind(str, Enum):
    flat = "flat"
    hnsw = "hnsw"
    ivfpq = "ivfpq"
    lazy = "lazy"


def link_params(min_probability: float | None, keep_modifiers: bool, link_threshold: float | None = None,
                recall_threshold: float | None = None) -> dict:
    """The `LinkParams` fields `link` and `serve` options set (the rest keep the bundle's or the defaults)."""
    given = {"min_probability": min_probability, "link_threshold": link_threshold,
             "recall_threshold": recall_threshold}
    return {**{name: value for name, value in given.items() if value is not None},
            **({"modifier_types": frozenset()} if keep_modifiers else {})}


@contextlib.contextmanager
def counted(stage: str, skipped: int = 0):
    """`advance(item) -> item`, counting items on a progress display (on a terminal only);
    `skipped`: documents an earlier run already wrote, shown beside the count."""
    from babelink.progress import progress_bar

    suffix = f" ({skipped:,} skipped: already in the output)" if skipped else ""
    with progress_bar(stage) as progress:
        done = 0

        def advance(item):
            nonlocal done
            done += 1
            progress(f"{stage} documents{suffix}", done, None)
            return item

        yield advance
