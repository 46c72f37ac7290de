"""The example NFs; importing this package registers them all with `nf_host.nf_api`."""
