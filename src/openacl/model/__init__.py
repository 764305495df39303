"""Offline models: ONNX import -> graph IR -> lowering to aclnn -> memory plan -> engine.

``onnx`` is imported only by ``onnx_import``; ``import openacl`` never loads this package.
"""

from __future__ import annotations
