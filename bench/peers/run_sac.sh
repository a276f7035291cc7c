#!/usr/bin/env bash
# Side-by-side SAC on Pendulum-v1: `rlrig train sac` vs a CleanRL-style JAX SAC
# (bench/peers/sac_jax.py) and, when bench/peers/.venv-sb3 exists, Stable-Baselines3
# (torch CPU; bench/peers/sac_sb3.py). Same hyperparameters (rlrig's Pendulum preset:
# 64-64 ReLU nets, batch 256, lr 1e-3, 1000 warm-up steps, 20k steps, autotuned
# temperature). Writes JSON lines to bench/peers/results/sac-<date>.jsonl and prints
# a markdown table.
#
#   bench/peers/run_sac.sh [--no-build] [--seeds "1 2 3"] [--big-steps N]
#
#   --seeds       seeds of the learning runs (default "1 2 3")
#   --big-steps   env steps of the speed-only runs with CleanRL's 256-256 nets
#                 (default 3000: 2000 updates; 0 skips them)
#
# Measured per run: wall seconds (rlrig: the whole process; JAX: after compiling,
# compile time reported apart; SB3: model.learn), updates/s (time inside updates
# only), time to -250 (first 500-step boundary where the training episodes that
# ended in the last 1000 steps average >= -250) and the greedy 10-episode eval.

# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"

BUILD=1 SEEDS="1 2 3" BIG=3000
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) BUILD=0 ;;
        --seeds) SEEDS=$2; shift ;;
        --big-steps) BIG=$2; shift ;;
        *) help_or_unknown "$1" ;;
    esac
    shift
done
PY="$HERE/.venv/bin/python"
[ -x "$PY" ] || { echo "run_sac.sh: $PY missing; run bench/peers/setup.sh first" >&2; exit 1; }
rlrig_binary "$BUILD"
DATE=$(date +%Y-%m-%d)
OUT=$(results_file "sac-$DATE.jsonl")
TMP=$(mktemp -d /tmp/rlrig-sac-XXXX)
trap 'rm -rf "$TMP"' EXIT

meta_line sac "$DATE" >"$OUT"

# rlrig run -> JSON line, with the same time-to-threshold rule as the peers.
rlrig_run() {  # seed hidden steps
    local seed=$1 hidden=$2 steps=$3 dir="$TMP/rlrig-$1-$2"
    local T0 T1
    T0=$(date +%s.%N)
    # Every core, as XLA's and torch's own thread pools use them (rlrig's learner splits each
    # batch over the pool since issue 21; RLRIG_THREADS overrides).
    "$RLRIG" train sac --env Pendulum-v1 --quiet --threads "${RLRIG_THREADS:-$(nproc)}" --seed "$seed" --total-steps "$steps" \
        --set "hidden=[$hidden, $hidden]" --run-dir "$dir" >"$dir.out" 2>&1 || { cat "$dir.out" >&2; return 1; }
    T1=$(date +%s.%N)
    python3 - "$dir" "$dir.out" "$(echo "$T1 - $T0" | bc -l)" "$seed" "$hidden" "$steps" <<'EOF'
import csv, json, re, sys
run, out, wall, seed, hidden, steps = sys.argv[1:]
text = open(out).read()
m = re.search(r"(\d+) updates in ([\d.]+) s .*?, ([\d.]+) updates/s\)", text)
ev = json.load(open(f"{run}/eval.json"))
rows = list(csv.DictReader(open(f"{run}/metrics.csv")))
t, hit, chunks = 0.0, None, []
for r in rows:
    t += sum(float(r[k]) for k in ("time_env", "time_inference", "time_learner", "time_other"))
    chunks.append((int(r["episodes"]), float(r["episode_return"]) if int(r["episodes"]) else 0.0))
    n = sum(c[0] for c in chunks[-2:])
    if hit is None and n and sum(c[0] * c[1] for c in chunks[-2:]) / n >= -250:
        hit = {"step": int(r["global_step"]), "seconds": round(t, 3)}
print(json.dumps({"peer": "rlrig", "env": "Pendulum-v1", "seed": int(seed), "hidden": int(hidden),
    "total_steps": int(steps), "wall_seconds": round(float(wall), 3), "updates": int(m.group(1)),
    "updates_per_sec": float(m.group(3)), "eval_mean_return": round(ev["mean_return"], 2),
    "time_to_threshold": hit}))
EOF
}

for s in $SEEDS; do
    echo "[run] seed $s: rlrig" >&2
    rlrig_run "$s" 64 20000 >>"$OUT" || exit 1
    echo "[run] seed $s: jax" >&2
    "$PY" "$HERE/sac_jax.py" --seed "$s" 2>"$TMP/jax.err" | tail -n 1 >>"$OUT" || { cat "$TMP/jax.err" >&2; exit 1; }
    if [ -x "$HERE/.venv-sb3/bin/python" ]; then
        echo "[run] seed $s: sb3" >&2
        "$HERE/.venv-sb3/bin/python" "$HERE/sac_sb3.py" --seed "$s" 2>"$TMP/sb3.err" | tail -n 1 >>"$OUT" \
            || { cat "$TMP/sb3.err" >&2; exit 1; }
    fi
done
if [ "$BIG" -gt 0 ]; then
    echo "[run] 256-256 speed runs ($BIG steps)" >&2
    rlrig_run 1 256 "$BIG" >>"$OUT" || exit 1
    "$PY" "$HERE/sac_jax.py" --seed 1 --hidden 256 --total-steps "$BIG" 2>/dev/null | tail -n 1 >>"$OUT"
    if [ -x "$HERE/.venv-sb3/bin/python" ]; then
        "$HERE/.venv-sb3/bin/python" "$HERE/sac_sb3.py" --seed 1 --hidden 256 --total-steps "$BIG" 2>/dev/null \
            | tail -n 1 >>"$OUT"
    fi
fi
echo "[run] wrote $OUT" >&2
results_table "$OUT" <<'EOF'
print(f"SAC Pendulum-v1, {machine}, rlrig {meta['rlrig_rev']}\n")
print("| peer | hidden | seed | steps | wall s | updates/s | time to -250 (s @ step) | greedy eval |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for r in recs[1:]:
    tt = r.get("time_to_threshold")
    tts = f"{tt['seconds']:.2f} @ {tt['step']}" if tt else "–"
    print(f"| {r['peer']} | {r['hidden']} | {r['seed']} | {r['total_steps']} | {r['wall_seconds']:.2f} | "
          f"{r['updates_per_sec']:.0f} | {tts} | {r['eval_mean_return']:.1f} |")
base = {(r["hidden"], r["seed"]): r for r in recs[1:] if r["peer"] == "rlrig"}
print("\nratios (peer / rlrig; > 1 means rlrig is faster):")
for r in recs[1:]:
    b = base.get((r["hidden"], r["seed"]))
    if r["peer"] == "rlrig" or not b:
        continue
    up = b["updates_per_sec"] / r["updates_per_sec"]
    wall = r["wall_seconds"] / b["wall_seconds"]
    tt = ""
    if r.get("time_to_threshold") and b.get("time_to_threshold"):
        tt = f", time to -250 {r['time_to_threshold']['seconds'] / b['time_to_threshold']['seconds']:.1f}x"
    print(f"- {r['peer']} hidden {r['hidden']} seed {r['seed']}: updates/s {up:.1f}x, wall {wall:.1f}x{tt}")
EOF
