"""P4Runtime error values of the server: one exception carrying a gRPC status code name."""

from __future__ import annotations

import grpc
from finsy.proto import rpc_code

_GRPC_BY_NAME: dict[str, grpc.StatusCode] = {c.name: c for c in grpc.StatusCode}


class P4RuntimeError(Exception):
    """A request (or one update of a batch) failed with a canonical gRPC code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        if code not in _GRPC_BY_NAME:
            code = "UNKNOWN"
        self.code = code
        self.message = message

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return _GRPC_BY_NAME[self.code]

    @property
    def canonical_code(self) -> int:
        """The google.rpc.Code number for p4r.Error.canonical_code."""
        return int(rpc_code.Code.Value(self.code))


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError("INVALID_ARGUMENT", message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError("NOT_FOUND", message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError("UNIMPLEMENTED", message)
