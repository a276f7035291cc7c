#!/usr/bin/env bash
# Issue 28 on a GPU machine, in one call: the device PPO's kernel layouts (the sweep
# example's list, or LAYOUTS) timed on 1 and MANY (1,024) CartPole runs, 200 iterations
# each plus a per-kernel GPU profile, then the fastest layout of each run count trained
# for 500k steps per seed beside PureJaxRL (bench/gpu/run_gpu.sh), and `rlrig probe`'s
# host<->device copy rates.
#
#   RLRIG=path/to/rlrig SWEEP=path/to/sweep OUT=dir bash bench/gpu/run_layouts.sh
#
# LAYOUTS (comma-separated, e.g. 1x8uf,1x8wf) narrows the sweep; JAX_SEEDS narrows
# PureJaxRL's runs (run_gpu.sh).
# Needs a release build with `--features gpu` and its sweep example (cargo build
# --release -p rlrig-gpu --example sweep), a Vulkan loader and driver, JAX with CUDA and
# gymnax. Writes layouts.jsonl, gpu.log, gpu.jsonl and probe.json in OUT.
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RLRIG=${RLRIG:-$ROOT/target/release/rlrig}
SWEEP=${SWEEP:-$ROOT/target/release/examples/sweep}
OUT=${OUT:-$HERE/results}
PY=${PY:-python3}
MANY=${MANY:-1024}
mkdir -p "$OUT"
exec </dev/null
echo "# $(date -u +%FT%TZ) layouts, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1), rev $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
best=()
for n in 1 "$MANY"; do
  timeout 300 "$SWEEP" "$n" 102400 ${LAYOUTS:+"$LAYOUTS"} | tee -a "$OUT/layouts.jsonl" | tee "$OUT/sweep-$n.jsonl"
  # The fastest layout of this run count that trained (its last return is a number).
  b=$("$PY" - "$OUT/sweep-$n.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if "train_seconds" in r]
print(min(rows, key=lambda r: r["train_seconds"])["layout"] if rows else "")
PY
)
  echo "fastest for $n runs: ${b:-none}"
  if [ -n "$b" ]; then best+=("$n:$b"); else best+=("$n"); fi
done
RLRIG=$RLRIG OUT=$OUT PY=$PY bash "$HERE/run_gpu.sh" "${best[@]}"
timeout 60 "$RLRIG" probe --json > "$OUT/probe.json" 2>&1
grep -o '"gpu_copy"[^}]*}' "$OUT/probe.json"
"$RLRIG" probe 2>&1 | grep -iE 'gpu|copy|pcie' | head -8
