"""Math outcome verifier: the pinned equivalence table, statuses, hostile input, threads."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest
from conftest import TIGHT_S

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.score_status import is_verdict
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from grpo.verifiers.math import MathVerifier

OK = common_pb2.SCORE_STATUS_OK
PARSE_ERROR = common_pb2.SCORE_STATUS_PARSE_ERROR
NO_ANSWER = common_pb2.SCORE_STATUS_NO_ANSWER


def _task(gold: str) -> common_pb2.Task:
    return common_pb2.Task(id="t", type="math", gold_answer=gold)


# (gold, response, expected reward) — the cases pinned by issue 4, then the wider table.
PINNED = [
    ("13", r"\boxed{\text{13}}", 1.0),
    ("1/2", r"\boxed{\frac12}", 1.0),
    ("1/2", r"\boxed{0.5}", 1.0),
    ("1/2", r"\boxed{\dfrac{1}{2}}", 1.0),
    ("1/2", r"\boxed{\frac{1}{3}}", 0.0),
    ("1000", "so we get 1,000", 1.0),
    ("115000", r"\boxed{115,000}", 1.0),
    ("0,1", r"\boxed{0,1}", 1.0),
    ("0,1", r"\boxed{1}", 0.0),
    (r"\frac{1}{2^{99}}", r"\boxed{\frac{1}{2^{98}}}", 0.0),
    (r"\frac{1}{2004!}", r"\boxed{\frac{1}{2006!}}", 0.0),
    (r"1-\frac{1}{e}", r"\boxed{1+\frac{1}{e}}", 0.0),
    ("n=2, 3, 4", r"\boxed{n=1, 2, 3}", 0.0),
]
WIDER = [
    ("x=3", r"\boxed{3}", 1.0),
    ("3", r"\boxed{x=3}", 1.0),
    (r"(1,2]", r"\boxed{(1,2)}", 0.0),
    (r"[1,2]", r"\boxed{[1,2]}", 1.0),
    (r"\{1,2\}", r"\boxed{\{2,1\}}", 1.0),
    (r"(1,2)", r"\boxed{(2,1)}", 0.0),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}", 1.0),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"\boxed{\begin{pmatrix}2\\1\end{pmatrix}}", 0.0),
    ("B", "The answer is (B).", 1.0),
    ("B", "The answer is (B) 42.", 1.0),
    (r"\text{(D)}", r"\boxed{d}", 1.0),
    ("C", "The answer is (B) 42.", 0.0),
    (r"\text{(C)}", r"\boxed{B}", 0.0),
    (r"10\%", r"\boxed{10}", 1.0),
    (r"30^\circ", r"\boxed{30}", 1.0),
    (r"2\sqrt{2}", "the answer is √8", 1.0),
    (r"\infty", r"\boxed{∞}", 1.0),
    ("1/2", r"\boxed{½}", 1.0),
    ("5", "\\boxed{5\u200b}", 1.0),
    ("5", r"\boxed{5 \text{ cm}}", 1.0),
    ("2.5", r"\boxed{2.50}", 1.0),
    (r"\frac{1+\sqrt{5}}{2}", r"\boxed{\frac{2}{\sqrt{5}-1}}", 1.0),
    ("1000000", r"\boxed{1000001}", 0.0),
    (r"\frac{1}{3}", r"\boxed{0.333}", 0.0),
    ("85", "7+8=15,4+3+1=8:85", 1.0),
    ("86", "7+8=15,4+3+1=8:85", 0.0),
    ("72", "She sold 48+24 = <<48+24=72>>72 clips.\n#### 72", 1.0),
    ("5", "The answer is 5 apples.", 1.0),
    ("3", "Final Answer: The final answer is 3. I hope it is correct.", 1.0),
    ("0.5", r"The probability is $\frac{1}{2}$.", 1.0),
    ("2", "The answer is **2**.", 1.0),
    ("-2", "The answer is −2.", 1.0),
    (r"x^2+2x+1", r"\boxed{(x+1)^2}", 1.0),
    (r"\text{Evelyn}", r"\boxed{\text{Evelyn}}", 1.0),
]


@pytest.mark.parametrize(("gold", "response", "reward"), PINNED + WIDER)
def test_equivalence_table(
    math_verifier: MathVerifier, gold: str, response: str, reward: float
) -> None:
    score = math_verifier.verify(_task(gold), response)
    assert score.status == OK, score.detail
    assert score.reward == reward, (score.extracted_answer, score.detail)
    assert score.verifier == "math"
    assert score.latency_s > 0


@pytest.mark.parametrize(
    ("response", "status"),
    [
        ("I don't know.", common_pb2.SCORE_STATUS_NO_ANSWER),
        (r"the result is \boxed{12", common_pb2.SCORE_STATUS_NO_ANSWER),
        (r"\boxed{@#&}", common_pb2.SCORE_STATUS_PARSE_ERROR),
    ],
)
def test_failure_statuses_are_not_rewards(
    math_verifier: MathVerifier, response: str, status: int
) -> None:
    score = math_verifier.verify(_task("12"), response)
    assert score.status == status
    assert score.reward == 0.0
    assert score.detail


def test_missing_gold_is_invalid_argument(math_verifier: MathVerifier) -> None:
    with pytest.raises(InvalidArgumentError, match="gold_answer"):
        math_verifier.verify(common_pb2.Task(id="x"), r"\boxed{1}")


HOSTILE = {
    # (input, status): every size a response controls is a verdict, decided within the limit
    "power_tower": (r"\boxed{9^{9^{9^9}}}", OK),  # over 10^4 digits: never equals 1, not run
    "huge_factorial": (r"\boxed{(10^{10})!}", OK),
    # about 10^43 but 4 million digits if built: bounded before it is computed
    "near_one_power": (r"\boxed{1.0001^{1000000}}", OK),
    "e_notation_overflow": (r"\boxed{1e" + "9" * 400 + "}", OK),  # no float overflow crash
    "tower_plus_root": (r"\boxed{9^{9^{9^9}} + \sqrt{2}}", OK),  # never handed to sympy
    "nested_braces": (r"\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}", PARSE_ERROR),
    "garbage_1mb": ("(+" * 500_000, PARSE_ERROR),
    "invalid_utf8": (b"\xff\xfe 12 \xc3(".decode("utf-8", "surrogateescape"), PARSE_ERROR),
    "long_answer": (r"\boxed{" + "1+" * 1500 + "1}", PARSE_ERROR),
    # extraction stays near linear on 60 kB of what each rule looks for (issue 27)
    "turn_markers": ("hmm\n" + "User: hi\n" * 6000, NO_ANSWER),
    "answer_phrases": ("The answer is enclosed here. " * 2000, NO_ANSWER),
    "name_segments": ("$x$ and $y$. " * 4500, NO_ANSWER),
    "degenerate_text": ("P唑! Brea`ثم 俦清洗([ " * 3000, NO_ANSWER),
    "answer_tags": ("<answer> 7 </answer> " * 3000, OK),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_is_a_verdict_within_the_limit(
    tight_math_verifier: MathVerifier, name: str
) -> None:
    response, status = HOSTILE[name]
    start = time.monotonic()
    score = tight_math_verifier.verify(_task("1"), response)
    elapsed = time.monotonic() - start
    assert (score.status, score.reward) == (status, 0.0), score.detail
    assert elapsed < TIGHT_S + 5.0  # the hard limit held (generous slack for a loaded machine)
    # the pool is healthy afterwards
    assert tight_math_verifier.verify(_task("2"), r"\boxed{2}").reward == 1.0


SLOW = ("x+1", r"\boxed{\frac{(x+1)^{200}(x-1)^{200}}{(x^2-1)^{199}(x-1)}}")
"""Two well-formed values whose sympy comparison runs past the tight limit (~11 s here)."""


def test_verifier_time_limit_is_undecided_not_zero(tight_math_verifier: MathVerifier) -> None:
    score = tight_math_verifier.verify(_task(SLOW[0]), SLOW[1])
    assert score.status == common_pb2.SCORE_STATUS_UNDECIDED, score.detail
    assert not is_verdict(score)  # missing: masked, never read as 0
    assert "limit" in score.detail


def _async_grpc_scores(verifier: MathVerifier, items: list[tuple[str, str]]) -> list[float]:
    """Serve Score from a grpc.aio handler that calls verify() directly, return statuses."""

    class AioServicer(verifier_pb2_grpc.VerifierServicer):
        async def Score(self, request, context):  # type: ignore[no-untyped-def]
            return verifier_pb2.ScoreResponse(score=verifier.verify(request.task, request.response))

    async def run() -> list[common_pb2.Score]:
        server = grpc.aio.server()
        verifier_pb2_grpc.add_VerifierServicer_to_server(AioServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = verifier_pb2_grpc.VerifierStub(channel)
                out = []
                for gold, response in items:
                    request = verifier_pb2.ScoreRequest(task=_task(gold), response=response)
                    out.append((await stub.Score(request, timeout=60)).score)
                return out
        finally:
            await server.stop(None)

    return asyncio.run(run())


def test_same_result_from_main_thread_worker_thread_and_aio_handler(
    math_verifier: MathVerifier, tight_math_verifier: MathVerifier
) -> None:
    assert threading.current_thread() is threading.main_thread()
    right = ("1/2", r"\boxed{\dfrac{1}{2}}")
    wrong = (r"\frac{1}{2004!}", r"\boxed{\frac{1}{2006!}}")
    hang = SLOW

    def run_all() -> list[tuple[int, float]]:
        out = []
        for verifier, (gold, response) in [
            (math_verifier, right),
            (math_verifier, wrong),
            (tight_math_verifier, hang),
        ]:
            s = verifier.verify(_task(gold), response)
            out.append((s.status, s.reward))
        return out

    main = run_all()
    thread_result: list[tuple[int, float]] = []
    t = threading.Thread(target=lambda: thread_result.extend(run_all()))
    t.start()
    t.join()
    aio = [
        (s.status, s.reward)
        for s in _async_grpc_scores(math_verifier, [right, wrong])
        + _async_grpc_scores(tight_math_verifier, [hang])
    ]
    expected = [(OK, 1.0), (OK, 0.0), (common_pb2.SCORE_STATUS_UNDECIDED, 0.0)]
    assert main == thread_result == aio == expected
