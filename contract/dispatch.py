"""A dispatch table: an item's exact type -> its handler, each handler registered with its own type.

One table serves both runners of the contract: the worker's commands (`contract.commands.Dispatch`,
keyed by command type) and the replication receiver's messages (`contract.replication.Dispatch`,
keyed by message type, on every message of the hot path). Each subclass says what it dispatches:
`KINDS` (the members of its union: `Command`, `Message`), `ERROR` (what it raises for an item it
has no handler for: `ValueError` for a command, `ProtocolError` for a message, which a receiver
counts and closes the connection on) and `describe` (how an item is named in that error).

Typing. `on(cls, handler)` checks statically that the handler takes a `cls`: its signature is
`type[T]` and `Callable[[T], R]` for one `T`. What mypy cannot express is that `T` is a member of
the table's union `K`: a TypeVar cannot be bounded by a class's type parameter, and one bounded by
`K`'s union would make `Callable[[Delta], R]` no handler of `Message`. So `T` is free, and the
membership is checked once, at registration (`TypeError` unless `cls` is one of `KINDS`), not at
each dispatch. At dispatch, each handler sits behind an `isinstance` check of its own type (the
narrowing that lets a table of `Callable[[K], R]` hold a `Callable[[Delta], R]` without a cast or
`Any`); it never fails, since the table is keyed by the item's exact type, and costs one function
call per item (as the two tables it replaced did).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar

K = TypeVar("K")  # what the table dispatches (a union of dataclasses)
R = TypeVar("R")  # what its handlers answer
T = TypeVar("T")  # one handler's own type (a member of K: checked at registration)


class DispatchTable(Generic[K, R]):
    """An item's exact type -> its handler. Subclasses set `KINDS`, `ERROR` and `describe`."""

    KINDS: ClassVar[tuple[type, ...]] = ()
    """The types a handler may be registered for (the members of `K`)."""
    ERROR: ClassVar[type[Exception]] = ValueError
    """What an item without a handler raises."""

    def __init__(self) -> None:
        self._table: dict[type, Callable[[K], R]] = {}

    def describe(self, item: K) -> str:
        """How `item` is named in an error ("a 'd' message", "the command 'ping'")."""
        return f"a {type(item).__name__}"

    def on(self, cls: type[T], handler: Callable[[T], R]) -> None:
        """Register `handler` for the items of type `cls` (one of `KINDS`: TypeError if not)."""
        if cls not in self.KINDS:
            raise TypeError(f"{cls.__name__} is not one of the types {type(self).__name__} "
                            f"dispatches")

        def checked(item: K) -> R:  # (the table's key: `item` is a `cls`)
            if not isinstance(item, cls):
                raise self.ERROR(f"{self.describe(item)} given to the handler of {cls.__name__}")
            return handler(item)

        self._table[cls] = checked

    def handles(self, item: K) -> bool:
        """Whether a handler is registered for `item`'s type."""
        return type(item) in self._table

    def __call__(self, item: K) -> R:
        """`item`'s handler's answer; `ERROR` if there is no handler for its type."""
        handler = self._table.get(type(item))
        if handler is None:
            raise self.ERROR(f"no handler here for {self.describe(item)}")
        return handler(item)
