"""Outage seconds per dependency per service, read from the services' JSON logs.

Every service rides out a dependency's outage with ``grpo.services.runtime.streams.Outage``, whose
log lines open and close each outage with the fields ``outage_of`` (the dependency, e.g.
``"redis (learner)"`` or ``"verifiers"``), ``outage`` (``"open"`` / ``"closed"``) and, when
closed, ``outage_s`` (its length in seconds). ``log_outages`` sums them for one log file;
``service_outages`` does so for every service of a run and lays the result out as summary.json's
``outage_s``: ``{dependency: {service: seconds}}``.

A service's log file (``<run_dir>/logs/<name>.log``) holds every process of that service, so
the sum covers its restarts too (a per-process counter such as ``AssemblerStats.redis_outage_s``
or the learner's ``learner/redis_outage_s`` starts again at 0 after a restart). An outage that
was still open when its process died runs until the next process of the service opened one
(the service had no working dependency in between) or, when none did, until ``end``; one still
open at the end of the log counts until ``end``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path

__all__ = ["dependency_of", "log_outages", "service_outages"]


def dependency_of(outage_of: str) -> str:
    """The dependency named by an ``Outage``'s ``what``: the text before " (<client>)"
    (``"redis (learner)"`` -> ``"redis"``, ``"verifiers"`` -> ``"verifiers"``)."""
    return outage_of.split(" (", 1)[0].strip()


def _unix_s(ts: object) -> float | None:
    """Seconds since the epoch of a log line's ISO ``ts`` field (None when absent or bad)."""
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None


def log_outages(lines: Iterable[str], *, end: float) -> dict[str, float]:
    """Seconds each dependency was unreachable, summed over one service's log.

    Args:
        lines: the log's lines (JSON objects as ``grpo serve`` writes them; other lines, such
            as a traceback printed before logging was set up, are skipped).
        end: seconds since the epoch where an outage still open at the end of the log stops
            (the time the summary is taken).

    Returns:
        Dependency (``dependency_of``) -> seconds (>= 0), for each dependency that had an
        outage; closed outages count their logged ``outage_s``.
    """
    totals: dict[str, float] = {}
    open_since: dict[str, float] = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(row, dict) or not isinstance(row.get("outage_of"), str):
            continue
        dep = dependency_of(row["outage_of"])
        at = _unix_s(row.get("ts"))
        if row.get("outage") == "open" and at is not None:
            if dep in open_since:  # the process that opened it died in the outage
                totals[dep] = totals.get(dep, 0.0) + max(0.0, at - open_since[dep])
            open_since[dep] = at
        elif row.get("outage") == "closed" and isinstance(row.get("outage_s"), int | float):
            totals[dep] = totals.get(dep, 0.0) + max(0.0, float(row["outage_s"]))
            open_since.pop(dep, None)
    for dep, since in open_since.items():
        totals[dep] = totals.get(dep, 0.0) + max(0.0, end - since)
    return totals


def service_outages(
    log_dir: Path, uses: Mapping[str, Sequence[str]], *, end: float
) -> dict[str, dict[str, float]]:
    """summary.json's ``outage_s``: seconds per dependency per service, from their logs.

    Args:
        log_dir: the run's ``logs/`` folder (``<service>.log`` per service).
        uses: service name -> the dependencies it rides out outages of (each is listed, 0.0
            when it had none, so "no outage" reads differently from "not measured"); a
            dependency found in a log but not listed is added too.
        end: seconds since the epoch where an outage still open stops (``log_outages``).

    Returns:
        ``{dependency: {service: seconds}}`` with seconds rounded to 0.01, services sorted.
    """
    out: dict[str, dict[str, float]] = {}
    for service in sorted(uses):
        path = log_dir / f"{service}.log"
        text = path.read_text(errors="replace") if path.is_file() else ""
        found = log_outages(text.splitlines(), end=end)
        for dep in [*uses[service], *(d for d in found if d not in uses[service])]:
            out.setdefault(dep, {})[service] = round(found.get(dep, 0.0), 2)
    return out
