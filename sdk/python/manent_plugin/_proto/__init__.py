"""Generated protobuf and grpclib modules (tools/regen.py). Do not edit."""
