"""Generated gRPC code of the NF control API (`make proto` regenerates it from nf_control.proto)."""
