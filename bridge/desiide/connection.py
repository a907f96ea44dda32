"""The orchestrator's side of a Desiide connection, sans-I/O: bytes in, events out.

Theory of operation (h11's shape: the I/O layer feeds bytes, acts on the events, and asks the
connection for the bytes to write)::

    AWAITING_INITIALIZE --initialize (same major)--> READY
    AWAITING_INITIALIZE --anything else-----------> (answered, state kept)
    any --framing error / EOF----------------------> CLOSED

- The JSON-RPC core is the control socket's (`bridge.control.endpoint.RpcServerConnection`:
  ``Content-Length`` frames with the same limits, parsing, the handshake's order, framing and
  parse errors); this class adds the Desiide protocol's method table, ``initialize`` and error
  vocabulary.
- The connection answers by itself — an `Answer` event holding framed bytes to write — whatever
  needs no handler: parse errors, invalid requests, ``NotInitialized`` before ``initialize``
  (every method, known or not, as the seed says), unknown methods, methods the runtime has not
  registered (``NotImplemented``), bad params (``InvalidParams`` with `validation_message`), and
  ``initialize`` itself (``ProtocolMismatch`` for another major; the connection stays
  uninitialised so the extension may retry).
- A valid request becomes a `Call` with its params already validated into the method's model
  (`bridge.desiide.schema.methods.METHODS`); the runtime runs the handler and writes `result`,
  `error_for` or `internal_error`. Answers may go out in any order (JSON-RPC matches them by
  id), so a slow ``models.test`` does not hold up ``task.approve``.
- Our own requests (``secrets.get``) get ids from `request`; the extension's answers come back
  as `ReverseResult`, the result validated into the method's result model. An answer that
  matches no pending request is dropped: there is nobody to give it to.
- Notifications from the extension are ignored (JSON-RPC 2.0 §4.1: never answered; the
  protocol defines none).
- A framing error is answered once (``ParseError``, or ``InvalidRequest`` for an oversize
  frame) and then `Closed`: a desynchronised stream cannot be trusted. EOF is `Closed` too.
  After `Closed`, `feed` returns nothing; the runtime fails whatever it still has pending.

No clock, no logging, no randomness: the runtime logs the events (never a params model of a
request that may carry a secret; the bases hide input in their errors).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from bridge import __version__
from bridge.control.endpoint import (
    ConnectionState,
    RpcServerConnection,
    method_not_found,
    params_object,
    version_major,
)
from bridge.control.framing import MAX_BODY_BYTES, encode_frame
from bridge.control.rpc import (
    ErrorResponse,
    JsonId,
    Request,
    Response,
    RpcError,
    serialize_request,
)
from bridge.desiide.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    NOT_IMPLEMENTED,
    PROTOCOL_MISMATCH,
    DesiideError,
)
from bridge.desiide.schema.methods import (
    METHODS,
    NOTIFICATION_METHODS,
    PROTOCOL_VERSION,
    REVERSE_METHODS,
    ClientInfo,
    InitializeParams,
    InitializeResult,
    ServerInfo,
    validation_message,
)
from bridge.records import record

__all__ = [
    "SERVER_NAME",
    "Answer",
    "Call",
    "Closed",
    "ConnectionState",
    "DesiideConnection",
    "Event",
    "ReverseResult",
    "mismatch_message",
]

SERVER_NAME: Final = "codedeck-bridge"

_MAJOR: Final = version_major(PROTOCOL_VERSION)


@record
class Call:
    """Run the handler of ``method`` with ``params`` (an instance of ``METHODS[method]``), then
    answer ``request_id`` with `DesiideConnection.result` or `DesiideConnection.error_for`."""

    request_id: JsonId
    method: str
    params: BaseModel


@record
class Answer:
    """Write these framed bytes; the connection answered a request by itself."""

    data: bytes


@record
class ReverseResult:
    """The extension answered one of our requests: exactly one of ``result`` and ``error``.

    Attributes:
        request_id: the id `DesiideConnection.request` returned.
        method: what we asked (``secrets.get``).
        result: the answer, validated into the method's result model.
        error: the extension's error answer, or ``INTERNAL_ERROR`` with "malformed result" when
            its result did not fit the model.
    """

    request_id: int
    method: str
    result: BaseModel | None = None
    error: ErrorResponse | None = None


@record
class Closed:
    """The connection is over: EOF, or a framing error (answered just before). ``reason`` is for
    the log."""

    reason: str = "eof"


Event = Call | Answer | ReverseResult | Closed


def mismatch_message(client_version: str) -> str:
    """The ``ProtocolMismatch`` message: both versions, and which side to update."""
    client_major = version_major(client_version)
    if client_major is not None and _MAJOR is not None and client_major < _MAJOR:
        update = "update the Desiide extension"
    else:
        update = "update codedeck-bridge"
    return (
        f"the Desiide extension speaks protocol {client_version}, but codedeck-bridge "
        f"{__version__} speaks {PROTOCOL_VERSION}: {update} so that both speak the same major "
        "version, then reload the editor window"
    )


class DesiideConnection(RpcServerConnection[Event]):
    """One extension's connection (see the module docstring).

    Args:
        implemented: the methods the runtime has handlers for; any other method of `METHODS` is
            answered ``NotImplemented``. None means all of them.
        max_body: the largest frame body accepted.

    Attributes:
        state: where the handshake is.
        client: the extension's name/version once initialised.
        client_protocol_version: the version it asked for once initialised.
        workspace_roots: the normalized absolute workspace roots from ``initialize`` (empty
            before it, or when no folder is open).
    """

    internal_error_message = "internal error (details are in the orchestrator log)"
    accepts_responses = True

    def __init__(
        self,
        *,
        implemented: Collection[str] | None = None,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        super().__init__(max_body=max_body)
        self._implemented = frozenset(METHODS if implemented is None else implemented)
        self._next_id = 1
        self._pending: dict[int, str] = {}
        self.client: ClientInfo | None = None
        self.client_protocol_version: str | None = None
        self.workspace_roots: tuple[str, ...] = ()

    @property
    def pending_requests(self) -> Mapping[int, str]:
        """Our requests still waiting for an answer: id → method."""
        return dict(self._pending)

    # --- input -----------------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        """Feed bytes read from the extension; return what to do, in order."""
        return self._feed(data)

    def feed_eof(self) -> list[Event]:
        """The extension closed stdin: the connection is over (once)."""
        return self._feed_eof()

    # --- output ----------------------------------------------------------------------------------

    def error_for(self, request_id: JsonId, exc: DesiideError) -> bytes:
        """The framed answer for a handler's `DesiideError`."""
        return self.error(request_id, exc.code, exc.message, exc.data)

    def notify(self, method: str, params: BaseModel | Mapping[str, Any]) -> bytes:
        """A framed notification (``task.event`` or ``log``).

        Raises:
            ValueError: ``method`` is not a notification of the protocol, or the message is over
                the frame limit.
        """
        if method not in NOTIFICATION_METHODS:
            raise ValueError(f"not a Desiide notification: {method!r}")
        return encode_frame(serialize_request(method, _plain(params), None))

    def request(self, method: str, params: BaseModel) -> tuple[int, bytes]:
        """A request to the extension: its id (for the `ReverseResult`) and its framed bytes.

        Raises:
            ValueError: ``method`` is not a reverse request of the protocol, or ``params`` is
                not its params model.
        """
        spec = REVERSE_METHODS.get(method)
        if spec is None:
            raise ValueError(f"not a Desiide reverse request: {method!r}")
        if not isinstance(params, spec[0]):
            raise ValueError(f"{method} takes {spec[0].__name__}, not {type(params).__name__}")
        request_id = self._next_id
        self._next_id += 1
        self._pending[request_id] = method
        return request_id, encode_frame(serialize_request(method, _plain(params), request_id))

    # --- the core's hooks ------------------------------------------------------------------------

    def _answered(self, data: bytes) -> Event:
        return Answer(data)

    def _failed(self, data: bytes, reason: str) -> list[Event]:
        return [Answer(data), Closed(f"framing error: {reason}")]

    def _ended(self, reason: str) -> list[Event]:
        return [Closed(reason)]

    def _to_json(self, value: Any) -> Any:
        """Results are models (dumped with ``exclude_none``) or mappings."""
        return _plain(value)

    def _response(self, response: Response | ErrorResponse) -> Event | None:
        """The event for an answer to our request; None when it matches none pending."""
        if not isinstance(response.id, int) or response.id not in self._pending:
            return None
        method = self._pending.pop(response.id)
        if isinstance(response, ErrorResponse):
            return ReverseResult(response.id, method, error=response)
        result_model = REVERSE_METHODS[method][1]
        try:
            result = result_model.model_validate(response.result)
        except ValidationError as exc:
            malformed = ErrorResponse(
                response.id, INTERNAL_ERROR, f"malformed {method} result: {validation_message(exc)}"
            )
            return ReverseResult(response.id, method, error=malformed)
        return ReverseResult(response.id, method, result=result)

    def _dispatch(self, request: Request, request_id: JsonId) -> Event:
        model = METHODS.get(request.method)
        if model is None:
            raise method_not_found(request.method)
        if request.method not in self._implemented:
            raise RpcError(NOT_IMPLEMENTED, f"not implemented yet: {request.method}")
        return Call(request_id, request.method, _validate(model, request.params))

    def _initialize(self, params: dict[str, Any] | list[Any]) -> InitializeResult:
        # The major is checked before the rest: a client of another major may well send params
        # this version does not know, and "update" helps it more than "unknown param".
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        if isinstance(version, str) and version_major(version) not in (None, _MAJOR):
            raise RpcError(PROTOCOL_MISMATCH, mismatch_message(version))
        parsed = _validate(InitializeParams, params)
        assert isinstance(parsed, InitializeParams)
        self.client = parsed.client
        self.client_protocol_version = parsed.protocolVersion
        self.workspace_roots = tuple(dict.fromkeys(parsed.workspaceRoots))
        return InitializeResult(
            protocolVersion=PROTOCOL_VERSION,
            server=ServerInfo(name=SERVER_NAME, version=__version__),
        )


def _validate(model: type[BaseModel], params: dict[str, Any] | list[Any]) -> BaseModel:
    try:
        return model.model_validate(params_object(params))
    except ValidationError as exc:
        raise RpcError(INVALID_PARAMS, validation_message(exc)) from None


def _plain(value: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        dumped = value.model_dump(mode="json", exclude_none=True)
        assert isinstance(dumped, dict)
        return dumped
    return dict(value)
