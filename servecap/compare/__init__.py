"""`servecap compare`: two arms (A, B) under load interleaved in slices, judged in pairs.

`plan` (pure: slices, their order and seeds), `arms` (what an arm is and how it is
started), `driver` (warm-up, pilot, power analysis, pairs until decided), `cli`.
The load itself is the real `locust -f loadgen/chat.py` with `--slice-plan`.
"""
