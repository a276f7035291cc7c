#!/usr/bin/env bash
# Side-by-side PPO: `rlrig train ppo` vs a PureJaxRL-style JAX PPO
# (bench/peers/ppo_jax.py), same hyperparameters (CleanRL's on CartPole-v1; on
# MinAtar/Breakout-v1 MinAtar's conv network with gymnax's settings, lr 5e-4: rlrig's
# MinAtar preset before PureJaxRL's MLPs, and the learner benchmark of issue 21; the
# MLP preset's comparison is bench/peers/run_minatar.sh).
# Writes JSON lines to bench/peers/results/ppo[-<env>]-<date>.jsonl and prints a
# markdown table.
#
#   bench/peers/run_ppo.sh [--no-build] [--env ID] [--total-steps N] [--seed S] [--repeat K]
#
#   --env           CartPole-v1 (default) or MinAtar/Breakout-v1
#   --no-build      use target/release/rlrig as it is (default: cargo build
#                   --release -p rlrig first, a no-op when fresh)
#   --total-steps   env steps for both (default 500000, or $PPO_TOTAL_STEPS);
#                   on CartPole any other count writes ppo-<date>-quick.jsonl
#                   (git-ignored)
#   --seed          seed for both (default 1)
#   --repeat        K pairs of runs, rlrig then JAX each time, into one results file;
#                   the table gives each pair's ratio and their median (default 1)
#
# rlrig: wall clock of the whole process (start-up, training, the final 10-episode
# greedy evaluation, writing the run dir), peak RSS from /usr/bin/time -v.
# JAX: compile time, and train_seconds = a second call of the compiled function.
# Environment: RLRIG=/path/to/rlrig overrides the binary.

# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"

BUILD=1 STEPS=${PPO_TOTAL_STEPS:-500000} SEED=1 ENV=CartPole-v1 REPEAT=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) BUILD=0 ;;
        --total-steps) STEPS=$2; shift ;;
        --seed) SEED=$2; shift ;;
        --env) ENV=$2; shift ;;
        --repeat) REPEAT=$2; shift ;;
        *) help_or_unknown "$1" ;;
    esac
    shift
done
case "$REPEAT" in ''|*[!0-9]*|0) echo "run_ppo.sh: --repeat takes a whole number >= 1" >&2; exit 2 ;; esac

PY="$HERE/.venv/bin/python"
[ -x "$PY" ] || { echo "run_ppo.sh: $PY missing; run bench/peers/setup.sh first" >&2; exit 1; }
rlrig_binary "$BUILD"

# GNU time for peak RSS (install it if we may; otherwise go on without).
TIMEV=()
if ! /usr/bin/time -v true >/dev/null 2>&1; then
    echo "[run] /usr/bin/time missing; trying apt-get install -y time" >&2
    SUDO=; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
    $SUDO apt-get install -y -q time >/dev/null 2>&1 || true
fi
/usr/bin/time -v true >/dev/null 2>&1 && TIMEV=(/usr/bin/time -v -o)

DATE=$(date +%Y-%m-%d)
SLUG=$([ "$ENV" = CartPole-v1 ] || echo "-$ENV" | tr '/' '-' | tr 'A-Z' 'a-z')
# Quick (git-ignored) runs: CartPole with another step count than the recorded 500k.
QUICK=$([ "$ENV" != CartPole-v1 ] || [ "$STEPS" = 500000 ] || echo -quick)
# MinAtar: the conv network on both sides.
RLRIG_SETS=() JAX_ARGS=()
case "$ENV" in
    MinAtar/*)
        RLRIG_SETS=(--set conv_channels=16 --set "hidden=[128]" --set learning_rate=5e-4)
        JAX_ARGS=(--conv) ;;
esac
OUT=$(results_file "ppo$SLUG-$DATE$QUICK.jsonl")
TMP=$(mktemp -d /tmp/rlrig-ppo-XXXX)
trap 'rm -rf "$TMP"' EXIT

rss_mb() {  # file -> MB or null
    local kb
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$1" 2>/dev/null)
    if [ -n "$kb" ]; then awk -v k="$kb" 'BEGIN{printf "%.1f", k/1024}'; else echo null; fi
}

meta_line ppo "$DATE" total_steps="$STEPS" seed="$SEED" env="$ENV" >"$OUT"

for ((pair = 1; pair <= REPEAT; pair++)); do
    # ---- rlrig ----
    rm -rf "$TMP/run"
    echo "[run] rlrig train ppo --env $ENV --total-steps $STEPS --threads 2" >&2
    T0=$(date +%s.%N)
    "${TIMEV[@]}" ${TIMEV:+"$TMP/rlrig.time"} "$RLRIG" train ppo --env "$ENV" "${RLRIG_SETS[@]}" --quiet --threads 2 \
        --seed "$SEED" --total-steps "$STEPS" --run-dir "$TMP/run" >"$TMP/rlrig.out" 2>&1
    RC=$?
    T1=$(date +%s.%N)
    cat "$TMP/rlrig.out" >&2
    [ "$RC" = 0 ] || { echo "[run] rlrig failed (exit $RC)" >&2; exit 1; }
    python3 - "$TMP/run" "$TMP/rlrig.out" "$(echo "$T1 - $T0" | bc -l)" "$(rss_mb "$TMP/rlrig.time")" \
        "$("$RLRIG" --version 2>/dev/null)" "$ENV" >>"$OUT" <<'EOF'
import csv, json, re, sys
run, out, wall, rss, version, env = sys.argv[1:]
text = open(out).read()
m = re.search(r"ppo on [^:]+: (\d+) steps in ([\d.]+) s \(([\d.]+) steps/s\)", text)
ev = json.load(open(f"{run}/eval.json"))
rows = list(csv.DictReader(open(f"{run}/metrics.csv")))[-20:]   # last 20 updates, as ppo_jax.py
eps = sum(int(r["episodes"]) for r in rows)
tot = sum(int(r["episodes"]) * float(r["episode_return"]) for r in rows if int(r["episodes"]) > 0)
print(json.dumps({
    "peer": "rlrig", "env": env, "total_steps": int(m.group(1)),
    "wall_seconds": round(float(wall), 3), "train_seconds": float(m.group(2)),
    "steps_per_sec": float(m.group(3)),
    "final_return": round(tot / eps, 2) if eps else None, "final_return_episodes": eps,
    "eval_mean_return": ev["mean_return"], "eval_episodes": ev["episodes"],
    "peak_rss_mb": None if rss == "null" else float(rss), "threads": 2, "version": version}))
EOF

    # ---- JAX ----
    echo "[run] ppo_jax.py --env $ENV --total-steps $STEPS" >&2
    "${TIMEV[@]}" ${TIMEV:+"$TMP/jax.time"} "$PY" "$HERE/ppo_jax.py" --env "$ENV" "${JAX_ARGS[@]}" --total-steps "$STEPS" --seed "$SEED" \
        >"$TMP/jax.out" 2>"$TMP/jax.err"
    RC=$?
    [ "$RC" = 0 ] || { cat "$TMP/jax.err" >&2; echo "[run] ppo_jax.py failed (exit $RC)" >&2; exit 1; }
    python3 - "$(tail -n 1 "$TMP/jax.out")" "$(rss_mb "$TMP/jax.time")" >>"$OUT" <<'EOF'
import json, sys
d = json.loads(sys.argv[1])
d["peak_rss_mb"] = None if sys.argv[2] == "null" else float(sys.argv[2])
print(json.dumps(d))
EOF
done

echo "[run] wrote $OUT" >&2
cat "$OUT"
echo
results_table "$OUT" <<'EOF'
rl = [x for x in recs if x.get("peer") == "rlrig"]; jx = [x for x in recs if x.get("peer") == "purejaxrl-style"]
f = lambda v, p=2: "–" if v is None else f"{v:.{p}f}"
print(f"PPO {meta.get('env', 'CartPole-v1')}, {meta['total_steps']} steps, {machine}\n")
print("| peer | wall s | wall s incl. compile | steps/s | final return (train, last 20 updates) | peak RSS MB | jax_train_s / rlrig_s |")
print("|---|---:|---:|---:|---:|---:|---:|")
ratios = []
for r, j in zip(rl, jx):
    ratios.append(j['train_seconds'] / r['wall_seconds'])
    print(f"| rlrig (incl. start-up + eval; greedy eval {f(r['eval_mean_return'], 1)}) | {f(r['wall_seconds'])} | {f(r['wall_seconds'])} "
          f"| {r['total_steps'] / r['wall_seconds']:.0f} | {f(r['final_return'], 1)} | {f(r['peak_rss_mb'], 1)} | 1 |")
    print(f"| purejaxrl-style (JAX {j['jax']}, train-only) | {f(j['train_seconds'])} | {f(j['seconds_including_compile'])} "
          f"| {j['steps_per_sec']:.0f} | {f(j['final_return'], 1)} | {f(j['peak_rss_mb'], 1)} "
          f"| {ratios[-1]:.2f} |")
r, j = rl[-1], jx[-1]
print(f"\nrlrig's own timer: {r['train_seconds']} s ({r['steps_per_sec']:.0f} steps/s); "
      f"JAX compile {j['compile_seconds']} s, first call {j['first_call_seconds']} s.")
if len(ratios) > 1:
    s = sorted(ratios); n = len(s)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    print(f"{n} pairs: jax_train_s / rlrig_s {', '.join(f'{x:.2f}' for x in ratios)}; median {med:.2f}")
EOF
