"""Direct invocation of parser and control types (P4_16 §15.1): ``C.apply(args)``, where ``C`` is
a control (or parser) type without constructor parameters, applies an instance of ``C`` that the
enclosing control declares implicitly. As p4c's ``InstantiateDirectCalls``, the checker rewrites
such a call into ``C_inst.apply(args)`` and adds ``@name("C") C() C_inst;`` to the enclosing
block's locals (one instance per call: ``C_inst``, ``C_inst_1`` ..., all with the control-plane
name ``C``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from p4sim.frontend import ast as A


def _stmts(s: A.Stmt | None) -> Iterator[A.Stmt]:
    """``s`` and the statements nested in it."""
    if s is None:
        return
    yield s
    if isinstance(s, A.Block):
        for x in s.stmts:
            yield from _stmts(x)
    elif isinstance(s, A.If):
        yield from _stmts(s.then)
        yield from _stmts(s.other)
    elif isinstance(s, A.Switch):
        for c in s.cases:
            yield from _stmts(c.body)


def instantiate_direct_calls(d: A.ControlDecl | A.ParserDecl, is_block: Callable[[str], bool]) -> None:
    """Rewrite the direct invocations in ``d`` (``is_block(name)``: ``name`` is a control or
    parser type without constructor parameters)."""
    roots: list[A.Stmt] = []
    if isinstance(d, A.ControlDecl):
        roots.append(d.body)
    else:
        for st in d.states:
            roots.extend(st.stmts)
    taken = {x.name for x in d.locals}
    added: list[A.Decl] = []
    for root in roots:
        for s in _stmts(root):
            if not isinstance(s, A.CallStmt) or not isinstance(s.call, A.Call):
                continue
            f = s.call.func
            if not (isinstance(f, A.TypeMember) and f.member == "apply" and is_block(f.type_name)):
                continue
            name, n = f"{f.type_name}_inst", 0
            while name in taken:
                n += 1
                name = f"{f.type_name}_inst_{n}"
            taken.add(name)
            ann = A.Annotation("name", [A.StringLit(f.loc, f.type_name)], f.loc)  # its control-plane name
            added.append(A.Instantiation(f.loc, name, [ann], f.type_name, [], []))
            s.call.func = A.Member(f.loc, A.Name(f.loc, name), "apply")
    d.locals[:0] = added
