"""A real etcd for tests: the launcher's own (`topo.etcd`), re-exported."""

from topo.etcd import EtcdCluster, EtcdServer, etcd_binary, run_etcd, run_etcd_cluster

__all__ = ["EtcdCluster", "EtcdServer", "etcd_binary", "run_etcd", "run_etcd_cluster"]
