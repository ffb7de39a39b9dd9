"""`tritonserver._api._server`."""

from pytriton.tritonserver._custom_metrics import Metric, MetricFamily
from pytriton.tritonserver._enums import (
    InstanceGroupKind,
    LogFormat,
    LogLevel,
    MetricFormat,
    MetricKind,
    ModelControlMode,
    RateLimitMode,
)
from pytriton.tritonserver._errors import InvalidArgumentError, UnavailableError
from pytriton.tritonserver._model import Model
from pytriton.tritonserver._options import ModelLoadDeviceLimit, Options, RateLimiterResource
from pytriton.tritonserver._server import ModelDictionary, Server

__all__ = ["InstanceGroupKind", "InvalidArgumentError", "LogFormat", "LogLevel", "Metric", "MetricFamily",
           "MetricFormat", "MetricKind", "Model", "ModelControlMode", "ModelDictionary", "ModelLoadDeviceLimit",
           "Options", "RateLimitMode", "RateLimiterResource", "Server", "UnavailableError"]  # fmt: skip
