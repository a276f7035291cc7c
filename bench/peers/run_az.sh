#!/usr/bin/env bash
# Side-by-side AlphaZero self-play on Connect Four: `rlrig bench alphazero` vs pgx +
# mctx (bench/peers/az_pgx.py), same network (2 x 128 MLP), batches 64 and 512,
# 500 and 64 simulations; also mctx's Gumbel MuZero policy. Writes JSON lines to
# bench/peers/results/az-<date>.jsonl and prints a markdown table with ratios.
#
#   bench/peers/run_az.sh [--no-build] [--steps N]
#
# pgx/mctx: samples/s over N timed self-play steps after a compiling one (default 2).
# rlrig: its bench's "+ inference" figure (self-play search with the network, no
# training), measured over 8 lock-step moves after a warm-up iteration, one thread.
# Needs `pip install pgx mctx` in bench/peers/.venv (setup.sh does it).

# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"
BUILD=1 STEPS=2
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) BUILD=0 ;;
        --steps) STEPS=$2; shift ;;
        *) help_or_unknown "$1" ;;
    esac
    shift
done
PY="$HERE/.venv/bin/python"
"$PY" -c "import pgx, mctx" 2>/dev/null || { echo "run_az.sh: pgx/mctx missing in $PY (run setup.sh)" >&2; exit 1; }
rlrig_binary "$BUILD"
DATE=$(date +%Y-%m-%d)
OUT=$(results_file "az-$DATE.jsonl")
meta_line alphazero "$DATE" >"$OUT"
for b in 64 512; do
    for s in 500 64; do
        echo "[run] rlrig bench alphazero --games $b --simulations $s" >&2
        "$RLRIG" bench alphazero --games "$b" --simulations "$s" --json \
            | python3 -c 'import json,sys; d=json.load(sys.stdin); d["peer"]="rlrig"; print(json.dumps(d))' >>"$OUT"
        echo "[run] pgx+mctx batch $b, $s simulations" >&2
        "$PY" "$HERE/az_pgx.py" --batch "$b" --sims "$s" --steps "$STEPS" 2>/dev/null | tail -n 1 >>"$OUT"
        "$PY" "$HERE/az_pgx.py" --batch "$b" --sims "$s" --steps "$STEPS" --gumbel 2>/dev/null | tail -n 1 >>"$OUT"
    done
done
echo "[run] wrote $OUT" >&2
results_table "$OUT" <<'EOF'
print(f"AlphaZero self-play, Connect Four, 2x128 MLP, {machine}, rlrig {meta['rlrig_rev']}\n")
print("| batch | simulations | rlrig search only | rlrig + inference | rlrig + training | pgx+mctx (muzero_policy) | pgx+mctx (gumbel) | rlrig (+inference) / pgx |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in [x for x in recs[1:] if x.get("peer") == "rlrig"]:
    b, s = r["games"], r["simulations"]
    p = next((x for x in recs if x.get("peer") == "pgx+mctx" and x["batch"] == b and x["simulations"] == s and x["policy"] == "muzero"), None)
    g = next((x for x in recs if x.get("peer") == "pgx+mctx" and x["batch"] == b and x["simulations"] == s and x["policy"] == "gumbel_muzero"), None)
    f = lambda x: "–" if x is None else f"{x['samples_per_sec']:.0f}"
    ratio = "–" if p is None else f"{r['with_inference_samples_per_sec'] / p['samples_per_sec']:.1f}x"
    print(f"| {b} | {s} | {r['search_only_samples_per_sec']:.0f} | {r['with_inference_samples_per_sec']:.0f} | "
          f"{r['with_training_samples_per_sec']:.0f} | {f(p)} | {f(g)} | {ratio} |")
EOF
