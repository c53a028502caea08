from grpo.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerationDescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GenerationDescribeResponse(_message.Message):
    __slots__ = ("backend", "model_path", "policy_version", "max_context_tokens", "device")
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MODEL_PATH_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_CONTEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    backend: str
    model_path: str
    policy_version: int
    max_context_tokens: int
    device: str
    def __init__(self, backend: _Optional[str] = ..., model_path: _Optional[str] = ..., policy_version: _Optional[int] = ..., max_context_tokens: _Optional[int] = ..., device: _Optional[str] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("prompts", "n", "sampling")
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    prompts: _containers.RepeatedScalarFieldContainer[str]
    n: int
    sampling: _common_pb2.SamplingParams
    def __init__(self, prompts: _Optional[_Iterable[str]] = ..., n: _Optional[int] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ...) -> None: ...

class PromptCompletions(_message.Message):
    __slots__ = ("prompt_token_ids", "completions")
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    completions: _containers.RepeatedCompositeFieldContainer[_common_pb2.Completion]
    def __init__(self, prompt_token_ids: _Optional[_Iterable[int]] = ..., completions: _Optional[_Iterable[_Union[_common_pb2.Completion, _Mapping]]] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[PromptCompletions]
    def __init__(self, results: _Optional[_Iterable[_Union[PromptCompletions, _Mapping]]] = ...) -> None: ...

class LoadWeightsRequest(_message.Message):
    __slots__ = ("policy_version", "path")
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    policy_version: int
    path: str
    def __init__(self, policy_version: _Optional[int] = ..., path: _Optional[str] = ...) -> None: ...

class LoadWeightsResponse(_message.Message):
    __slots__ = ("policy_version", "load_s")
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOAD_S_FIELD_NUMBER: _ClassVar[int]
    policy_version: int
    load_s: float
    def __init__(self, policy_version: _Optional[int] = ..., load_s: _Optional[float] = ...) -> None: ...
