#!/usr/bin/env bash
# bench/ranks.sh: data-parallel scaling of `wgpt train`: the same global batch
# on 1 rank (accumulating N micro-batches) and on N ranks under mpirun, the
# exchange in one sum after the backward (--grad-buckets 0) and in buckets
# while it runs (--grad-buckets 1), with tokens/s (median of the steps after
# the first), the time a step spends in the comm layer's calls (comm_ms,
# rank 0) and its share, the exchange's time in flight (exchange_ms, median)
# and its part after the backward had finished (median of exchange_ms -
# overlap_ms), and the measured overlap: the share of the exchange's time
# in flight spent while the backward was still computing (sum of overlap_ms
# over the sum of exchange_ms).
#   bench/ranks.sh [N] [any wgpt train option...]
# On one CPU (lavapipe) the ranks share the cores: the figures prove the
# mechanism, not a speed-up.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
wgpt=${WGPT:-$here/build/wgpt}
n=${1:-2}; shift || true
work=$(mktemp -d /tmp/wgpt_ranks_XXXXXX)
trap 'rm -rf "$work"' EXIT
cat "$here"/README.md "$here"/docs/*.md > "$work/corpus.txt"
"$wgpt" tokenize --tokenizer bytes --out "$work/data" "$work/corpus.txt" > /dev/null
# The demo's shape: 3 layers, 96 channels, context 64.
args=(--data "$work/data/*.bin" --layers 3 --heads 4 --channels 96 --seq 64 --batch 4 --steps 12
      --val-every 0 --sample-every 0 --resume none --quiet --total-batch $((n * 4 * 64)) "$@")
summary() {  # metrics.jsonl -> tokens/s, step ms, comm ms and %; exchange, its part after the backward, overlap
  python3 - "$1" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l][1:]
med = lambda f: statistics.median(f(x) for x in r)
tps, ms, cm = med(lambda x: x["tokens_per_s"]), med(lambda x: x["ms"]), med(lambda x: x.get("comm_ms", 0))
ex = med(lambda x: x.get("exchange_ms", 0))
after = med(lambda x: x.get("exchange_ms", 0) - x.get("overlap_ms", 0))
sx, so = sum(x.get("exchange_ms", 0) for x in r), sum(x.get("overlap_ms", 0) for x in r)
print(f"{tps:6.0f} tokens/s {ms:6.1f} ms/step {cm:5.1f} ms comm ({100 * cm / ms:4.1f}%)  exchange {ex:5.2f} ms, "
      f"{after:5.2f} after the backward, overlap {100 * so / sx if sx else 0:4.1f}%")
PY
}
"$wgpt" train "${args[@]}" --out "$work/one"
echo "1 rank,  $n micro-batches:              $(summary "$work/one/metrics.jsonl")"
for b in 0 1; do
  mpirun --oversubscribe --allow-run-as-root -np "$n" "$wgpt" train "${args[@]}" --grad-buckets $b --out "$work/many$b"
  echo "$n ranks, 1 micro-batch, --grad-buckets $b: $(summary "$work/many$b/metrics.jsonl")"
done
