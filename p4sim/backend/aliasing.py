"""When copy-in/copy-out may be done by aliasing.

P4 passes ``out``/``inout`` arguments (and, in p4sim, composite ``in`` arguments) by copy-in /
copy-out. p4sim binds such a parameter to the argument's storage instead (no copy), which gives
the same result unless the callee can reach that storage another way: through a name of the
enclosing control (``c = 24`` in an action called as ``a(c)``), through another argument
(``f(x, x)``), or when the argument is not a whole place (a slice ``h.a[0:0]``, a header stack
element with a run-time index). This module finds the storage a body reaches through outer
names: the compilers then copy (`p4sim.backend.emit_walk`) only the parameters that need it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from p4sim.frontend import ast as A

_SKIP = frozenset({"loc", "ty", "ref", "const", "sym"})


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, (list, tuple)):
        for x in node:
            yield from _children(x)
        return
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return
    for f in dataclasses.fields(node):
        if f.name not in _SKIP:
            v = getattr(node, f.name)
            if isinstance(v, (list, tuple)) or (dataclasses.is_dataclass(v) and not isinstance(v, type)):
                yield v


def _root(e: A.Expr) -> A.Expr:
    while isinstance(e, (A.Member, A.Index, A.Slice)):
        e = e.expr
    return e


def outer_refs(node: Any, is_outer: Any, seen: set[int] | None = None) -> Iterator[A.Expr]:
    """The longest member/index/slice chains of ``node`` (statements, expressions) whose root name
    ``is_outer(name)`` (storage of the enclosing control or parser), also inside the actions and
    functions it calls (each body once)."""
    seen = set() if seen is None else seen
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (A.Name, A.Member, A.Index, A.Slice)):
            root = _root(n)
            if isinstance(root, A.Name) and is_outer(root):
                yield n
            # indexes and slice bounds may read outer storage too
            x: Any = n
            while isinstance(x, (A.Member, A.Index, A.Slice)):
                if isinstance(x, A.Index):
                    stack.append(x.index)
                x = x.expr
            continue
        if isinstance(n, A.Call):
            if n.ref is not None and n.ref[0] in ("action", "function"):
                decl = n.ref[1].decl
                if id(decl) not in seen:
                    seen.add(id(decl))
                    stack.append(decl.body)
            # a method's receiver (h of h.setValid()), not the method as a member
            stack.append(n.func.expr if isinstance(n.func, A.Member) else n.func)
            stack.extend(n.args)
            continue
        stack.extend(_children(n))


def has_call(e: Any) -> bool:
    """Whether an expression calls something (its value may depend on when it is evaluated)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, A.Call):
            return True
        stack.extend(_children(n))
    return False


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether the slot ranges [start, end) ``a`` and ``b`` share a slot."""
    return a[0] < b[1] and b[0] < a[1]
