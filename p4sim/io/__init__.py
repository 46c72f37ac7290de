"""Port I/O of p4sim: Linux interfaces by AF_PACKET sockets (`ports`), or by memory-mapped packet
rings (`pktring`, `ring_ports`), and the wire impairment of a port (`impair`).
"""
