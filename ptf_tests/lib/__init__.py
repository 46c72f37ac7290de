"""Library of the nfcluster PTF suite: P4Runtime client, base test, table helpers, packets."""
