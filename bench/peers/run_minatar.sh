#!/usr/bin/env bash
# PPO on the five MinAtar games, rlrig's preset (PureJaxRL's MinAtar settings) against
# the PureJaxRL-style JAX PPO with the same settings (bench/peers/ppo_jax.py on
# gymnax's MinAtar), each for 10 M steps: the JAX runs first, one seed a game, then
# `rlrig bench learn` per game on gymnax's semantics (no sticky actions, episodes cut
# at 1,000 steps), one seed, then over --seeds on the envs as rlrig ships them
# (MinAtar's sticky actions, p = 0.1; no time limit). Seaquest is left out by default:
# gymnax's Seaquest steps ~10x slower than its other games (a 10M-step JAX run takes
# over half an hour here) and the matrix has no threshold for it yet.
# Writes bench/peers/results/minatar-ppo-<date>.jsonl (the JAX lines with their
# learning curves) and the bench learn JSON under --dir, and prints a table.
#
#   bench/peers/run_minatar.sh [--no-build] [--games "Breakout SpaceInvaders ..."]
#                              [--seeds 1-5] [--total-steps N] [--dir DIR] [--skip-jax]
#                              [--jax-sticky]
#
# --jax-sticky also runs the JAX peer over --seeds on the envs as rlrig ships them
# (ppo_jax.py --sticky 0.1 and no time limit), one seed at a time: the like-for-like
# reference for the sticky column (its runs go to minatar-ppo-sticky-<date>.jsonl).
#
# The JAX run is one compiled call timed once (`--single-call`), compile apart. Its
# time to a return is the updates' share of that call (ppo_jax.py --threshold); rlrig's
# is `bench learn`'s (training time until the mean of the last 20 episodes reaches it).
# Environment: RLRIG=/path/to/rlrig overrides the binary.

# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"

BUILD=1 GAMES="Breakout SpaceInvaders Asterix Freeway" SEEDS=1-5 STEPS=10000000
DIR=runs/minatar-ppo SKIP_JAX=0 JAX_STICKY=0
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) BUILD=0 ;;
        --games) GAMES=$2; shift ;;
        --seeds) SEEDS=$2; shift ;;
        --total-steps) STEPS=$2; shift ;;
        --dir) DIR=$2; shift ;;
        --skip-jax) SKIP_JAX=1 ;;
        --jax-sticky) JAX_STICKY=1 ;;
        *) help_or_unknown "$1" ;;
    esac
    shift
done

PY="$HERE/.venv/bin/python"
[ "$SKIP_JAX" = 1 ] || [ -x "$PY" ] || {
    echo "run_minatar.sh: $PY missing; run bench/peers/setup.sh first" >&2
    exit 1
}
rlrig_binary "$BUILD"
mkdir -p "$DIR"

# Freeway ends on its own timer at 2,500 steps (gymnax's time limit is that timer), so
# neither side gets a time limit for it.
own_end() { [ "$1" = Freeway ]; }

# Runs ppo_jax.py with ARGS..., its output in $DIR/NAME.{out,err}, and appends its JSON
# line to results file OUT; on failure prints its stderr and exits.
jax_run() { # out name args...
    local out=$1 name=$2; shift 2
    echo "[run] ppo_jax.py $*" >&2
    "$PY" "$HERE/ppo_jax.py" "$@" --total-steps "$STEPS" --single-call --curve \
        >"$DIR/$name.out" 2>"$DIR/$name.err" || {
        cat "$DIR/$name.err" >&2
        echo "[run] ppo_jax.py failed: $*" >&2
        exit 1
    }
    tail -n 1 "$DIR/$name.out" >>"$out"
}

if [ "$SKIP_JAX" = 0 ]; then
    DATE=$(date +%Y-%m-%d)
    OUT=$(results_file "minatar-ppo-$DATE.jsonl")
    meta_line minatar-ppo "$DATE" total_steps="$STEPS" seeds="$SEEDS" >"$OUT"
    for g in $GAMES; do
        jax_run "$OUT" "jax-$g" --env "MinAtar/$g-v1" --seed 1
    done
    if [ "$JAX_STICKY" = 1 ]; then
        OUT=$(results_file "minatar-ppo-sticky-$DATE.jsonl")
        meta_line minatar-ppo-sticky "$DATE" total_steps="$STEPS" seeds="$SEEDS" \
            sticky=0.1 >"$OUT"
        for g in $GAMES; do
            limit=(--max-steps 100000000)
            own_end "$g" && limit=()
            for s in $(seq "${SEEDS%-*}" "${SEEDS#*-}"); do
                jax_run "$OUT" "jax-sticky-$g-$s" --env "MinAtar/$g-v1" --seed "$s" \
                    --sticky 0.1 "${limit[@]}"
            done
        done
    fi
fi

# gymnax's semantics first (no sticky actions, episodes cut at 1,000 steps but Freeway's
# 2,500), one seed: the like-for-like comparison; then the envs as rlrig ships them.
for g in $GAMES; do
    limit=", max_episode_steps = 1000"
    own_end "$g" && limit=
    echo "[run] rlrig bench learn --env MinAtar/$g-v1 --algo ppo, gymnax's semantics, seed 1" >&2
    "$RLRIG" bench learn --env "MinAtar/$g-v1" --algo ppo --seeds 1 --threads 2 \
        --total-steps "$STEPS" --set "env_args={sticky_action_prob = 0.0$limit}" \
        --dir "$DIR/gymnax" --out "$DIR/gymnax/learn-$g.json" \
        --plot "$DIR/gymnax/learn-$g.png" --resume >&2 || exit 1
done
for g in $GAMES; do
    echo "[run] rlrig bench learn --env MinAtar/$g-v1 --algo ppo --seeds $SEEDS" >&2
    "$RLRIG" bench learn --env "MinAtar/$g-v1" --algo ppo --seeds "$SEEDS" --threads 2 \
        --total-steps "$STEPS" --dir "$DIR/sticky" --out "$DIR/sticky/learn-$g.json" \
        --plot "$DIR/sticky/learn-$g.png" --resume >&2 || exit 1
done

# The table: the JAX runs of each game in the results files (one seed each, with its
# curve; the return is their mean, the times the first run's), rlrig's from the bench
# learn files.
python3 - "$HERE/results" "$DIR" $GAMES <<'EOF'
import glob, json, sys
res, d, games = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, res.rsplit("/", 1)[0])
import peer_common
jax, jax_sticky = {}, {}
for f in sorted(glob.glob(f"{res}/minatar-ppo-*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        if r.get("peer") == "purejaxrl-style" and r.get("curve"):
            # Runs on rlrig's own env semantics (--jax-sticky) apart from gymnax's.
            (jax_sticky if r.get("sticky") else jax).setdefault(r["env"], []).append(r)

def crossing(r, threshold):
    """(steps, seconds) where a JAX run's curve reaches `threshold`, or None."""
    c = r["curve"]
    u = peer_common.crossing(c["return_sum"], c["episodes"], threshold)
    if u is None:
        return None
    return ((u + 1) * r["steps_per_update"], r["train_seconds"] * (u + 1) / r["num_updates"])

def cell(path):
    try:
        return json.load(open(path))["cells"][0]
    except (OSError, KeyError, IndexError, ValueError):
        return None

f = lambda v, p=1: "–" if v is None else f"{v:.{p}f}"
def greedy(c):
    r = c and c.get("final_return")
    if not r:
        return "–"
    ci = f" ± {r['ci95']:.1f}" if r.get("ci95") is not None else ""
    return f"{r['mean']:.1f}{ci} ({r['min']:.1f} to {r['max']:.1f}, {r['n']} seeds)"

print("| game | threshold | JAX train return at 10M (runs) | JAX s | rlrig greedy, sticky 0.1 | reached | "
      "JAX train return, sticky 0.1 (runs) | "
      "rlrig greedy, gymnax's semantics | rlrig s to threshold (gymnax's) | JAX s to it | JAX s / rlrig s |")
print("|---|---:|---:|---:|---|---:|---:|---|---:|---:|---:|")
for g in games:
    env = f"MinAtar/{g}-v1"
    runs = jax.get(env, [])
    j = runs[0] if runs else None
    jr = sum(r["final_return"] for r in runs) / len(runs) if runs else None
    s, n = cell(f"{d}/sticky/learn-{g}.json"), cell(f"{d}/gymnax/learn-{g}.json")
    t = (s or n or {}).get("threshold")
    rs = n and n.get("seconds_to_threshold")
    h = j and t is not None and j.get("curve") and crossing(j, t)
    js = h[1] if h else None
    ratio = f"{js / rs:.1f}x" if rs and js else "–"
    reached = f"{s['reached']} of {len(s['seeds'])}" if s else "–"
    st = jax_sticky.get(env, [])
    sr = sum(r["final_return"] for r in st) / len(st) if st else None
    print(f"| {g} | {f(t, 0)} | {f(jr)} ({len(runs)}) | {f(j and j['train_seconds'], 0)} "
          f"| {greedy(s)} | {reached} | {f(sr)} ({len(st)}) | {greedy(n)} | {f(rs, 0)} "
          f"| {f(js, 0)} | {ratio} |")
EOF
