"""Value names that hide type names, as p4c's lexer sees them.

p4c's lexer returns a type identifier for a name that denotes a type in the current scope; the
parameters of a parser, control or function (inside its body), and variables, constants and
instances (from their declaration to the end of their block) are objects and hide a type of
the same name there: in ``control c(inout hdr hdr) { apply { hdr.a = 1; } }`` the body's
``hdr`` is the parameter. (An action's parameters do not: p4c does not declare them.)

p4sim's parser pre-scans the program for type names (`p4sim.frontend.parser`); this module finds the
tokens that such a value hides, on the same token list, with the same bracket scopes.
"""

from __future__ import annotations

from collections.abc import Sequence

from lark import Token

_TYPE_END = {"bool", "error", "string", "bit", "int", "varbit", "void", ">", "]", ")"}
_BLOCK_KW = {"parser", "control"}
_NOT_FUNCTION = {"if", "switch", "select", "action", "apply", "transition", "return", "else"}


def _group_start(toks: Sequence[Token], close: int) -> int:
    """Index of the ``(`` matching the ``)`` at ``close`` (-1 if none)."""
    depth = 0
    for j in range(close, -1, -1):
        v = toks[j].value
        if v == ")":
            depth += 1
        elif v == "(":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _param_names(toks: Sequence[Token], open_: int, close: int) -> set[str]:
    """The parameter names of the list between ``open_`` and ``close``: in each comma-separated
    parameter, the last name before a default value."""
    names: set[str] = set()
    depth = 0
    last: str | None = None
    in_default = False
    for j in range(open_ + 1, close + 1):
        t = toks[j]
        v = t.value if t.type != "STRING" else ""
        if j == close or (v == "," and depth == 0):
            if last is not None:
                names.add(last)
            last, in_default = None, False
        elif v in ("(", "[", "{", "<"):
            depth += 1
        elif v in (")", "]", "}", ">"):
            depth -= 1
        elif v == "=" and depth == 0:
            in_default = True
        elif depth == 0 and not in_default and t.type == "NAME":
            last = t.value
    return names


def _body_params(toks: Sequence[Token], brace: int, types: set[str]) -> set[str]:
    """The parameters a ``{`` at ``brace`` brings into scope: those of the parser, control or
    function whose body it opens (none for anything else)."""
    j = brace - 1
    groups: list[tuple[int, int]] = []
    while j >= 0 and toks[j].value == ")":
        start = _group_start(toks, j)
        if start < 0:
            return set()
        groups.append((start, j))
        j = start - 1
    if not groups:
        return set()
    if j >= 0 and toks[j].value == ">":  # type parameters: control C<T>(...)
        depth = 0
        while j >= 0:
            if toks[j].value == ">":
                depth += 1
            elif toks[j].value == "<":
                depth -= 1
                if depth == 0:
                    j -= 1
                    break
            j -= 1
    if j < 1 or toks[j].type != "NAME":
        return set()
    before = toks[j - 1]
    block = before.value in _BLOCK_KW and before.type != "NAME"
    function = (len(groups) == 1 and before.value not in _NOT_FUNCTION
                and (before.value in types or before.value in _TYPE_END))
    if not (block or function):
        return set()
    names: set[str] = set()
    for start, end in groups:
        names |= _param_names(toks, start, end)
    return names


def _typedef(toks: Sequence[Token], i: int) -> bool:
    """Whether the statement around token ``i`` is a ``typedef``/``type`` declaration."""
    j = i
    while j > 0 and toks[j - 1].value not in (";", "{", "}"):
        j -= 1
    while j < i and toks[j].value == "@":  # annotations: @name(...) ...
        j += 2
        if j < i and toks[j].value == "(":
            depth = 0
            while j < i:
                depth += toks[j].value == "("
                depth -= toks[j].value == ")"
                j += 1
                if depth == 0:
                    break
    return toks[j].value in ("typedef", "type") and toks[j].type != "NAME"


def hidden_type_names(toks: Sequence[Token], types: set[str]) -> set[int]:
    """Indexes of the tokens named like a type that denote a value hiding that type."""
    scopes: list[set[str]] = [set()]
    out: set[int] = set()
    n = len(toks)
    for i, t in enumerate(toks):
        v = t.value
        if t.type == "STRING":
            continue
        if v == "{":
            scopes.append(_body_params(toks, i, types))
            continue
        if v == "}":
            if len(scopes) > 1:
                scopes.pop()
            continue
        if t.type != "NAME":
            continue
        if v in types and any(v in s for s in scopes):
            out.add(i)
        # a declaration of a value: `T name;`, `T name = ...;`, `T(args) name;` (not of a type:
        # `typedef T name;`)
        if i + 1 < n and toks[i + 1].value in (";", "=") and i > 0:
            prev = toks[i - 1]
            prev_is_type = prev.type == "NAME" and prev.value in types and (i - 1) not in out
            if (prev_is_type or (prev.value in _TYPE_END and prev.type != "NAME")) and not _typedef(toks, i):
                scopes[-1].add(v)
    return out
