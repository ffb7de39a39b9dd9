"""A model's `config.pbtxt`, as a model author writes it: read (`repository.config.read_model_config`, protobuf's text
format) and taken all the way to the configurations served (`repository.load_versions`: versions, ensembles,
sequence batching, labels, instance groups), auto-complete off.

An input is the file's bytes, written as `m/config.pbtxt` in a repository whose model `m` has versions 1 to 3 (each
with a model.py), a `labels.txt` and an `initial_state/hundred` file. The reader's own error is ModelRepositoryError,
whose message names the file; anything else escaping is a finding.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from pytriton.repository import ModelRepositoryError, load_versions
from tests.fuzz.harness import Finding, Harness


class ModelConfigHarness(Harness):
    name = "model_config"
    max_len = 4096

    def setup(self) -> None:
        self.root = tempfile.mkdtemp(prefix="fuzz-model-config-")
        self.model_dir = os.path.join(self.root, "m")
        for version in (1, 2, 3):
            os.makedirs(os.path.join(self.model_dir, str(version)))
            with open(os.path.join(self.model_dir, str(version), "model.py"), "w") as f:
                f.write("class TritonPythonModel:\n    pass\n")
        with open(os.path.join(self.model_dir, "labels.txt"), "w") as f:
            f.write("a\nb\nc\nd\n")
        os.makedirs(os.path.join(self.model_dir, "initial_state"))
        with open(os.path.join(self.model_dir, "initial_state", "hundred"), "wb") as f:
            f.write((100).to_bytes(4, "little"))
        self.path = os.path.join(self.model_dir, "config.pbtxt")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def one_input(self, data: bytes) -> None:
        with open(self.path, "wb") as f:
            f.write(data)
        try:
            load_versions(self.model_dir, auto_complete=False)
        except ModelRepositoryError as exc:
            if self.path not in str(exc) and "model 'm'" not in str(exc):
                raise Finding("ModelRepositoryError naming neither the file nor the model", str(exc)) from None
