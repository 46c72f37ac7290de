"""Checks of a program against its architecture's declarations, as p4c's front end does them.

* **Package arguments**: each parser or control given to a package (``V1Switch(...)``,
  TNA's ``Pipeline(...)``) must fit the architecture's parser/control type for that position:
  as many parameters as the type has (``@optional`` ones may be left out), each with the same
  direction and type, the type variables (``H``, ``M`` of ``IngressParserT<H, M>``) bound to one
  type across the package (the ingress parser's ``hdr`` and the ingress control's are the same
  struct). A package given to a package must be of the declared package type.
* **Abstract methods**: an extern instance whose type declares ``abstract`` methods (TNA's
  ``RegisterAction``) must implement each of them in its initializer
  (``RegisterAction<...>(reg) name = { void apply(inout T value, out U rv) { ... } };``) with
  the declared return type and parameters (the ``@optional`` ones may be left out), and only
  those; the bodies are checked as functions of the enclosing block.
"""

from __future__ import annotations

from typing import Protocol

from p4sim.frontend import ast as A
from p4sim.frontend import types as T
from p4sim.frontend.diagnostics import Loc
from p4sim.frontend.symbols import Scope
from p4sim.frontend.typecheck import ExprChecker, err, optional, required_count


class BodyChecker(Protocol):
    """What checking an initializer needs of the program's checker (`checker.Checker`): type
    resolution and the checking of a function body."""

    glob: Scope

    def resolve(self, t: A.TypeRef, scope: Scope,
                tvars: dict[str, T.Type] | None = None) -> T.Type: ...

    def function(self, d: A.FunctionDecl, scope: Scope, declare: bool = True) -> None: ...


def check_package_args(ck: ExprChecker, pkg: T.Block, args: list[A.Expr], loc: Loc) -> None:
    """The (already typed) arguments of a package instantiation against the package's parameters."""
    decl = pkg.decl
    assert isinstance(decl, A.PackageDecl)
    params = decl.params
    what = f"package {decl.name}"
    if len(args) > len(params):
        raise err(loc, f"{what}: too many arguments ({len(args)} given, {len(params)} expected)")
    if len(args) < required_count(params):
        raise err(loc, f"{what}: too few arguments ({len(args)} given, {len(params)} expected)")
    own: dict[str, T.Type] = {n: T.TypeVar(n) for n in decl.type_params}
    bound: dict[str, T.Type] = {}
    for p, a in zip(params, args, strict=False):
        pt = ck.resolve(p.type, ck.glob, own)
        at = a.ty
        if not isinstance(pt, T.Block):
            continue  # a constant or extern parameter: typed like any argument
        if not isinstance(at, T.Block):
            raise err(a.loc, f"{what}: parameter {p.name} is a {pt.kind} {pt}, the argument is not a {pt.kind}")
        if pt.kind == "package":
            if at.decl is not pt.decl:
                raise err(a.loc, f"{what}: parameter {p.name} is a package {pt}, the argument is {at}")
            continue
        block = at.decl
        if at.kind != pt.kind or not isinstance(block, (A.ParserDecl, A.ControlDecl)):
            raise err(a.loc, f"{what}: parameter {p.name} is a {pt.kind} {_show(pt)}, the argument is "
                             f"{at.kind} {at}")
        _match_block(ck, pt, block, bound, a.loc, f"{what}, parameter {p.name}")


def _show(bt: T.Block) -> str:
    return f"{bt.decl.name}<{', '.join(str(a) for a in bt.args)}>" if bt.args else str(bt.decl.name)


def _match_block(ck: ExprChecker, proto: T.Block, block: A.ParserDecl | A.ControlDecl,
                 bound: dict[str, T.Type], loc: Loc, where: str) -> None:
    """A user parser/control against the architecture's parser/control type ``proto``."""
    pdecl = proto.decl
    tps: list[str] = list(getattr(pdecl, "type_params", []))
    tv = dict(zip(tps, proto.args, strict=False))
    pparams: list[A.Param] = pdecl.params
    ours = block.params
    what = f"{proto.kind} {block.name} (for {_show(proto)}, {where})"
    if len(ours) > len(pparams):
        raise err(block.loc, f"{what}: {len(ours)} parameters, the architecture has {len(pparams)}")
    if len(ours) < required_count(pparams):
        raise err(block.loc, f"{what}: {len(ours)} parameters, the architecture needs "
                             f"{required_count(pparams)}")
    for mine, theirs in zip(ours, pparams, strict=False):
        if mine.direction != theirs.direction:
            d_mine, d_theirs = mine.direction or "directionless", theirs.direction or "directionless"
            raise err(mine.loc, f"{what}: parameter {mine.name} is '{d_mine}', the architecture's "
                                f"{theirs.name} is '{d_theirs}'")
        want = ck.resolve(theirs.type, ck.glob, tv)
        have = ck.resolve(mine.type, ck.glob)
        if isinstance(want, T.TypeVar):
            prev = bound.get(want.name)
            if prev is None:
                bound[want.name] = have
                continue
            want = prev
        if want != have:
            raise err(mine.loc, f"{what}: parameter {mine.name} has type {have}, the architecture's "
                                f"{theirs.name} has type {want}")


def check_initializer(ck: BodyChecker, d: A.Instantiation, ty: T.Extern, scope: Scope) -> None:
    """An extern instance's abstract methods: all implemented, with the declared signature."""
    decl = ty.decl
    abstract = {m.name: m for m in decl.methods if m.abstract}
    impls = d.initializer or []
    done: set[str] = set()
    tv = dict(zip(decl.type_params, ty.args, strict=False))
    for f in impls:
        want = abstract.get(f.name)
        what = f"{d.name}.{f.name}"
        if want is None:
            raise err(f.loc, f"{what}: {decl.name} has no abstract method {f.name}")
        if f.name in done:
            raise err(f.loc, f"{what}: implemented twice")
        done.add(f.name)
        _match_method(ck, want, f.proto, tv, scope, what)
        ck.function(f, scope, declare=False)
    missing = [n for n in abstract if n not in done]
    if missing:
        raise err(d.loc, f"{d.name}: {decl.name} instances must implement the abstract method "
                         f"{', '.join(missing)}")


def _match_method(ck: BodyChecker, want: A.FunctionProto, have: A.FunctionProto, tv: dict[str, T.Type],
                  scope: Scope, what: str) -> None:
    if have.type_params:
        raise err(have.loc, f"{what}: an abstract method implementation cannot be generic")
    ret_want, ret_have = ck.resolve(want.ret, ck.glob, tv), ck.resolve(have.ret, scope)
    if ret_want != ret_have:
        raise err(have.loc, f"{what}: returns {ret_have}, the abstract method returns {ret_want}")
    ps, qs = have.params, want.params
    if len(ps) > len(qs) or len(ps) < required_count(qs):
        raise err(have.loc, f"{what}: {len(ps)} parameters, the abstract method has {len(qs)}"
                            + (f" ({required_count(qs)} required)" if any(optional(q) for q in qs) else ""))
    for p, q in zip(ps, qs, strict=False):
        if p.direction != q.direction:
            raise err(p.loc, f"{what}: parameter {p.name} is '{p.direction or 'directionless'}', the "
                             f"abstract method's {q.name} is '{q.direction or 'directionless'}'")
        pt, qt = ck.resolve(p.type, scope), ck.resolve(q.type, ck.glob, tv)
        if pt != qt and qt is not T.DONTCARE:
            raise err(p.loc, f"{what}: parameter {p.name} has type {pt}, the abstract method's {q.name} "
                             f"has type {qt}")
