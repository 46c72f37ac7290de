"""The back ends of p4sim: a checked program compiled for the Python engine, and the shared walk.

`emit_walk` (with `emit_calls` and `emit_model`) visits a checked program once for either engine;
`codegen`, `codegen_assign` and `codegen_externs` generate Python for expressions, assignments and
extern calls (the native engine's C generator in `p4sim.native` overrides them); `layout` is the
per-packet state both engines share; `compiler` turns the walk into a `p4sim.runtime.model.Program`;
`p4info` makes its P4Info.
"""
