# Shared by the bench scripts: the ones that log runs (bench/scaling/run_cores.sh,
# bench/gpu/run_envs.sh) source it after setting LOG and JSONL; the peers' run_*.sh take
# their results file from `results_file`.

# Prints PATH (bench/peers/results/NAME-DATE.jsonl) if no file is there yet, else the first
# free PATH with -2, -3, ... before .jsonl: a second run on the same day must not overwrite
# results already committed. Quick runs (-quick.jsonl, git-ignored scratch) keep one file.
results_file() { # path
  local path=$1 n=2
  case $path in *-quick.jsonl) echo "$path"; return ;; esac
  while [ -e "$path" ]; do path=${1%.jsonl}-$n.jsonl; n=$((n + 1)); done
  echo "$path"
}

# Prints a line and appends it to $LOG.
say() { echo "$@" | tee -a "$LOG"; }

# Runs a command that prints one JSON object on its last line (timeout $JSON_TIMEOUT s,
# default 150): the command and its output go to $LOG, {label, rc, result} to $JSONL, and
# a summary line of the keys named in $JSON_KEYS (an extended regex) to stdout.
json_run() { # label, command...
  local label=$1; shift
  say "\$ $*"
  local out; out=$(timeout "${JSON_TIMEOUT:-150}" "$@" 2>&1); local rc=$?
  echo "$out" >> "$LOG"
  local last; last=$(echo "$out" | grep '^{' | tail -1)
  echo "{\"label\": \"$label\", \"rc\": $rc, \"result\": ${last:-null}}" >> "$JSONL"
  echo "$label rc $rc $(echo "$last" | grep -oE "\"(${JSON_KEYS:-steps_per_sec})\": ?[0-9.e+-]+" | tr '\n' ' ')"
}
