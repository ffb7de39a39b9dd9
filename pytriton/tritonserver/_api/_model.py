"""`tritonserver._api._model`."""

from pytriton.tritonserver._enums import ModelBatchFlag, ModelTxnPropertyFlag
from pytriton.tritonserver._errors import InvalidArgumentError
from pytriton.tritonserver._model import Model
from pytriton.tritonserver._request import InferenceRequest
from pytriton.tritonserver._response import AsyncResponseIterator, ResponseIterator

__all__ = ["AsyncResponseIterator", "InferenceRequest", "InvalidArgumentError", "Model", "ModelBatchFlag",
           "ModelTxnPropertyFlag", "ResponseIterator"]  # fmt: skip
