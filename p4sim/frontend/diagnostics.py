"""Source locations and compile errors, formatted like p4c: ``file:line:col: error: message``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOWHERE = Loc("<builtin>", 0, 0)


class CompileError(Exception):
    """A P4 program is invalid or uses a construct p4sim does not support."""

    def __init__(self, loc: Loc | None, message: str) -> None:
        self.loc = loc or NOWHERE
        self.message = message
        super().__init__(f"{self.loc}: error: {message}")


class Unsupported(CompileError):
    """The program is valid P4 but uses a construct p4sim rejects by name."""

    def __init__(self, loc: Loc | None, construct: str) -> None:
        super().__init__(loc, f"{construct} is not supported by p4sim")


@dataclass(frozen=True)
class Warning_:
    """A construct p4sim runs but another target (p4c's BMv2 back end) may refuse."""

    loc: Loc
    message: str

    def __str__(self) -> str:
        return f"{self.loc}: warning: {self.message}"


class LineMap:
    """Maps lines of preprocessed text back to (file, line) of the original sources."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, int]] = []

    def add(self, file: str, line: int) -> None:
        self._entries.append((file, line))

    def loc(self, line: int, col: int) -> Loc:
        if 1 <= line <= len(self._entries):
            f, ln = self._entries[line - 1]
            return Loc(f, ln, col)
        return Loc("<input>", line, col)
