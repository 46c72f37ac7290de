"""nf_host: the host NF runtime.

It owns the per-NF process: packet I/O on the data interface, per-slot ordering, the NF API and the
example NFs, output commit, replication of state deltas to the backup and the cluster peers, the
backup role, slot moves, the control API used by the controller, and the global-state client.
"""
