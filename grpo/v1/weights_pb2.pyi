from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetManifestRequest(_message.Message):
    __slots__ = ("policy_version",)
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    policy_version: int
    def __init__(self, policy_version: _Optional[int] = ...) -> None: ...

class WeightsFile(_message.Message):
    __slots__ = ("name", "size_bytes", "sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    size_bytes: int
    sha256: str
    def __init__(self, name: _Optional[str] = ..., size_bytes: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class GetManifestResponse(_message.Message):
    __slots__ = ("policy_version", "files", "total_bytes")
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    policy_version: int
    files: _containers.RepeatedCompositeFieldContainer[WeightsFile]
    total_bytes: int
    def __init__(self, policy_version: _Optional[int] = ..., files: _Optional[_Iterable[_Union[WeightsFile, _Mapping]]] = ..., total_bytes: _Optional[int] = ...) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ("policy_version", "name", "offset_bytes", "chunk_bytes")
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OFFSET_BYTES_FIELD_NUMBER: _ClassVar[int]
    CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    policy_version: int
    name: str
    offset_bytes: int
    chunk_bytes: int
    def __init__(self, policy_version: _Optional[int] = ..., name: _Optional[str] = ..., offset_bytes: _Optional[int] = ..., chunk_bytes: _Optional[int] = ...) -> None: ...

class ReadFileResponse(_message.Message):
    __slots__ = ("offset_bytes", "data", "crc32")
    OFFSET_BYTES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    offset_bytes: int
    data: bytes
    crc32: int
    def __init__(self, offset_bytes: _Optional[int] = ..., data: _Optional[bytes] = ..., crc32: _Optional[int] = ...) -> None: ...
