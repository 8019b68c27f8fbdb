"""TEMPORARY (not committed): replaced once loadgen.samplers exists."""
class Observers:
    def __init__(self, out, interval_s, pid, metrics_url): pass
    def start(self): return {}
    def stop(self): pass
