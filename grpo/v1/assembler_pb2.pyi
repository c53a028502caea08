from grpo.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitRolloutsRequest(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_common_pb2.Rollout]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_common_pb2.Rollout, _Mapping]]] = ...) -> None: ...

class SubmitRolloutsResponse(_message.Message):
    __slots__ = ("accepted", "duplicates")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    duplicates: int
    def __init__(self, accepted: _Optional[int] = ..., duplicates: _Optional[int] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AssemblerStats(_message.Message):
    __slots__ = ("rollouts_received", "groups_opened", "groups_accepted", "groups_rejected_all_correct", "groups_rejected_all_wrong", "groups_timed_out", "groups_rejected_too_few_valid", "groups_pending", "rewards_missing", "regenerations", "generated_tokens", "kept_tokens", "verifier_failures", "rollouts_late", "groups_closed_short", "rollouts_in_closed_groups", "rollouts_held", "verifier_outage_s", "redis_outage_s", "groups_rejected_too_many_undecided", "rewards_undecided", "groups_zero_variance", "zero_variance_tokens")
    ROLLOUTS_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    GROUPS_OPENED_FIELD_NUMBER: _ClassVar[int]
    GROUPS_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    GROUPS_REJECTED_ALL_CORRECT_FIELD_NUMBER: _ClassVar[int]
    GROUPS_REJECTED_ALL_WRONG_FIELD_NUMBER: _ClassVar[int]
    GROUPS_TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    GROUPS_REJECTED_TOO_FEW_VALID_FIELD_NUMBER: _ClassVar[int]
    GROUPS_PENDING_FIELD_NUMBER: _ClassVar[int]
    REWARDS_MISSING_FIELD_NUMBER: _ClassVar[int]
    REGENERATIONS_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    KEPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_FAILURES_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_LATE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_CLOSED_SHORT_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_IN_CLOSED_GROUPS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_HELD_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_OUTAGE_S_FIELD_NUMBER: _ClassVar[int]
    REDIS_OUTAGE_S_FIELD_NUMBER: _ClassVar[int]
    GROUPS_REJECTED_TOO_MANY_UNDECIDED_FIELD_NUMBER: _ClassVar[int]
    REWARDS_UNDECIDED_FIELD_NUMBER: _ClassVar[int]
    GROUPS_ZERO_VARIANCE_FIELD_NUMBER: _ClassVar[int]
    ZERO_VARIANCE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    rollouts_received: int
    groups_opened: int
    groups_accepted: int
    groups_rejected_all_correct: int
    groups_rejected_all_wrong: int
    groups_timed_out: int
    groups_rejected_too_few_valid: int
    groups_pending: int
    rewards_missing: int
    regenerations: int
    generated_tokens: int
    kept_tokens: int
    verifier_failures: int
    rollouts_late: int
    groups_closed_short: int
    rollouts_in_closed_groups: int
    rollouts_held: int
    verifier_outage_s: float
    redis_outage_s: float
    groups_rejected_too_many_undecided: int
    rewards_undecided: int
    groups_zero_variance: int
    zero_variance_tokens: int
    def __init__(self, rollouts_received: _Optional[int] = ..., groups_opened: _Optional[int] = ..., groups_accepted: _Optional[int] = ..., groups_rejected_all_correct: _Optional[int] = ..., groups_rejected_all_wrong: _Optional[int] = ..., groups_timed_out: _Optional[int] = ..., groups_rejected_too_few_valid: _Optional[int] = ..., groups_pending: _Optional[int] = ..., rewards_missing: _Optional[int] = ..., regenerations: _Optional[int] = ..., generated_tokens: _Optional[int] = ..., kept_tokens: _Optional[int] = ..., verifier_failures: _Optional[int] = ..., rollouts_late: _Optional[int] = ..., groups_closed_short: _Optional[int] = ..., rollouts_in_closed_groups: _Optional[int] = ..., rollouts_held: _Optional[int] = ..., verifier_outage_s: _Optional[float] = ..., redis_outage_s: _Optional[float] = ..., groups_rejected_too_many_undecided: _Optional[int] = ..., rewards_undecided: _Optional[int] = ..., groups_zero_variance: _Optional[int] = ..., zero_variance_tokens: _Optional[int] = ...) -> None: ...

class VerifierEndpointStats(_message.Message):
    __slots__ = ("address", "calls", "items", "latency_s_sum", "latency_s_max", "codes", "statuses")
    class CodesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class StatusesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_SUM_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_MAX_FIELD_NUMBER: _ClassVar[int]
    CODES_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    address: str
    calls: int
    items: int
    latency_s_sum: float
    latency_s_max: float
    codes: _containers.ScalarMap[str, int]
    statuses: _containers.ScalarMap[str, int]
    def __init__(self, address: _Optional[str] = ..., calls: _Optional[int] = ..., items: _Optional[int] = ..., latency_s_sum: _Optional[float] = ..., latency_s_max: _Optional[float] = ..., codes: _Optional[_Mapping[str, int]] = ..., statuses: _Optional[_Mapping[str, int]] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ("stats", "verifiers")
    STATS_FIELD_NUMBER: _ClassVar[int]
    VERIFIERS_FIELD_NUMBER: _ClassVar[int]
    stats: AssemblerStats
    verifiers: _containers.RepeatedCompositeFieldContainer[VerifierEndpointStats]
    def __init__(self, stats: _Optional[_Union[AssemblerStats, _Mapping]] = ..., verifiers: _Optional[_Iterable[_Union[VerifierEndpointStats, _Mapping]]] = ...) -> None: ...
