"""KServe V2 (Open Inference Protocol) over gRPC: the .proto and its generated module."""
