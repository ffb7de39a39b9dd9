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
    __slots__ = ("inputs", "requested_outputs", "parameters", "output_regions")
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
    inputs: _containers.RepeatedCompositeFieldContainer[TensorRef]
    requested_outputs: _containers.RepeatedScalarFieldContainer[str]
    parameters: _containers.MessageMap[str, Param]
    output_regions: _containers.RepeatedCompositeFieldContainer[TensorRef]
    def __init__(self, inputs: _Optional[_Iterable[_Union[TensorRef, _Mapping]]] = ..., requested_outputs: _Optional[_Iterable[str]] = ..., parameters: _Optional[_Mapping[str, Param]] = ..., output_regions: _Optional[_Iterable[_Union[TensorRef, _Mapping]]] = ...) -> None: ...

class ServerToWorker(_message.Message):
    __slots__ = ("kind", "id", "requests", "freed", "unmap_regions", "control", "window", "window_bytes", "consumed", "responses", "error", "error_code", "final")
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
    def __init__(self, kind: _Optional[_Union[ServerToWorker.Kind, str]] = ..., id: _Optional[int] = ..., requests: _Optional[_Iterable[_Union[RequestItem, _Mapping]]] = ..., freed: _Optional[_Iterable[int]] = ..., unmap_regions: _Optional[_Iterable[int]] = ..., control: _Optional[str] = ..., window: _Optional[int] = ..., window_bytes: _Optional[int] = ..., consumed: _Optional[int] = ..., responses: _Optional[_Iterable[_Union[ResponseItem, _Mapping]]] = ..., error: _Optional[str] = ..., error_code: _Optional[int] = ..., final: _Optional[bool] = ...) -> None: ...

class ResponseItem(_message.Message):
    __slots__ = ("outputs", "error", "parameters")
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
    outputs: _containers.RepeatedCompositeFieldContainer[TensorRef]
    error: str
    parameters: _containers.MessageMap[str, Param]
    def __init__(self, outputs: _Optional[_Iterable[_Union[TensorRef, _Mapping]]] = ..., error: _Optional[str] = ..., parameters: _Optional[_Mapping[str, Param]] = ...) -> None: ...

class WorkerToServer(_message.Message):
    __slots__ = ("kind", "id", "responses", "error", "final", "pid", "compute_input_ns", "compute_infer_ns", "compute_output_ns", "arena", "control", "compute_start_ns", "model_name", "model_version", "request", "decoupled", "freed")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RESULT: _ClassVar[WorkerToServer.Kind]
        HELLO: _ClassVar[WorkerToServer.Kind]
        FATAL: _ClassVar[WorkerToServer.Kind]
        CONTROL: _ClassVar[WorkerToServer.Kind]
        BLS: _ClassVar[WorkerToServer.Kind]
        FREE: _ClassVar[WorkerToServer.Kind]
    RESULT: WorkerToServer.Kind
    HELLO: WorkerToServer.Kind
    FATAL: WorkerToServer.Kind
    CONTROL: WorkerToServer.Kind
    BLS: WorkerToServer.Kind
    FREE: WorkerToServer.Kind
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
    def __init__(self, kind: _Optional[_Union[WorkerToServer.Kind, str]] = ..., id: _Optional[int] = ..., responses: _Optional[_Iterable[_Union[ResponseItem, _Mapping]]] = ..., error: _Optional[str] = ..., final: _Optional[bool] = ..., pid: _Optional[int] = ..., compute_input_ns: _Optional[int] = ..., compute_infer_ns: _Optional[int] = ..., compute_output_ns: _Optional[int] = ..., arena: _Optional[str] = ..., control: _Optional[str] = ..., compute_start_ns: _Optional[int] = ..., model_name: _Optional[str] = ..., model_version: _Optional[str] = ..., request: _Optional[_Union[RequestItem, _Mapping]] = ..., decoupled: _Optional[bool] = ..., freed: _Optional[_Iterable[int]] = ...) -> None: ...
