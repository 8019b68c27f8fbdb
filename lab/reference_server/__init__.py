"""Benchmarks and evidence for `reference_server`: attention candidates, the machine's drift, the GIL,
LoRA, quantization and speculative decoding step costs. (`servecap bench` is product code:
`reference_server/engine_bench/`.)"""
