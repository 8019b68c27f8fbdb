"""`servecap bench` (`python -m reference_server.engine_bench`): the engine alone, in-process, each
batching strategy on one seeded workload (`run`), its printed tables (`tables`) and the spread over
repeated passes (`repeats`)."""
