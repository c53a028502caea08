"""The check ``grpo run`` makes before any work: the run's verifiers cover its routes.

Runs after the config loaded (every key of every block already validated) and the tasks were
read (the task type is known), before the run dir is written (a Redis the run names is
PINGed then too, ``checked_tasks``), the model set up or SFT run:
``check_run_verifiers`` resolves the ``verifiers`` section (``plan_verifiers``) and checks it
(``check_verifier_plan``: each endpoint's ``Describe``, bounded by
``verifiers.check_timeout_s``; built-in and SDK services by the kind and task types their class
declares). A refusal is one line naming the route and what the verifier declares.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from grpo.services.runtime.redis_server import check_redis, resolve_redis_url
from grpo.services.settings.run import RunConfig
from grpo.services.settings.verifiers import VerifierPlan, check_verifier_plan, plan_verifiers
from grpo.services.tasks.run_tasks import RunTasks, load_run_tasks

__all__ = ["check_run_verifiers", "checked_tasks"]


def checked_tasks(config: RunConfig, say: Callable[[str], None] | None = None) -> RunTasks:
    """The run's tasks (``load_run_tasks``), once its verifiers are checked against their
    task type (:func:`check_run_verifiers`) and its Redis answers, when it names one
    (``redis_url`` or ``$REDIS_URL``: ``redis_server.check_redis``; else ``grpo run`` starts
    an embedded one).

    Raises:
        the errors of ``load_run_tasks`` and :func:`check_run_verifiers`;
        EndpointCheckError: the named Redis does not answer PING (one line);
        EvictingRedisError: it may evict keys.
    """
    tasks = load_run_tasks(config)
    check_run_verifiers(config, tasks.task_type, say)
    url = resolve_redis_url(config.redis_url)
    if url:
        check_redis(url)
    return tasks


def check_run_verifiers(
    config: RunConfig, task_type: str, say: Callable[[str], None] | None = None
) -> VerifierPlan:
    """Resolve and check the run's verifiers for ``task_type`` (see the module docstring).

    Args:
        config: the run; task_type: the routing key of its tasks; say: receives one line
            describing each route once checked.

    Returns:
        The checked :class:`VerifierPlan`.

    Raises:
        InvalidArgumentError: the ``verifiers`` section does not resolve for ``task_type``
            (a route for a task type the run does not have).
        FailedPreconditionError: an endpoint does not answer ``Describe`` in time, or a
            verifier's kind or task types do not cover the route given to it.
    """
    started = time.perf_counter()
    plan = plan_verifiers(config.verifiers, [task_type])
    answers = check_verifier_plan(plan, config.assembler.verifier)
    if say is not None:
        for route in plan.routes.values():
            rewards = " + ".join(
                f"{c.weight:g} x {c.name}"
                + (f" ({c.verifier.address})" if c.verifier.form == "endpoint" else "")
                for c in route.outcome
            )
            process = f"; process {route.process.text}" if route.process else ""
            say(f"verifiers of {route.task_type!r}: {rewards}{process}")
        named = ", ".join(f"{a} = {info.name!r} {info.version}" for a, info in answers.items())
        say(
            f"verifiers checked in {time.perf_counter() - started:.2f} s"
            + (f" (endpoints: {named})" if named else "")
        )
    return plan
