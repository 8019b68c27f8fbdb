# The load generator's time to the first answer token against tcpdump, with vLLM's CPU build as the server:
# the tiny checkpoint built as a reasoning model (lab/servecap/tiny_llama.py --reasoning), served with
# --reasoning-parser deepseek_r1 on core 1; Locust (core 0, SCHED_FIFO) holds 4 users for 20 s; 3 rounds.
# Run from a git worktree of the commit (REPO, default this checkout), nothing else heavy beside it:
#   bash lab/results/reasoning_wire_vllm/run.sh
# Output in OUT (default lab/results/reasoning_wire_vllm/DATE); records left out (size), roundN.txt keeps
# what capture_accuracy printed. The 2026-12-05 rounds ran at 8530623 (REPO=/tmp/bench-tree), when the
# modules were servecap/bench/tiny_llama.py and loadgen.bench.capture_accuracy.
set -e
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
REPO=${REPO:-$HERE}
VENV=${VENV:-$HERE/.venv}
VVENV=${VVENV:-$HERE/.venv-vllm}
OUT=${OUT:-$HERE/lab/results/reasoning_wire_vllm/$(date +%F)}
mkdir -p $OUT
cd $REPO
rm -rf /tmp/reasoner && HF_HUB_OFFLINE=1 $VVENV/bin/python lab/servecap/tiny_llama.py /tmp/reasoner --reasoning > /dev/null 2>&1
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_NO_USAGE_STATS=1 taskset -c 1 \
    $VVENV/bin/python -m vllm.entrypoints.openai.api_server --model /tmp/reasoner --host 127.0.0.1 --port 18300 \
    --served-model-name tiny --dtype float32 --max-model-len 1024 --enforce-eager --max-num-seqs 8 \
    --reasoning-parser deepseek_r1 > /tmp/vllm-wire.log 2>&1 &
SERVER=$!
for i in $(seq 120); do curl -sf 127.0.0.1:18300/v1/models > /dev/null && break; sleep 1; done
for round in 1 2 3; do
  PYTHONPATH=$REPO $VENV/bin/python -m lab.loadgen.capture_accuracy --records /tmp/rwv$round.jsonl --pcap /tmp/rwv$round.pcap -- \
      taskset -c 0 chrt -f 1 $VENV/bin/locust -f loadgen/chat.py --headless --only-summary --host http://127.0.0.1:18300 \
      -u 4 -r 4 -t 20s --prompt-tokens uniform:8:32 --output-tokens 48 --records /tmp/rwv$round.jsonl --warmup 3 --level c=4 \
      > $OUT/round$round.txt 2>&1
  grep -v "^\[" $OUT/round$round.txt | tail -10
done
kill $SERVER; wait $SERVER 2>/dev/null || true
echo BENCH-DONE
