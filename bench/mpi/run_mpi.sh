#!/usr/bin/env bash
# MPI data-parallel learners against threads on one machine (PPO's envs split over
# the ranks, every learner's backward passes): each job runs as one
# process on 1 thread, one process on 2 threads, and `mpirun -n 2` ranks on 1 thread
# each, in alternating rounds; prints the wall time each run reports ("in X s") and
# checks that the MPI run's final weights equal the one-process run's.
#
#   bench/mpi/run_mpi.sh [ROUNDS]      (default 3; needs a `--features mpi` build:
#                                       cargo build --release -p rlrig --features mpi)
# Environment: RLRIG=/path/to/rlrig overrides target/release/rlrig; ONLY=TEXT runs the
# jobs whose command line contains TEXT.
set -euo pipefail
ROUNDS=${1:-3}
ONLY=${ONLY:-}
RLRIG=${RLRIG:-$(dirname "$0")/../../target/release/rlrig}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
JOBS=(
  "ppo --env CartPole-v1 --total-steps 500000"
  "ppo --env CartPole-v1 --num-envs 64 --total-steps 1000000"
  "ppo --env BipedalWalker-v3 --total-steps 100000"
  "sac --env Pendulum-v1 --total-steps 3000"
  "sac --env Pendulum-v1 --total-steps 3000 --set hidden=[256,256]"
)
wall() { sed -n '/ in [0-9.]* s /{s/.* in \([0-9.]*\) s .*/\1/p;q}' "$1"; }
weights() { cat "$1"/checkpoints/"$(sed 's/.json$/.safetensors/' "$1/checkpoints/latest")" | md5sum; }
j=0
for job in "${JOBS[@]}"; do
  j=$((j + 1))
  [[ -z "$ONLY" || "$job" == *"$ONLY"* ]] || continue
  echo "== rlrig train $job"
  for r in $(seq "$ROUNDS"); do
    line="round $r:"
    for mode in t1 t2 mpi2; do
      d="$TMP/$j-$mode-$r"
      rc=0
      case $mode in
        t1) "$RLRIG" train $job --threads 1 --quiet --eval-episodes 1 --run-dir "$d" >"$d.out" 2>&1 || rc=$? ;;
        t2) "$RLRIG" train $job --threads 2 --quiet --eval-episodes 1 --run-dir "$d" >"$d.out" 2>&1 || rc=$? ;;
        mpi2) mpirun --allow-run-as-root --oversubscribe -n 2 "$RLRIG" train $job --threads 1 \
                --quiet --eval-episodes 1 --run-dir "$d" >"$d.out" 2>&1 || rc=$? ;;
      esac
      if [ "$rc" != 0 ]; then
        echo "$mode failed (exit $rc):"; tail -20 "$d.out"; exit 1
      fi
      line="$line $mode $(wall "$d.out") s"
    done
    same=$([ "$(weights "$TMP/$j-t1-$r")" = "$(weights "$TMP/$j-mpi2-$r")" ] && echo yes || echo NO)
    echo "$line; mpi2 weights = one process's: $same"
  done
done
