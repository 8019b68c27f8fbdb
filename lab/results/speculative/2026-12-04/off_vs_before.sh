#!/bin/bash
# speculation off: the engine bench before (54f59fd, the previous stop's head) and after (HEAD), interleaved
# (kept as run: both trees then had the engine bench as reference_server.bench.engine, today reference_server.engine_bench)
for i in 1 2 3 4 5 6; do
  for side in before after; do
    if [ $side = before ]; then dir=/tmp/base; else dir=/work/main; fi
    (cd $dir && PYTHONPATH=$dir /work/main/.venv/bin/python -m reference_server.bench.engine --preset tiny --strategies continuous,static --threads 1 --num-requests 64 --repeats 3 --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('$side', $i, ' '.join(f\"{k} {v['output_tokens_per_s']:.0f}\" for k,v in d['strategies'].items()))")
  done
done
