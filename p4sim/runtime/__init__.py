"""The runtime of p4sim: the compiled program at packet time, behind the in-process switch API.

`model` is the compiled program; `tables`, `meters` and `primitives` (arithmetic, checksums,
hashes, parser input) are what its generated code calls; `v1model` runs the architecture
(parser, ingress, packet replication, egress, deparser). `switch` is the in-process API on the
Python engine (with `switch_pre` and `switch_names`; its values are `api_values`), and
`engine_loader` loads a program on the engine asked for, Python or native (`p4sim.native`).
"""
