"""P4Runtime P4Info for a compiled program, with ids assigned the way p4c assigns them.

An id is the resource-type prefix byte followed by 24 bits of the Jenkins one-at-a-time hash of
the fully qualified name; collisions are resolved by linear probing over names in sorted order,
and ``@id`` annotations win. Aliases are the shortest unique dotted suffixes.
"""

from __future__ import annotations

from dataclasses import dataclass

from finsy.proto import p4i

from p4sim.frontend import ast as A
from p4sim.runtime.model import Program

PREFIX = {
    "action": 0x01, "table": 0x02, "controller_header": 0x04, "action_profile": 0x11,
    "counter": 0x12, "direct_counter": 0x13, "meter": 0x14, "direct_meter": 0x15,
    "register": 0x16, "digest": 0x17,
}
MATCH = {"exact": 2, "lpm": 3, "ternary": 4, "range": 5, "optional": 6}
UNITS = {"BYTES": 1, "PACKETS": 2, "BOTH": 3}
SCOPES = {"TABLE_AND_DEFAULT": 0, "TABLE_ONLY": 1, "DEFAULT_ONLY": 2}


def jenkins(name: str) -> int:
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


@dataclass
class _Sym:
    kind: str
    name: str
    annotations: list[A.Annotation]


def assign_ids(syms: list[_Sym]) -> dict[tuple[str, str], int]:
    ids: dict[tuple[str, str], int] = {}
    used: set[int] = set()
    for s in syms:
        a = A.find_annotation(s.annotations, "id")
        arg = a.args[0] if a and a.args else None
        if isinstance(arg, A.Number):
            v = arg.value
            if v >> 24 == 0:
                v |= PREFIX[s.kind] << 24
            if v in used:
                raise ValueError(f"@id {v:#x} of {s.name} is used twice")
            ids[(s.kind, s.name)] = v
            used.add(v)
    for kind in PREFIX:
        for name in sorted({s.name for s in syms if s.kind == kind and (s.kind, s.name) not in ids}):
            h = jenkins(name) & 0xFFFFFF
            start = h
            while (PREFIX[kind] << 24 | h) in used:
                h = (h + 1) & 0xFFFFFF
                if h == start:
                    raise ValueError(f"no P4Runtime id left for {name}")
            v = PREFIX[kind] << 24 | h
            used.add(v)
            ids[(kind, name)] = v
    return ids


def aliases(names: list[str]) -> dict[str, str]:
    out = {}
    parts = {n: n.split(".") for n in names}
    for n, p in parts.items():
        for k in range(1, len(p) + 1):
            suffix = ".".join(p[-k:])
            clash = any(m != n and (m == suffix or m.endswith("." + suffix)) for m in names)
            if not clash:
                out[n] = suffix
                break
        else:
            out[n] = n
    return out


# annotations that p4c turns into P4Info structure instead of copying them into the preamble
_STRUCTURAL = {"name", "id", "defaultonly", "tableonly", "controller_header", "field_list", "hidden"}


def annotation_text(a: A.Annotation) -> str:
    """An annotation as p4c writes it into a preamble: ``@noWarn("unused")``."""
    if not a.args:
        return f"@{a.name}"
    parts = []
    for x in a.args:
        if isinstance(x, A.StringLit):
            parts.append(f'"{x.value}"')
        elif isinstance(x, A.Number):
            parts.append(str(x.value))
        elif isinstance(x, A.Name):
            parts.append(x.name)
        else:
            parts.append("...")
    return f"@{a.name}({', '.join(parts)})"


def _pre(msg: p4i.Preamble, id_: int, name: str, alias: str, anns: list[A.Annotation] | None = None) -> None:
    msg.id = id_
    msg.name = name
    msg.alias = alias
    for a in anns or []:
        if a.name not in _STRUCTURAL:
            msg.annotations.append(annotation_text(a))


def build_p4info(prog: Program) -> p4i.P4Info:
    syms: list[_Sym] = []
    for t in prog.tables.values():
        syms.append(_Sym("table", t.fqname, t.annotations))
    for a in prog.actions.values():
        syms.append(_Sym("action", a.fqname, a.annotations))
    for c in prog.counters.values():
        syms.append(_Sym("counter", c.fqname, c.annotations))
    for dc in prog.direct_counters.values():
        syms.append(_Sym("direct_counter", dc.fqname, dc.annotations))
    for r in prog.registers.values():
        syms.append(_Sym("register", r.fqname, r.annotations))
    for mt in prog.meters.values():
        syms.append(_Sym("meter", mt.fqname, mt.annotations))
    for prof in prog.profiles.values():
        syms.append(_Sym("action_profile", prof.fqname, prof.annotations))
    for d in prog.digests.values():
        syms.append(_Sym("digest", d.name, []))
    for ch in prog.controller_headers.values():
        syms.append(_Sym("controller_header", ch.name, []))
    ids = assign_ids(syms)
    al = aliases([s.name for s in syms])

    info = p4i.P4Info()
    info.pkg_info.arch = "v1model"
    for a in sorted(prog.actions.values(), key=lambda x: ids[("action", x.fqname)]):
        m = info.actions.add()
        _pre(m.preamble, ids[("action", a.fqname)], a.fqname, al[a.fqname], a.annotations)
        for i, par in enumerate(a.params, 1):
            pm = m.params.add()
            pm.id = i
            pm.name = par.name
            pm.bitwidth = par.width
    for t in sorted(prog.tables.values(), key=lambda x: ids[("table", x.fqname)]):
        m = info.tables.add()
        _pre(m.preamble, ids[("table", t.fqname)], t.fqname, al[t.fqname], t.annotations)
        for i, k in enumerate(t.keys, 1):
            mf = m.match_fields.add()
            mf.id = i
            mf.name = k.name
            mf.bitwidth = k.width
            mf.match_type = MATCH[k.kind]
        for ar in t.actions:
            r = m.action_refs.add()
            r.id = ids[("action", ar.fqname)]
            r.scope = SCOPES[ar.scope]
            for an in ar.annotations:
                r.annotations.append(f"@{an.name}")
        if t.const_default:
            m.const_default_action_id = ids[("action", t.default_action)]
        if t.implementation:
            m.implementation_id = ids[("action_profile", t.implementation)]
        if t.direct_counter:
            m.direct_resource_ids.append(ids[("direct_counter", t.direct_counter)])
        m.size = t.size
        if t.const_entries is not None:
            if t.table.const_entries:
                m.is_const_table = True
            else:
                m.has_initial_entries = True
    for p in prog.profiles.values():
        m = info.action_profiles.add()
        _pre(m.preamble, ids[("action_profile", p.fqname)], p.fqname, al[p.fqname], p.annotations)
        for tn in p.tables:
            m.table_ids.append(ids[("table", tn)])
        m.with_selector = p.selector
        m.size = p.size
    for c in prog.counters.values():
        m = info.counters.add()
        _pre(m.preamble, ids[("counter", c.fqname)], c.fqname, al[c.fqname], c.annotations)
        m.spec.unit = UNITS[c.unit]
        m.size = c.size
    for dc in prog.direct_counters.values():
        m = info.direct_counters.add()
        _pre(m.preamble, ids[("direct_counter", dc.fqname)], dc.fqname, al[dc.fqname], dc.annotations)
        m.spec.unit = UNITS[dc.unit]
        if dc.table:
            m.direct_table_id = ids[("table", dc.table)]
    for mt in prog.meters.values():
        mm = info.meters.add()
        _pre(mm.preamble, ids[("meter", mt.fqname)], mt.fqname, al[mt.fqname], mt.annotations)
        mm.spec.unit = p4i.MeterSpec.PACKETS if mt.unit == "PACKETS" else p4i.MeterSpec.BYTES
        mm.size = mt.size
    for r in prog.registers.values():
        m = info.registers.add()
        _pre(m.preamble, ids[("register", r.fqname)], r.fqname, al[r.fqname], r.annotations)
        m.type_spec.bitstring.bit.bitwidth = r.width
        m.size = r.size
    for d in prog.digests.values():
        m = info.digests.add()
        _pre(m.preamble, ids[("digest", d.name)], d.name, al[d.name])
        m.type_spec.struct.name = d.name
        st = info.type_info.structs[d.name]
        for mem in d.members:
            sm = st.members.add()
            sm.name = mem.name
            sm.type_spec.bitstring.bit.bitwidth = mem.width
    for name, (width, members) in sorted(prog.ser_enums.items()):
        se = info.type_info.serializable_enums[name]
        se.underlying_type.bitwidth = width
        for mname, value in members.items():
            mem = se.members.add()
            mem.name = mname
            mem.value = (value & ((1 << width) - 1)).to_bytes((width + 7) // 8, "big")
    for ch in prog.controller_headers.values():
        m = info.controller_packet_metadata.add()
        _pre(m.preamble, ids[("controller_header", ch.name)], ch.name, al[ch.name])
        m.preamble.annotations.append(f'@controller_header("{ch.name}")')
        for i, f in enumerate(ch.fields, 1):
            md = m.metadata.add()
            md.id = i
            md.name = f.name
            md.bitwidth = f.width
    return info
