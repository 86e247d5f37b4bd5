#!/usr/bin/env bash
# The main job (`make run`): a real English corpus -> token shards -> a small
# GPT trained on whatever device Dawn finds (lavapipe on a CPU) -> samples.
#
#   make run                                   Debian's fortune cookies, bytes, ~1 min on 2 CPU cores
#   make run ARGS="--text 'notes/*.txt'"       your own text files instead
#   make run ARGS="--preset gpt2-124m --steps 100"   GPT-2 124M with GPT-2's tokenizer (for a GPU)
# Other arguments go to `wgpt train` (e.g. --steps 1000 --channels 256).
set -euo pipefail
cd "$(dirname "$0")/.."

text="" preset="demo" train_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --text) text=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    *) train_args+=("$1"); shift ;;
  esac
done

case "$preset" in
  demo)
    tokenizer=bytes
    model=(--layers 3 --heads 4 --channels 96 --seq 64 --batch 8 --steps 800 --lr 3e-3 --warmup 20
           --val-every 100 --val-batches 16 --checkpoint-every 200) ;;
  gpt2-124m)
    tokenizer=gpt2
    model=(--layers 12 --heads 12 --channels 768 --seq 1024 --batch 8 --total-batch 524288 --steps 2000
           --lr 6e-4 --warmup 100 --val-every 100 --val-batches 20 --checkpoint-every 100 --sample-every 500) ;;
  *) echo "demo: unknown preset '$preset' (demo or gpt2-124m)" >&2; exit 2 ;;
esac

if [ -z "$text" ]; then
  dir=/usr/share/games/fortunes
  if [ ! -d "$dir" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "demo: installing Debian's fortune cookies (package fortunes) as the training corpus"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fortunes >/dev/null
    else
      echo "demo: no corpus: install Debian's 'fortunes' package, or pass --text 'your/*.txt'" >&2
      exit 1
    fi
  fi
  mapfile -t files < <(find "$dir" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
  name=fortunes
else
  mapfile -t files < <(compgen -G "$text" | sort)
  [ ${#files[@]} -gt 0 ] || { echo "demo: no file matches '$text'" >&2; exit 1; }
  name=custom
fi

. scripts/use-tuned-lavapipe.sh
use_tuned_lavapipe build/wgpt

data="data/$name-$tokenizer"
out="runs/$name-$preset"
echo "== tokenize: ${#files[@]} text files -> $data"
rm -rf "$data"
build/wgpt tokenize --tokenizer "$tokenizer" --out "$data" "${files[@]}"
echo "== train -> $out"
build/wgpt train --data "$data/*.bin" --out "$out" --tokenizer "$tokenizer" --resume none "${model[@]}" "${train_args[@]}"
echo "== samples"
build/wgpt sample --checkpoint "$out/latest.ckpt" --count 3 --tokens 300 --seed 1
echo "== done: loss curves in $out/loss.svg, metrics in $out/metrics.jsonl"
