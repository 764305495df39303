"""OperatorDesc: the operator's input and output tensor descriptions (aclTensorDesc)."""

from __future__ import annotations

from collections.abc import Sequence

import openacl


class OperatorDesc:
    """The tensor descs of one operator call; owns them (``destroy`` frees them)."""

    def __init__(self) -> None:
        self.input_desc: list[int] = []
        self.output_desc: list[int] = []

    def add_input_tensor_desc(self, data_type: int, dims: Sequence[int], format: int
                              ) -> OperatorDesc:
        self.input_desc.append(openacl.create_tensor_desc(data_type, list(dims), format))
        return self

    def add_output_tensor_desc(self, data_type: int, dims: Sequence[int], format: int
                               ) -> OperatorDesc:
        self.output_desc.append(openacl.create_tensor_desc(data_type, list(dims), format))
        return self

    def destroy(self) -> None:
        for desc in self.input_desc + self.output_desc:
            openacl.destroy_tensor_desc(desc)
        self.input_desc.clear()
        self.output_desc.clear()
