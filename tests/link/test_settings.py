"""The settings id a linked document carries: the same settings give the same id, wherever their
model files lie; any setting that changes what is linked changes it."""

from __future__ import annotations

import shutil

from babelink.link.documents import LinkParams
from babelink.link.settings import settings_id
from babelink.retrieve.filters import NameFilter


def _model(directory, config: str):
    directory.mkdir()
    (directory / "config.json").write_text(config, encoding="utf-8")
    (directory / "model.safetensors").write_bytes(b"\0" * 64)
    return directory


def test_link_parameters_and_name_filters_each_change_the_id():
    default = settings_id(LinkParams())
    assert settings_id(LinkParams()) == default and len(default) == 12
    others = {settings_id(LinkParams(min_probability=0.3)), settings_id(LinkParams(modifier_types=frozenset())),
              settings_id(LinkParams(), name_filter=NameFilter.of(langs=["en"])),
              settings_id(LinkParams(), name_filter=NameFilter.of(types=["T047"])),
              settings_id(LinkParams(), calibrated=False)}
    assert len(others) == 5 and default not in others
    assert settings_id(LinkParams(), name_filter=NameFilter()) == default  # an empty filter filters nothing


def test_a_model_is_known_by_its_files_not_its_place(tmp_path):
    model = _model(tmp_path / "ner", '{"layers": 2}')
    moved = shutil.copytree(model, tmp_path / "elsewhere")
    assert settings_id(LinkParams(), detector=model) == settings_id(LinkParams(), detector=moved)
    assert settings_id(LinkParams(), detector=model) != settings_id(LinkParams())
    retrained = _model(tmp_path / "retrained", '{"layers": 4}')
    assert settings_id(LinkParams(), detector=model) != settings_id(LinkParams(), detector=retrained)
    assert settings_id(LinkParams(), detector=model) != settings_id(LinkParams(), context_filter=model)


def test_a_detector_without_files_is_known_by_its_class():
    class Capitals:
        def detect(self, text):
            return []

    assert settings_id(LinkParams(), detector=Capitals()) == settings_id(LinkParams(), detector=Capitals())
    assert settings_id(LinkParams(), detector=Capitals()) != settings_id(LinkParams())
