"""Cross-package evidence: the gate's false-alarm and detection rates, overload, predictions that
transfer, the emulated GPU, the speculative crossover, KServe's two protocols, plan against fleet,
vLLM against the reference, the GPU check, and the tiny random Llama the vLLM suite serves."""
