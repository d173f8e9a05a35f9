"""The library's exceptions, and the one mapping from SQLSTATEs to them."""

from __future__ import annotations

import psycopg

__all__ = [
    "DlockError",
    "StaleTokenError",
    "NotHeldError",
    "BusyError",
    "InvalidArgumentError",
    "PermissionDeniedError",
    "UnknownOutcomeError",
    "ConnectError",
    "LeaseLostError",
    "ServerError",
]


class DlockError(Exception):
    """Base of every error the library raises.

    ``subject`` is the lock or resource name the call was about, ``sqlstate``
    the server's SQLSTATE when the server raised it (else ``None``).
    """

    def __init__(self, message: str, subject: str = "", sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.subject = subject
        self.sqlstate = sqlstate


class StaleTokenError(DlockError):
    """PD001: the fencing token is below the highest the resource accepted."""


class NotHeldError(DlockError):
    """PD002: the token is not the live lease of the lock."""


class BusyError(DlockError):
    """55P03, or a client-side wait: the lock stayed taken for the whole wait."""


class InvalidArgumentError(DlockError, ValueError):
    """22023 / 22004 (and PD020), or an argument the library refused before sending."""


class PermissionDeniedError(DlockError):
    """42501: the role lacks a grant (``fence``, ``holds``, admin functions)."""


class UnknownOutcomeError(DlockError):
    """The call may or may not have taken effect, and retries did not tell.

    ``owner_token`` is the owner the call used: acquiring again with it
    returns the same lease if the first one was granted.
    """

    def __init__(self, message: str, subject: str = "", owner_token: str | None = None,
                 sqlstate: str | None = None) -> None:
        super().__init__(message, subject, sqlstate)
        self.owner_token = owner_token


class ConnectError(DlockError):
    """The library could not connect: nothing was sent."""


class LeaseLostError(DlockError):
    """The lease of a ``with``/``async with`` block was lost while its body ran."""


class ServerError(DlockError):
    """Any other error of the server (for example 25006 on a standby)."""


def is_unknown_sqlstate(state: str | None) -> bool:
    """SQLSTATEs after which a statement may or may not have taken effect."""
    if state is None:
        return False
    return state.startswith("08") or state in ("57P01", "57P02", "57P03", "40003")


def is_unknown(exc: BaseException) -> bool:
    """Whether ``exc`` (a driver error) leaves the call's outcome unknown."""
    if isinstance(exc, UnknownOutcomeError):
        return True
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate
        if state is None:
            # No SQLSTATE: the connection broke (or libpq failed) mid-call.
            return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
        return is_unknown_sqlstate(state)
    return isinstance(exc, OSError)


def mapped(exc: BaseException, subject: str, owner_token: str | None = None) -> DlockError:
    """The library's exception for a driver error: the one SQLSTATE table."""
    if isinstance(exc, DlockError):
        return exc
    message = str(exc).strip()
    state = exc.sqlstate if isinstance(exc, psycopg.Error) else None
    if is_unknown(exc):
        return UnknownOutcomeError(message, subject, owner_token, state)
    if state in ("PD001", "DL001"):
        return StaleTokenError(message, subject, state)
    if state in ("PD002", "DL002"):
        return NotHeldError(message, subject, state)
    if state == "55P03":
        return BusyError(message, subject, state)
    if state in ("22023", "22004", "PD020"):
        return InvalidArgumentError(message, subject, state)
    if state == "42501":
        return PermissionDeniedError(message, subject, state)
    return ServerError(message, subject, state)
