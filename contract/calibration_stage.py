"""Where `servecap sweep --calibrate` puts its calibration stage, which `servecap predict` reads:
RUN_DIR/calibrate/<stage>/, each a run directory of its own (one owner for the name)."""

STAGE_DIR = "calibrate"
