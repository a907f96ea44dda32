"""The strfry write-policy plugin loop: one JSON line in, exactly one JSON line out, flushed.

strfry runs ``relay.writePolicy.plugin`` through ``/bin/sh -c``, writes one request per event on
the plugin's stdin and waits for the answer line on its stdout (``docs/plugins.md``). Anything else
on stdout is a protocol error, so this module is the only place that touches the answer stream, and
:func:`run_plugin` re-points file descriptor 1 at stderr before any other code runs: a stray
``print()`` (ours, or a library's) lands in strfry's log instead of corrupting the answers.

Invariants (each one is tested):

* every input line gets exactly one answer line, in order — even a line that is not JSON (answered
  ``invalid:``, echoing the event id when it can be found in the text, ``""`` otherwise), a line
  longer than :data:`MAX_LINE` (read to its end and rejected), or a request a rule crashed on
  (answered ``error: internal error``, like strfry itself, and logged with its traceback);
* the loop survives all of those and ends only at EOF on stdin or when strfry closes the pipe;
* registry changes are seen without a restart: before every decision the registry is refreshed
  (a ``PRAGMA data_version`` read, reloading only when another process wrote). When the registry
  cannot be read, events are rejected (``error: internal error``) — fail closed — and the loop
  keeps serving and retrying.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Final

from relaypolicy.config import PolicyConfig
from relaypolicy.message import Decision, recover_event_id, serialize_response
from relaypolicy.pipeline import INTERNAL_ERROR, RelayPolicy
from relaypolicy.policies import INVALID
from store.errors import StoreError

__all__ = ["MAX_LINE", "run_plugin", "serve"]

logger = logging.getLogger(__name__)

#: Longest request line read whole. strfry's events are at most 64 KiB of normalised JSON; even
#: fully ``\\u``-escaped plus the request envelope they stay far below 1 MiB.
MAX_LINE: Final = 1 << 20
_TOO_LONG: Final = Decision.reject(INVALID, "request line too long")
# Registry failures repeat on every event; say so at most this often.
_FAILURE_LOG_INTERVAL: Final = 10.0


class _ThrottledLog:
    """Log a repeating failure once per interval, with how many times it happened meanwhile."""

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        self._interval = interval
        self._clock = clock
        self._last: float | None = None
        self._suppressed = 0

    def __call__(self, message: str, *args: object) -> None:
        now = self._clock()
        if self._last is not None and now - self._last < self._interval:
            self._suppressed += 1
            return
        if self._suppressed:
            message += " (%d similar failures not logged)"
            args = (*args, self._suppressed)
        logger.error(message, *args)
        self._last = now
        self._suppressed = 0


def _read_request(stdin: BinaryIO) -> tuple[bytes, bool] | None:
    """One request line, and whether it had to be cut (too long); None at EOF."""
    line = stdin.readline(MAX_LINE)
    if not line:
        return None
    if len(line) < MAX_LINE or line.endswith(b"\n"):
        return line, False
    while True:  # Read the rest of the oversized line and drop it.
        rest = stdin.readline(MAX_LINE)
        if not rest or rest.endswith(b"\n"):
            return line, True


def serve(
    stdin: BinaryIO,
    stdout: BinaryIO,
    policy: RelayPolicy,
    refresh: Callable[[], object],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Answer requests from ``stdin`` on ``stdout`` until EOF.

    Args:
        stdin: the request stream (binary, line by line).
        stdout: the answer stream; every answer is written whole and flushed.
        policy: decides; its registry is the one ``refresh`` updates.
        refresh: called before each decision to pick up registry changes; raises
            :class:`~store.errors.StoreError` when the registry cannot be read.
        clock: monotonic seconds, only for throttling repeated error logs.

    Returns:
        The exit status: 0 at EOF or when the reader went away.
    """
    registry_failure = _ThrottledLog(_FAILURE_LOG_INTERVAL, clock)
    served = 0
    while True:
        request = _read_request(stdin)
        if request is None:
            logger.info("stdin closed after %d requests; exiting", served)
            return 0
        line, cut = request
        try:
            if cut:
                event_id = recover_event_id(line) or ""
                logger.warning("request %s: line longer than %d bytes", event_id[:8], MAX_LINE)
                response = serialize_response(event_id, _TOO_LONG)
            else:
                response = _answer(line, policy, refresh, registry_failure)
        except Exception:  # A bug outside the rules; the loop must keep serving.
            logger.exception("failed to answer a request")
            response = serialize_response(recover_event_id(line) or "", INTERNAL_ERROR)
        try:
            stdout.write(response)
            stdout.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream was closed under us.
            logger.info("stdout closed after %d requests; exiting", served)
            return 0
        served += 1


def _answer(
    line: bytes,
    policy: RelayPolicy,
    refresh: Callable[[], object],
    registry_failure: _ThrottledLog,
) -> bytes:
    try:
        refresh()
    except StoreError as exc:
        registry_failure("registry unavailable, rejecting events: %s", exc)
        return serialize_response(recover_event_id(line) or "", INTERNAL_ERROR)
    answer = policy.answer_line(line)
    if answer.error is not None:
        logger.error("a rule failed on event %s", answer.event_id[:8] or "?", exc_info=answer.error)
    elif logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "< %s %s %s", answer.event_id[:8] or "?", answer.decision.action, answer.decision.msg
        )
    return answer.line


def _claim_stdout() -> BinaryIO:
    """Take file descriptor 1 for the answers and point fd 1 and ``sys.stdout`` at stderr."""
    sys.stdout.flush()
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return answers


def run_plugin(registry_path: Path, config: PolicyConfig) -> int:
    """The ``plugin`` subcommand: serve strfry on this process's stdin/stdout.

    The registry database is opened lazily and re-opened after failures (see
    :class:`relaypolicy.sqlite_registry.SqliteRegistry`), so a missing or broken registry makes
    the plugin reject events rather than exit — strfry would only restart it on the next event.
    """
    from relaypolicy.sqlite_registry import SqliteRegistry

    answers = _claim_stdout()
    registry = SqliteRegistry(registry_path)
    policy = RelayPolicy(registry, config)
    logger.info("serving strfry write-policy requests (registry %s)", registry_path)
    try:
        return serve(sys.stdin.buffer, answers, policy, registry.refresh)
    finally:
        registry.close()
        with contextlib.suppress(OSError, ValueError):  # the reader may be gone already
            answers.close()
