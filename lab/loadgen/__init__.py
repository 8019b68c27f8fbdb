"""Benchmarks and evidence for `loadgen`: its capacity and its timing accuracy against a scripted
server's own log or a packet capture (the scripted server is the tests' too)."""
