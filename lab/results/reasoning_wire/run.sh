# The load generator's time to the first answer token against tcpdump: a scripted server streams 64
# reasoning chunks (vLLM's delta.reasoning_content) then 32 answer tokens to 16 Locust users, 3 rounds.
# Run from the repository root (as root, for tcpdump): bash lab/results/reasoning_wire/run.sh
# Output in OUT (default lab/results/reasoning_wire/DATE). Each round's records (1.7 MB) stay out of git
# (.gitignore); roundN.txt keeps what capture_accuracy printed. The 2026-12-05 rounds ran at 927aa59,
# when the two modules were loadgen.bench.scripted_server and loadgen.bench.capture_accuracy.
set -e
OUT=${OUT:-lab/results/reasoning_wire/$(date +%F)}
mkdir -p $OUT
for round in 1 2 3; do
  taskset -c 1 .venv/bin/python -m lab.loadgen.scripted_server --port 18200 --ttft 0.02 --itl 0.005 \
      --reasoning-tokens 64 > /tmp/scripted.log 2>&1 &
  SERVER=$!
  sleep 2
  .venv/bin/python -m lab.loadgen.capture_accuracy --records $OUT/round$round.jsonl --pcap /tmp/rw$round.pcap -- \
      taskset -c 0 chrt -f 1 .venv/bin/locust -f loadgen/chat.py --headless --only-summary --host http://127.0.0.1:18200 \
      -u 16 -r 16 -t 20s --output-tokens 96 --records $OUT/round$round.jsonl --warmup 3 --level c=16 \
      > $OUT/round$round.txt 2>&1
  kill $SERVER; wait $SERVER 2>/dev/null || true
  cat $OUT/round$round.txt | grep -v "^\[" | tail -8
done
echo BENCH-DONE
