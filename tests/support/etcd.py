"""A real etcd for tests: the launcher's own (`topo.etcd`), re-exported."""

from topo.etcd import EtcdServer, etcd_binary, run_etcd

__all__ = ["EtcdServer", "etcd_binary", "run_etcd"]
