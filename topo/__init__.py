"""topo: Mininet topologies as data, the switch classes for p4sim and BMv2, and the launcher and
scenarios behind `make run`.
"""
