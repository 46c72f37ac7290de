"""The P4Runtime v1 server of p4sim: gRPC service, arbitration, entity translation, stream, digests."""
