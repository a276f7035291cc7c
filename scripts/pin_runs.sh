#!/usr/bin/env bash
# Pins the behaviour of every learner before a refactor: a short fixed-seed run of each
# algorithm, and for each one line with the checksum of its final weights, of the
# deterministic columns of its metrics.csv and of its eval.json (wall-clock columns and
# fields left out). Run it before and after a change and diff the two outputs: a
# refactor that keeps behaviour prints the same lines.
#
#   scripts/pin_runs.sh [RLRIG_BINARY] > before.txt
set -euo pipefail
bin=${1:-target/release/rlrig}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# name | deterministic metrics.csv columns | arguments
runs=(
  "ppo|12|train ppo --env CartPole-v1 --total-steps 8192"
  "ppo-minatar|12|train ppo --env MinAtar/Breakout-v1 --total-steps 2048 --num-envs 8"
  "ppo-minatar-conv|12|train ppo --env MinAtar/Breakout-v1 --total-steps 2048 --num-envs 8 --set conv_channels=16 --set hidden=[128]"
  "ppo-pendulum|12|train ppo --env Pendulum-v1 --total-steps 4096"
  "a2c|12|train a2c --env CartPole-v1 --total-steps 4000"
  "impala|12|train impala --env CartPole-v1 --total-steps 8192"
  "ddpg|9|train ddpg --env Pendulum-v1 --total-steps 1500 --set learning_starts=500"
  "td3|9|train td3 --env Pendulum-v1 --total-steps 1500 --set learning_starts=500"
  "sac|9|train sac --env Pendulum-v1 --total-steps 1500 --set learning_starts=500"
  "dqn|9|train dqn --env CartPole-v1 --total-steps 3000 --set learning_starts=500"
  "es|5|train es --env CartPole-v1 --population 16 --generations 3"
  "ga|5|train ga --env CartPole-v1 --population 16 --generations 3"
  "alphazero|8|train alphazero --env ConnectFour --iterations 2 --simulations 8 --games 16"
)
for r in "${runs[@]}"; do
  IFS='|' read -r name cols args <<<"$r"
  dir="$out/$name"
  # shellcheck disable=SC2086
  "$bin" $args --seed 7 --run-dir "$dir" --quiet >/dev/null 2>&1 \
    || "$bin" $args --seed 7 --run-dir "$dir" >/dev/null 2>&1
  weights=$(ls "$dir"/checkpoints/ckpt-*.safetensors | sort | tail -1)
  w=$(sha256sum <"$weights" | cut -c1-16)
  m=$(cut -d, -f1-"$cols" "$dir/metrics.csv" | sha256sum | cut -c1-16)
  # The returns (episode lengths joined eval.json later, in 2026-11).
  e=$(grep -v '"seconds"\|"wall"\|"mean_length"\|"std_length"' "$dir/eval.json" 2>/dev/null | sha256sum | cut -c1-16)
  echo "$name weights=$w metrics=$m eval=$e rows=$(($(wc -l <"$dir/metrics.csv") - 1))"
done
