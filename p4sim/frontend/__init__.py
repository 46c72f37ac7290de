"""The front end of p4sim: preprocessing, parsing and the semantic checks of a P4_16 program.

`preprocess` (cpp or pcpp, with p4sim's own include files in `p4include/`), `parser` (lark LALR
with `lexscope` telling type names from other names, building the `ast`), then `checker` (names in
`symbols`, types in `types`/`typecheck`/`calls`, the architecture's rules in `architecture`,
direct calls in `direct_calls`) and `outparams` (p4c's uninitialised-out-parameter warning).
`check` is ``p4sim check``: this front end alone. Errors are `diagnostics`. Nothing here imports
the back end or the runtime.
"""
