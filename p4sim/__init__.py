"""p4sim: the embedded P4_16 target of nfcluster.

It owns everything needed to run our `.p4` source without p4c or BMv2: the front end (preprocessor,
parser, type checker, which also checks Tofino TNA programs p4sim does not run), the compiler of a checked program into Python closures, the v1model runtime
(tables, externs, packet replication engine), P4Info generation, the P4Runtime server and the port
I/O that attaches it to Linux interfaces.
"""
