from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Param(_message.Message):
    __slots__ = ("bool_value", "int_value", "double_value", "string_value", "uint_value")
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT_VALUE_FIELD_NUMBER: _ClassVar[int]
    bool_value: bool
    int_value: int
    double_value: float
    string_value: str
    uint_value: int
    def __init__(self, bool_value: _Optional[bool] = ..., int_value: _Optional[int] = ..., double_value: _Optional[float] = ..., string_value: _Optional[str] = ..., uint_value: _Optional[int] = ...) -> None: ...

class TensorRef(_message.Message):
    __slots__ = ("name", "dtype", "shape", "nbytes", "frame", "segment", "offset", "region", "region_size", "region_id", "cuda_handle", "cuda_device", "peer_pid", "peer_arena")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    NBYTES_FIELD_NUMBER: _ClassVar[int]
    FRAME_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    REGION_SIZE_FIELD_NUMBER: _ClassVar[int]
    REGION_ID_FIELD_NUMBER: _ClassVar[int]
    CUDA_HANDLE_FIELD_NUMBER: _ClassVar[int]
    CUDA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PEER_PID_FIELD_NUMBER: _ClassVar[int]
    PEER_ARENA_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: int
    shape: _containers.RepeatedScalarFieldContainer[int]
    nbytes: int
    frame: int
    segment: int
    offset: int
    region: str
    region_size: int
    region_id: int
    cuda_handle: bytes
    cuda_device: int
    peer_pid: int
    peer_arena: str
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[int] = ..., shape: _Optional[_Iterable[int]] = ..., nbytes: _Optional[int] = ..., frame: _Optional[int] = ..., segment: _Optional[int] = ..., offset: _Optional[int] = ..., region: _Optional[str] = ..., region_size: _Optional[int] = ..., region_id: _Optional[int] = ..., cuda_handle: _Optional[bytes] = ..., cuda_device: _Optional[int] = ..., peer_pid: _Optional[int] = ..., peer_arena: _Optional[str] = ...) -> None: ...

class RequestItem(_message.Message):
    __slots__ = ("inputs", "requested_outputs", "parameters", "output_regions", "request_id", "correlation_id", "correlation_id_str", "flags", "callers")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Param
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Param, _Mapping]] = ...) -> None: ...
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_REGIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_STR_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    CALLERS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[TensorRef]
    requested_outputs: _containers.RepeatedScalarFieldContainer[str]
    parameters: _containers.MessageMap[str, Param]
    output_regions: _containers.RepeatedCompositeFieldContainer[TensorRef]
    request_id: str
    correlation_id: int
    correlation_id_str: str
    flags: int
    callers: _containers.RepeatedCompositeFieldContainer[Caller]
    def __init__(self, inputs: _Optional[_Iterable[_Union[TensorRef, _Mapping]]] = ..., requested_outputs: _Optional[_Iterable[str]] = ..., parameters: _Optional[_Mapping[str, Param]] = ..., output_regions: _Optional[_Iterable[_Union[TensorRef, _Mapping]]] = ..., request_id: _Optional[str] = ..., correlation_id: _Optional[int] = ..., correlation_id_str: _Optional[str] = ..., flags: _Optional[int] = ..., callers: _Optional[_Iterable[_Union[Caller, _Mapping]]] = ...) -> None: ...

class Caller(_message.Message):
    __slots__ = ("model", "version", "instance")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    model: str
    version: int
    instance: str
    def __init__(self, model: _Optional[str] = ..., version: _Optional[int] = ..., instance: _Optional[str] = ...) -> None: ...

class ServerToWorker(_message.Message):
    __slots__ = ("kind", "id", "requests", "freed", "unmap_regions", "control", "window", "window_bytes", "consumed", "responses", "error", "error_code", "final", "cancel_items", "metric_value", "model_ready")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        INFER: _ClassVar[ServerToWorker.Kind]
        STOP: _ClassVar[ServerToWorker.Kind]
        FREE: _ClassVar[ServerToWorker.Kind]
        UNMAP: _ClassVar[ServerToWorker.Kind]
        CONTROL: _ClassVar[ServerToWorker.Kind]
        CANCEL: _ClassVar[ServerToWorker.Kind]
        CREDIT: _ClassVar[ServerToWorker.Kind]
        BLS_RESULT: _ClassVar[ServerToWorker.Kind]
    INFER: ServerToWorker.Kind
    STOP: ServerToWorker.Kind
    FREE: ServerToWorker.Kind
    UNMAP: ServerToWorker.Kind
    CONTROL: ServerToWorker.Kind
    CANCEL: ServerToWorker.Kind
    CREDIT: ServerToWorker.Kind
    BLS_RESULT: ServerToWorker.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    FREED_FIELD_NUMBER: _ClassVar[int]
    UNMAP_REGIONS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    WINDOW_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_ITEMS_FIELD_NUMBER: _ClassVar[int]
    METRIC_VALUE_FIELD_NUMBER: _ClassVar[int]
    MODEL_READY_FIELD_NUMBER: _ClassVar[int]
    kind: ServerToWorker.Kind
    id: int
    requests: _containers.RepeatedCompositeFieldContainer[RequestItem]
    freed: _containers.RepeatedScalarFieldContainer[int]
    unmap_regions: _containers.RepeatedScalarFieldContainer[int]
    control: str
    window: int
    window_bytes: int
    consumed: int
    responses: _containers.RepeatedCompositeFieldContainer[ResponseItem]
    error: str
    error_code: int
    final: bool
    cancel_items: _containers.RepeatedScalarFieldContainer[int]
    metric_value: float
    model_ready: bool
    def __init__(self, kind: _Optional[_Union[ServerToWorker.Kind, str]] = ..., id: _Optional[int] = ..., requests: _Optional[_Iterable[_Union[RequestItem, _Mapping]]] = ..., freed: _Optional[_Iterable[int]] = ..., unmap_regions: _Optional[_Iterable[int]] = ..., control: _Optional[str] = ..., window: _Optional[int] = ..., window_bytes: _Optional[int] = ..., consumed: _Optional[int] = ..., responses: _Optional[_Iterable[_Union[ResponseItem, _Mapping]]] = ..., error: _Optional[str] = ..., error_code: _Optional[int] = ..., final: _Optional[bool] = ..., cancel_items: _Optional[_Iterable[int]] = ..., metric_value: _Optional[float] = ..., model_ready: _Optional[bool] = ...) -> None: ...

class ResponseItem(_message.Message):
    __slots__ = ("outputs", "error", "parameters", "absent", "final", "error_code", "rescheduled")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Param
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Param, _Mapping]] = ...) -> None: ...
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    ABSENT_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    RESCHEDULED_FIELD_NUMBER: _ClassVar[int]
    outputs: _containers.RepeatedCompositeFieldContainer[TensorRef]
    error: str
    parameters: _containers.MessageMap[str, Param]
    absent: bool
    final: bool
    error_code: int
    rescheduled: bool
    def __init__(self, outputs: _Optional[_Iterable[_Union[TensorRef, _Mapping]]] = ..., error: _Optional[str] = ..., parameters: _Optional[_Mapping[str, Param]] = ..., absent: _Optional[bool] = ..., final: _Optional[bool] = ..., error_code: _Optional[int] = ..., rescheduled: _Optional[bool] = ...) -> None: ...

class WorkerToServer(_message.Message):
    __slots__ = ("kind", "id", "responses", "error", "final", "pid", "compute_input_ns", "compute_infer_ns", "compute_output_ns", "arena", "control", "compute_start_ns", "model_name", "model_version", "request", "decoupled", "freed", "timeout_us", "metric_ops", "loading")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RESULT: _ClassVar[WorkerToServer.Kind]
        HELLO: _ClassVar[WorkerToServer.Kind]
        FATAL: _ClassVar[WorkerToServer.Kind]
        CONTROL: _ClassVar[WorkerToServer.Kind]
        BLS: _ClassVar[WorkerToServer.Kind]
        FREE: _ClassVar[WorkerToServer.Kind]
        BLS_CANCEL: _ClassVar[WorkerToServer.Kind]
        METRICS: _ClassVar[WorkerToServer.Kind]
        MODEL_LOADING: _ClassVar[WorkerToServer.Kind]
    RESULT: WorkerToServer.Kind
    HELLO: WorkerToServer.Kind
    FATAL: WorkerToServer.Kind
    CONTROL: WorkerToServer.Kind
    BLS: WorkerToServer.Kind
    FREE: WorkerToServer.Kind
    BLS_CANCEL: WorkerToServer.Kind
    METRICS: WorkerToServer.Kind
    MODEL_LOADING: WorkerToServer.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_INPUT_NS_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_INFER_NS_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_OUTPUT_NS_FIELD_NUMBER: _ClassVar[int]
    ARENA_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_START_NS_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    DECOUPLED_FIELD_NUMBER: _ClassVar[int]
    FREED_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_US_FIELD_NUMBER: _ClassVar[int]
    METRIC_OPS_FIELD_NUMBER: _ClassVar[int]
    LOADING_FIELD_NUMBER: _ClassVar[int]
    kind: WorkerToServer.Kind
    id: int
    responses: _containers.RepeatedCompositeFieldContainer[ResponseItem]
    error: str
    final: bool
    pid: int
    compute_input_ns: int
    compute_infer_ns: int
    compute_output_ns: int
    arena: str
    control: str
    compute_start_ns: int
    model_name: str
    model_version: str
    request: RequestItem
    decoupled: bool
    freed: _containers.RepeatedScalarFieldContainer[int]
    timeout_us: int
    metric_ops: _containers.RepeatedCompositeFieldContainer[MetricOp]
    loading: ModelLoading
    def __init__(self, kind: _Optional[_Union[WorkerToServer.Kind, str]] = ..., id: _Optional[int] = ..., responses: _Optional[_Iterable[_Union[ResponseItem, _Mapping]]] = ..., error: _Optional[str] = ..., final: _Optional[bool] = ..., pid: _Optional[int] = ..., compute_input_ns: _Optional[int] = ..., compute_infer_ns: _Optional[int] = ..., compute_output_ns: _Optional[int] = ..., arena: _Optional[str] = ..., control: _Optional[str] = ..., compute_start_ns: _Optional[int] = ..., model_name: _Optional[str] = ..., model_version: _Optional[str] = ..., request: _Optional[_Union[RequestItem, _Mapping]] = ..., decoupled: _Optional[bool] = ..., freed: _Optional[_Iterable[int]] = ..., timeout_us: _Optional[int] = ..., metric_ops: _Optional[_Iterable[_Union[MetricOp, _Mapping]]] = ..., loading: _Optional[_Union[ModelLoading, _Mapping]] = ...) -> None: ...

class ModelLoading(_message.Message):
    __slots__ = ("op", "config", "files", "unload_dependents", "caller")
    class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        READY: _ClassVar[ModelLoading.Op]
        LOAD: _ClassVar[ModelLoading.Op]
        UNLOAD: _ClassVar[ModelLoading.Op]
    READY: ModelLoading.Op
    LOAD: ModelLoading.Op
    UNLOAD: ModelLoading.Op
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    OP_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    UNLOAD_DEPENDENTS_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    op: ModelLoading.Op
    config: str
    files: _containers.ScalarMap[str, bytes]
    unload_dependents: bool
    caller: str
    def __init__(self, op: _Optional[_Union[ModelLoading.Op, str]] = ..., config: _Optional[str] = ..., files: _Optional[_Mapping[str, bytes]] = ..., unload_dependents: _Optional[bool] = ..., caller: _Optional[str] = ...) -> None: ...

class MetricOp(_message.Message):
    __slots__ = ("kind", "handle", "family", "name", "description", "metric_kind", "labels", "buckets", "value", "bucket_counts", "count")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        FAMILY_NEW: _ClassVar[MetricOp.Kind]
        FAMILY_DELETE: _ClassVar[MetricOp.Kind]
        METRIC_NEW: _ClassVar[MetricOp.Kind]
        METRIC_DELETE: _ClassVar[MetricOp.Kind]
        ADD: _ClassVar[MetricOp.Kind]
        SET: _ClassVar[MetricOp.Kind]
        OBSERVE: _ClassVar[MetricOp.Kind]
        VALUE: _ClassVar[MetricOp.Kind]
    FAMILY_NEW: MetricOp.Kind
    FAMILY_DELETE: MetricOp.Kind
    METRIC_NEW: MetricOp.Kind
    METRIC_DELETE: MetricOp.Kind
    ADD: MetricOp.Kind
    SET: MetricOp.Kind
    OBSERVE: MetricOp.Kind
    VALUE: MetricOp.Kind
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    METRIC_KIND_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    BUCKET_COUNTS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    kind: MetricOp.Kind
    handle: int
    family: int
    name: str
    description: str
    metric_kind: int
    labels: _containers.ScalarMap[str, str]
    buckets: _containers.RepeatedScalarFieldContainer[float]
    value: float
    bucket_counts: _containers.RepeatedScalarFieldContainer[int]
    count: int
    def __init__(self, kind: _Optional[_Union[MetricOp.Kind, str]] = ..., handle: _Optional[int] = ..., family: _Optional[int] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., metric_kind: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., buckets: _Optional[_Iterable[float]] = ..., value: _Optional[float] = ..., bucket_counts: _Optional[_Iterable[int]] = ..., count: _Optional[int] = ...) -> None: ...
