"""P4_16 parser: lark (LALR) plus a token pass that tells type names from other names.

p4c's lexer knows which identifiers name types; we get the same effect by pre-scanning the token
stream for type declarations (header, struct, enum, typedef, extern, parser, control, package and
generic type parameters) before parsing. The lark tree becomes the syntax tree (`p4sim.frontend.ast`)
in `p4sim.frontend.syntax_tree`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import Lexer

from p4sim.frontend import ast as A
from p4sim.frontend.diagnostics import CompileError, LineMap, Loc, Unsupported
from p4sim.frontend.lexscope import hidden_type_names
from p4sim.frontend.syntax_tree import TreeBuilder

_GRAMMAR = (Path(__file__).parent / "grammar.lark").read_text()
_TYPE_KW = {"bit", "int", "varbit", "tuple", "bool", "error", "string"}
_DECL_KW = {"header", "struct", "header_union", "parser", "control", "package"}


class _ListLexer(Lexer):
    def __init__(self, lexer_conf: Any) -> None:
        pass

    def lex(self, data: Any) -> Iterator[Token]:  # type: ignore[override]
        yield from data


@functools.cache
def _lexer() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", lexer="basic", cache=True)


@functools.cache
def _parser() -> Lark:
    return Lark(
        _GRAMMAR, parser="lalr", lexer=_ListLexer, propagate_positions=True, maybe_placeholders=True,
        cache=True,
    )


def _param_scope(toks: list[Token], lt: int) -> tuple[int, int]:
    """Token range of the declaration whose type parameter list opens at ``lt``: from after the
    previous ``;``/``{``/``}`` (a method's return type comes before its name) to its ``;`` or the
    ``}`` closing its body."""
    start = lt - 1
    while start > 0 and toks[start - 1].value not in (";", "{", "}"):
        start -= 1
    depth = 0
    end = lt
    while end < len(toks):
        v = toks[end].value
        if v in ("(", "[", "{"):
            depth += 1
        elif v in (")", "]", "}"):
            depth -= 1
            if depth <= 0 and v == "}":
                break
        elif v == ";" and depth == 0:
            break
        end += 1
    return start, end


def _scan_types(toks: list[Token]) -> tuple[set[str], set[int]]:
    """Names declared as types anywhere in the program, and the indexes of the tokens that name a
    generic type parameter inside the declaration that introduces it (p4c scopes those, so that
    ``T`` or ``M`` of ``v1model.p4`` stay usable as ordinary names elsewhere)."""
    types: set[str] = {"value_set"}  # built into P4_16 parsers; rejected by name by the checker
    scoped: set[int] = set()
    n = len(toks)
    for i, t in enumerate(toks):
        v = t.value
        if v in _DECL_KW and t.type != "NAME":
            if i + 1 < n and toks[i + 1].type == "NAME":
                types.add(toks[i + 1].value)
        elif v == "enum":
            j = i + 1
            if j < n and toks[j].value == "bit":
                j += 1
                depth = 0
                while j < n:
                    if toks[j].value == "<":
                        depth += 1
                    elif toks[j].value == ">":
                        depth -= 1
                        if depth == 0:
                            j += 1
                            break
                    j += 1
            if j < n and toks[j].type == "NAME":
                types.add(toks[j].value)
        elif v == "extern":
            if i + 2 < n and toks[i + 1].type == "NAME" and toks[i + 2].value in ("{", "<"):
                types.add(toks[i + 1].value)
        elif v in ("typedef", "type") and t.type != "NAME":
            if v == "type" and i > 0 and toks[i - 1].value not in (";", "}", "{", ")"):
                continue  # a parameter or field named "type", not a declaration
            j = i + 1
            depth = 0
            while j < n and not (toks[j].value == ";" and depth == 0) and depth >= 0:
                if toks[j].value in "([{":
                    depth += 1
                elif toks[j].value in ")]}":
                    depth -= 1
                j += 1
            if depth == 0 and toks[j - 1].type == "NAME":
                types.add(toks[j - 1].value)
        elif v == "<" and i >= 2 and toks[i - 1].type == "NAME":
            prev = toks[i - 2]
            if not (prev.type == "NAME" or prev.value in ("void", "extern", ">") or prev.value in _DECL_KW):
                continue
            names: list[str] = []
            j = i + 1
            ok = False
            while j + 1 < n and toks[j].type == "NAME":
                names.append(toks[j].value)
                if toks[j + 1].value == ",":
                    j += 2
                    continue
                if toks[j + 1].value == ">" and j + 2 < n and toks[j + 2].value in ("(", "{"):
                    ok = True
                break
            if ok:
                start, end = _param_scope(toks, i)
                scoped.update(k for k in range(start, min(end + 1, n)) if toks[k].value in names)
    return types, scoped


def _retoken(toks: list[Token]) -> list[Token]:
    types, scoped = _scan_types(toks)
    hidden = hidden_type_names(toks, types)  # values named like a type, in their scope
    out: list[Token] = []
    depth = 0  # open type-argument angle brackets
    n = len(toks)
    for i, t in enumerate(toks):
        if t.type == "NAME" and (t.value in types or i in scoped) and i not in hidden:
            t = Token.new_borrow_pos("TYPE_NAME", t.value, t)
        elif t.value == "<" and t.type != "STRING":
            prev = out[-1] if out else None
            nxt = toks[i + 1] if i + 1 < n else None
            if (prev is not None and prev.type == "TYPE_NAME") or (prev is not None and prev.type == "NAME" and nxt is not None
                  and (nxt.value in types or i + 1 in scoped or nxt.value in _TYPE_KW) and nxt.type != "STRING"):
                t = Token.new_borrow_pos("GENERIC_LT", "<", t)
                depth += 1
            elif prev is not None and prev.value in ("bit", "int", "varbit", "tuple"):
                depth += 1
        elif t.value == ">" and t.type != "STRING":
            if depth > 0:
                depth -= 1
            elif (out and out[-1].value == ">" and out[-1].type == "__SHR_PENDING"):
                pass
            elif (i + 1 < n and toks[i + 1].value == ">" and toks[i + 1].start_pos == (t.end_pos or 0)):
                out.append(Token.new_borrow_pos("SHR", ">>", t))
                toks[i + 1] = Token.new_borrow_pos("__SKIP", ">", toks[i + 1])
                continue
        if t.type == "__SKIP":
            continue
        out.append(t)
    return out


def parse(text: str, lines: LineMap) -> A.Program:
    def loc_of(line: int, col: int) -> Loc:
        return lines.loc(line, col)

    try:
        toks = list(_lexer().lex(text))
    except UnexpectedCharacters as e:
        raise CompileError(loc_of(e.line, e.column), f"unexpected character {text[e.pos_in_stream or 0]!r}") from None
    for i, t in enumerate(toks[:-1]):
        if t.type == "NAME" and t.value == "for" and toks[i + 1].value == "(":
            raise Unsupported(loc_of(t.line or 0, t.column or 0), "for loop (P4_16 1.2.5)")
    toks = _retoken(toks)
    try:
        tree = _parser().parse(toks)
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            raise CompileError(loc_of(len(text.splitlines()), 1), "unexpected end of file") from None
        raise CompileError(loc_of(tok.line or 0, tok.column or 0), f"syntax error, unexpected {tok.value!r}") from None
    except UnexpectedInput as e:
        raise CompileError(loc_of(getattr(e, "line", 0), getattr(e, "column", 0)), "syntax error") from None
    return TreeBuilder(lines).transform(tree)  # type: ignore[no-any-return]
