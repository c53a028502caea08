"""The real-output corpus of issue 27 and its adjudication (read by tests and ``python -m bench``).

- The **corpus**: real model responses to math problems with their gold answers, rebuilt by
  ``scripts/build_real_corpus.py`` from snapshots of public repositories (provenance and
  licences: ``real/PROVENANCE.md``). Its files are ``*.jsonl.gz`` in :func:`corpus_dir`.
- The **adjudication** (``real/adjudicated.jsonl``, committed): rows judged by reading the
  response: what its final answer is and whether it equals the gold. Each row names the
  corpus row (``id``) and the exact text judged (``digest`` of gold and response), so a
  rebuilt corpus that differs is refused rather than silently judged.
- The **sample**: every corpus row whose id hashes under :data:`SAMPLE_RATE` (a Bernoulli
  sample, independent of any verifier's verdict, that stays a uniform sample when sources
  are added). The agreements inside it are a uniform random sample of all agreements, so
  their accuracy is weighted back to all agreements; disagreements are adjudicated
  exhaustively.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "real"
REPO = Path(__file__).resolve().parents[3]
ADJUDICATED = HERE / "adjudicated.jsonl"
KNOWN_WRONG = HERE / "known_wrong.txt"
SAMPLE_RATE = 0.06
"""Share of corpus rows in the adjudicated random sample (by a hash of the row id)."""

KINDS = frozenset(
    {
        "boxed",  # a \boxed{} final answer
        "answer_tag",  # <answer>...</answer>
        "answer_phrase",  # "The answer is ...", "Answer: ..."
        "gsm8k_hash",  # "#### n"
        "final_statement",  # the last equation / sentence states the value
        "last_number",  # only a bare number ends the response
        "prose",  # the value is stated in words inside a sentence
        "code",  # tool-integrated: code, its output, then the answer
        "think",  # the answer sits around <think>/</think> tags
        "hallucinated_turn",  # the model answers, then invents a next turn / problem
        "truncated",  # the response stops before a final answer
        "no_answer",  # the response never gives an answer (echo, refusal, garbage)
        "hedge",  # several candidate answers, none chosen
        "list",  # a list/tuple/set answer or gold
        "thousands",  # thousands separators
        "units",  # a unit or currency glued to or around the value
        "approximation",  # a decimal for a non-terminating exact gold
        "equation",  # an equation or assignment as the answer
        "interval",  # intervals, inequalities
        "expression",  # symbolic expressions (roots, pi, polynomials)
        "fraction",  # fractions, mixed numbers, percents, decimals vs fractions
        "text",  # a word answer (names, yes/no, letters)
        "gold_issue",  # the gold itself is odd (kept, judged against the stated gold)
    }
)


def corpus_dir() -> Path | None:
    """Folder of the built corpus: ``$GRPO_REAL_CORPUS``, else ``$GRPO_DATA_DIR/real`` (or
    ``../shared/data/real``), else ``build/real_corpus`` of this checkout; None when none
    of them holds ``*.jsonl.gz`` files."""
    candidates = []
    if os.environ.get("GRPO_REAL_CORPUS"):
        candidates.append(Path(os.environ["GRPO_REAL_CORPUS"]))
    data = Path(os.environ.get("GRPO_DATA_DIR", REPO.parent / "shared" / "data"))
    candidates += [data / "real", REPO / "build" / "real_corpus"]
    for path in candidates:
        if path.is_dir() and any(path.glob("*.jsonl.gz")):
            return path
    return None


def load_corpus(path: Path) -> list[dict[str, str]]:
    """All rows of the corpus files in ``path``, in file-name then file order.

    Raises:
        ValueError: a row lacks a field of the schema or an id repeats.
    """
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    fields = ("id", "source", "model", "dataset", "problem", "response", "gold")
    for file in sorted(path.glob("*.jsonl.gz")):
        with gzip.open(file, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                row = json.loads(line)
                missing = [f for f in fields if not isinstance(row.get(f), str)]
                if missing:
                    raise ValueError(f"{file.name}:{n}: missing or non-string {missing}")
                if row["id"] in seen:
                    raise ValueError(f"{file.name}:{n}: id {row['id']} repeats")
                seen.add(row["id"])
                rows.append(row)
    return rows


def digest(gold: str, response: str) -> str:
    """First 16 hex digits of sha256(gold NUL response): names the exact text judged."""
    return hashlib.sha256(f"{gold}\x00{response}".encode()).hexdigest()[:16]


def in_sample(row_id: str) -> bool:
    """Whether a corpus row belongs to the random sample (hash of its id below the rate)."""
    h = int(hashlib.sha256(f"sample:{row_id}".encode()).hexdigest()[:8], 16)
    return h < SAMPLE_RATE * 0x1_0000_0000


@dataclass(frozen=True)
class Judgement:
    """One adjudicated row: ``truth`` is 1 when the response's final answer equals the gold.

    ``answer`` is the final answer as read (None: the response gives none); ``kind`` one
    of :data:`KINDS`; ``reason`` one line saying why.
    """

    id: str
    digest: str
    truth: int
    answer: str | None
    kind: str
    reason: str


def load_adjudication(path: Path = ADJUDICATED) -> dict[str, Judgement]:
    """The committed judgements by row id.

    Raises:
        ValueError: a malformed row (truth not 0/1, unknown kind, empty reason, repeated id).
    """
    out: dict[str, Judgement] = {}
    if not path.is_file():
        return out
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        d = json.loads(line)
        j = Judgement(d["id"], d["digest"], d["truth"], d["answer"], d["kind"], d["reason"])
        if j.truth not in (0, 1):
            raise ValueError(f"{path.name}:{n}: truth must be 0 or 1, not {j.truth!r}")
        if j.kind not in KINDS:
            raise ValueError(f"{path.name}:{n}: unknown kind {j.kind!r}")
        if not j.reason.strip():
            raise ValueError(f"{path.name}:{n}: empty reason")
        if j.id in out:
            raise ValueError(f"{path.name}:{n}: id {j.id} judged twice")
        out[j.id] = j
    return out


def load_known_wrong(path: Path = KNOWN_WRONG) -> set[str]:
    """Ids of adjudicated rows our current verifier gets wrong (one per line, ``#`` starts a
    comment)."""
    if not path.is_file():
        return set()
    ids = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            ids.add(line)
    return ids
