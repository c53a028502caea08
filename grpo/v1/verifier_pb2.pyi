from grpo.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VerifierKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERIFIER_KIND_UNSPECIFIED: _ClassVar[VerifierKind]
    VERIFIER_KIND_OUTCOME: _ClassVar[VerifierKind]
    VERIFIER_KIND_PROCESS: _ClassVar[VerifierKind]
VERIFIER_KIND_UNSPECIFIED: VerifierKind
VERIFIER_KIND_OUTCOME: VerifierKind
VERIFIER_KIND_PROCESS: VerifierKind

class VerifierDescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VerifierDescribeResponse(_message.Message):
    __slots__ = ("name", "version", "task_types", "kind", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    task_types: _containers.RepeatedScalarFieldContainer[str]
    kind: VerifierKind
    config: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., task_types: _Optional[_Iterable[str]] = ..., kind: _Optional[_Union[VerifierKind, str]] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("task", "response")
    TASK_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    task: _common_pb2.Task
    response: str
    def __init__(self, task: _Optional[_Union[_common_pb2.Task, _Mapping]] = ..., response: _Optional[str] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("score",)
    SCORE_FIELD_NUMBER: _ClassVar[int]
    score: _common_pb2.Score
    def __init__(self, score: _Optional[_Union[_common_pb2.Score, _Mapping]] = ...) -> None: ...

class ScoreBatchRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ScoreRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[ScoreRequest, _Mapping]]] = ...) -> None: ...

class ScoreBatchResponse(_message.Message):
    __slots__ = ("scores",)
    SCORES_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedCompositeFieldContainer[_common_pb2.Score]
    def __init__(self, scores: _Optional[_Iterable[_Union[_common_pb2.Score, _Mapping]]] = ...) -> None: ...
