from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutputCompare(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_COMPARE_UNSPECIFIED: _ClassVar[OutputCompare]
    OUTPUT_COMPARE_EXACT: _ClassVar[OutputCompare]
    OUTPUT_COMPARE_LINES: _ClassVar[OutputCompare]
    OUTPUT_COMPARE_TOKENS: _ClassVar[OutputCompare]
    OUTPUT_COMPARE_TOKENS_FLOAT: _ClassVar[OutputCompare]

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_ABORT: _ClassVar[FinishReason]

class ScoreStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCORE_STATUS_UNSPECIFIED: _ClassVar[ScoreStatus]
    SCORE_STATUS_OK: _ClassVar[ScoreStatus]
    SCORE_STATUS_NO_ANSWER: _ClassVar[ScoreStatus]
    SCORE_STATUS_PARSE_ERROR: _ClassVar[ScoreStatus]
    SCORE_STATUS_TIMEOUT: _ClassVar[ScoreStatus]
    SCORE_STATUS_RUNTIME_ERROR: _ClassVar[ScoreStatus]
    SCORE_STATUS_INTERNAL: _ClassVar[ScoreStatus]
    SCORE_STATUS_UNDECIDED: _ClassVar[ScoreStatus]

class StepStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_STATUS_UNSPECIFIED: _ClassVar[StepStatus]
    STEP_STATUS_VALID: _ClassVar[StepStatus]
    STEP_STATUS_INVALID: _ClassVar[StepStatus]
    STEP_STATUS_UNVERIFIABLE: _ClassVar[StepStatus]

class TestStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TEST_STATUS_UNSPECIFIED: _ClassVar[TestStatus]
    TEST_STATUS_PASSED: _ClassVar[TestStatus]
    TEST_STATUS_FAILED: _ClassVar[TestStatus]
    TEST_STATUS_ERROR: _ClassVar[TestStatus]
    TEST_STATUS_TIMEOUT: _ClassVar[TestStatus]
    TEST_STATUS_MEMORY: _ClassVar[TestStatus]

class GroupStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GROUP_STATUS_UNSPECIFIED: _ClassVar[GroupStatus]
    GROUP_STATUS_COMPLETE: _ClassVar[GroupStatus]
    GROUP_STATUS_TIMED_OUT: _ClassVar[GroupStatus]
OUTPUT_COMPARE_UNSPECIFIED: OutputCompare
OUTPUT_COMPARE_EXACT: OutputCompare
OUTPUT_COMPARE_LINES: OutputCompare
OUTPUT_COMPARE_TOKENS: OutputCompare
OUTPUT_COMPARE_TOKENS_FLOAT: OutputCompare
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_ABORT: FinishReason
SCORE_STATUS_UNSPECIFIED: ScoreStatus
SCORE_STATUS_OK: ScoreStatus
SCORE_STATUS_NO_ANSWER: ScoreStatus
SCORE_STATUS_PARSE_ERROR: ScoreStatus
SCORE_STATUS_TIMEOUT: ScoreStatus
SCORE_STATUS_RUNTIME_ERROR: ScoreStatus
SCORE_STATUS_INTERNAL: ScoreStatus
SCORE_STATUS_UNDECIDED: ScoreStatus
STEP_STATUS_UNSPECIFIED: StepStatus
STEP_STATUS_VALID: StepStatus
STEP_STATUS_INVALID: StepStatus
STEP_STATUS_UNVERIFIABLE: StepStatus
TEST_STATUS_UNSPECIFIED: TestStatus
TEST_STATUS_PASSED: TestStatus
TEST_STATUS_FAILED: TestStatus
TEST_STATUS_ERROR: TestStatus
TEST_STATUS_TIMEOUT: TestStatus
TEST_STATUS_MEMORY: TestStatus
GROUP_STATUS_UNSPECIFIED: GroupStatus
GROUP_STATUS_COMPLETE: GroupStatus
GROUP_STATUS_TIMED_OUT: GroupStatus

class CodeTests(_message.Message):
    __slots__ = ("test_code", "entry_point", "test_list", "test_imports", "io_pairs", "program_prefix", "output_compare", "float_tolerance")
    TEST_CODE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_POINT_FIELD_NUMBER: _ClassVar[int]
    TEST_LIST_FIELD_NUMBER: _ClassVar[int]
    TEST_IMPORTS_FIELD_NUMBER: _ClassVar[int]
    IO_PAIRS_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_PREFIX_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COMPARE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    test_code: str
    entry_point: str
    test_list: _containers.RepeatedScalarFieldContainer[str]
    test_imports: _containers.RepeatedScalarFieldContainer[str]
    io_pairs: _containers.RepeatedCompositeFieldContainer[IoPair]
    program_prefix: str
    output_compare: OutputCompare
    float_tolerance: float
    def __init__(self, test_code: _Optional[str] = ..., entry_point: _Optional[str] = ..., test_list: _Optional[_Iterable[str]] = ..., test_imports: _Optional[_Iterable[str]] = ..., io_pairs: _Optional[_Iterable[_Union[IoPair, _Mapping]]] = ..., program_prefix: _Optional[str] = ..., output_compare: _Optional[_Union[OutputCompare, str]] = ..., float_tolerance: _Optional[float] = ...) -> None: ...

class IoPair(_message.Message):
    __slots__ = ("stdin", "expected_stdout")
    STDIN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STDOUT_FIELD_NUMBER: _ClassVar[int]
    stdin: str
    expected_stdout: str
    def __init__(self, stdin: _Optional[str] = ..., expected_stdout: _Optional[str] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "type", "prompt", "gold_answer", "code_tests", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    GOLD_ANSWER_FIELD_NUMBER: _ClassVar[int]
    CODE_TESTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    prompt: str
    gold_answer: str
    code_tests: CodeTests
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., prompt: _Optional[str] = ..., gold_answer: _Optional[str] = ..., code_tests: _Optional[_Union[CodeTests, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SamplingParams(_message.Message):
    __slots__ = ("temperature", "top_p", "top_k", "max_new_tokens", "stop", "seed")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    top_k: int
    max_new_tokens: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., max_new_tokens: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ...) -> None: ...

class Completion(_message.Message):
    __slots__ = ("text", "token_ids", "behavior_logprobs", "token_char_offsets", "finish_reason", "policy_version", "sampling")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    BEHAVIOR_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_CHAR_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    text: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    behavior_logprobs: _containers.RepeatedScalarFieldContainer[float]
    token_char_offsets: _containers.RepeatedScalarFieldContainer[int]
    finish_reason: FinishReason
    policy_version: int
    sampling: SamplingParams
    def __init__(self, text: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., behavior_logprobs: _Optional[_Iterable[float]] = ..., token_char_offsets: _Optional[_Iterable[int]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., policy_version: _Optional[int] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ...) -> None: ...

class RolloutTimings(_message.Message):
    __slots__ = ("started_unix_s", "generation_s", "produced_unix_s")
    STARTED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    GENERATION_S_FIELD_NUMBER: _ClassVar[int]
    PRODUCED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    started_unix_s: float
    generation_s: float
    produced_unix_s: float
    def __init__(self, started_unix_s: _Optional[float] = ..., generation_s: _Optional[float] = ..., produced_unix_s: _Optional[float] = ...) -> None: ...

class PromptJob(_message.Message):
    __slots__ = ("group_id", "task", "group_size", "round")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    task: Task
    group_size: int
    round: int
    def __init__(self, group_id: _Optional[str] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., group_size: _Optional[int] = ..., round: _Optional[int] = ...) -> None: ...

class Rollout(_message.Message):
    __slots__ = ("group_id", "index", "group_size", "prompt_id", "task", "prompt_token_ids", "completion", "timings", "round")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    index: int
    group_size: int
    prompt_id: str
    task: Task
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    completion: Completion
    timings: RolloutTimings
    round: int
    def __init__(self, group_id: _Optional[str] = ..., index: _Optional[int] = ..., group_size: _Optional[int] = ..., prompt_id: _Optional[str] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., completion: _Optional[_Union[Completion, _Mapping]] = ..., timings: _Optional[_Union[RolloutTimings, _Mapping]] = ..., round: _Optional[int] = ...) -> None: ...

class StepScore(_message.Message):
    __slots__ = ("char_start", "char_end", "status", "reward", "detail")
    CHAR_START_FIELD_NUMBER: _ClassVar[int]
    CHAR_END_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    char_start: int
    char_end: int
    status: StepStatus
    reward: float
    detail: str
    def __init__(self, char_start: _Optional[int] = ..., char_end: _Optional[int] = ..., status: _Optional[_Union[StepStatus, str]] = ..., reward: _Optional[float] = ..., detail: _Optional[str] = ...) -> None: ...

class TestResult(_message.Message):
    __slots__ = ("name", "status", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    status: TestStatus
    detail: str
    def __init__(self, name: _Optional[str] = ..., status: _Optional[_Union[TestStatus, str]] = ..., detail: _Optional[str] = ...) -> None: ...

class Score(_message.Message):
    __slots__ = ("status", "reward", "steps", "tests", "extracted_answer", "detail", "latency_s", "verifier")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TESTS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_ANSWER_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_FIELD_NUMBER: _ClassVar[int]
    status: ScoreStatus
    reward: float
    steps: _containers.RepeatedCompositeFieldContainer[StepScore]
    tests: _containers.RepeatedCompositeFieldContainer[TestResult]
    extracted_answer: str
    detail: str
    latency_s: float
    verifier: str
    def __init__(self, status: _Optional[_Union[ScoreStatus, str]] = ..., reward: _Optional[float] = ..., steps: _Optional[_Iterable[_Union[StepScore, _Mapping]]] = ..., tests: _Optional[_Iterable[_Union[TestResult, _Mapping]]] = ..., extracted_answer: _Optional[str] = ..., detail: _Optional[str] = ..., latency_s: _Optional[float] = ..., verifier: _Optional[str] = ...) -> None: ...

class RewardComponent(_message.Message):
    __slots__ = ("name", "weight", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: float
    score: Score
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[float] = ..., score: _Optional[_Union[Score, _Mapping]] = ...) -> None: ...

class ScoredRollout(_message.Message):
    __slots__ = ("rollout", "outcome", "process", "missing", "components", "reward")
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    rollout: Rollout
    outcome: Score
    process: Score
    missing: bool
    components: _containers.RepeatedCompositeFieldContainer[RewardComponent]
    reward: float
    def __init__(self, rollout: _Optional[_Union[Rollout, _Mapping]] = ..., outcome: _Optional[_Union[Score, _Mapping]] = ..., process: _Optional[_Union[Score, _Mapping]] = ..., missing: _Optional[bool] = ..., components: _Optional[_Iterable[_Union[RewardComponent, _Mapping]]] = ..., reward: _Optional[float] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("group_id", "prompt_id", "group_size", "members", "status", "round", "opened_unix_s", "closed_unix_s", "straggler_wait_s")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_SIZE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    OPENED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    CLOSED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    STRAGGLER_WAIT_S_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    prompt_id: str
    group_size: int
    members: _containers.RepeatedCompositeFieldContainer[ScoredRollout]
    status: GroupStatus
    round: int
    opened_unix_s: float
    closed_unix_s: float
    straggler_wait_s: float
    def __init__(self, group_id: _Optional[str] = ..., prompt_id: _Optional[str] = ..., group_size: _Optional[int] = ..., members: _Optional[_Iterable[_Union[ScoredRollout, _Mapping]]] = ..., status: _Optional[_Union[GroupStatus, str]] = ..., round: _Optional[int] = ..., opened_unix_s: _Optional[float] = ..., closed_unix_s: _Optional[float] = ..., straggler_wait_s: _Optional[float] = ...) -> None: ...

class PolicyWeights(_message.Message):
    __slots__ = ("policy_version", "path", "step", "published_unix_s")
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_UNIX_S_FIELD_NUMBER: _ClassVar[int]
    policy_version: int
    path: str
    step: int
    published_unix_s: float
    def __init__(self, policy_version: _Optional[int] = ..., path: _Optional[str] = ..., step: _Optional[int] = ..., published_unix_s: _Optional[float] = ...) -> None: ...
