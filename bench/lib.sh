# Shared by the bench scripts: the ones that log runs (bench/scaling/run_cores.sh,
# bench/gpu/run_envs.sh, bench/gpu/run_gpu.sh) take RLRIG, OUT, PY, LOG and JSONL from
# `log_files`; the peers' run_*.sh take their results file from `results_file` (run_az.sh,
# run_sac.sh and run_ppo.sh its first line from `meta_line`), their binary from
# `rlrig_binary`, print their table with `results_table` and leave --help and unknown
# arguments to `help_or_unknown`.
#
# Sourcing it (`source "$(dirname "$0")/../lib.sh"`) also starts every one of those
# scripts the same way: -u and pipefail, stdin from /dev/null (no command waits on the
# terminal), HERE the script's folder and ROOT the repository's root.
set -u -o pipefail
exec </dev/null
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Prints the path of results file FILE (NAME-DATE.jsonl) in results/ next to the script
# (created) if no file is there yet, else the first free path with -2, -3, ... before
# .jsonl: a second run on the same day must not overwrite results already committed.
# Quick runs (-quick.jsonl, git-ignored scratch) keep one file.
results_file() { # file
  mkdir -p "$HERE/results"
  local path=$HERE/results/$1 n=2
  case $path in *-quick.jsonl) echo "$path"; return ;; esac
  while [ -e "$path" ]; do path=$HERE/results/${1%.jsonl}-$n.jsonl; n=$((n + 1)); done
  echo "$path"
}

# Prints the {"meta": true, ...} line a peers' results file starts with: the bench, the
# date, the CPU model, the core count, the load average and rlrig's git revision (short
# HEAD of ROOT, "" when git fails; with $RLRIG set, the binary run is another build, so
# its path and the first 12 hex digits of its SHA-1 are added as "rlrig_binary"), then
# each KEY=VALUE given (VALUE an integer when it is one, else a string).
meta_line() { # bench date [key=value...]
  python3 - "$ROOT" "$@" <<'EOF'
import json, os, platform, re, subprocess, sys
root, bench, date, *given = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
binary = os.environ.get("RLRIG", "")
if binary and os.path.isfile(binary):
    import hashlib
    given.append("rlrig_binary=%s sha1:%s" % (binary, hashlib.sha1(open(binary, "rb").read()).hexdigest()[:12]))
extra = {k: int(v) if re.fullmatch(r"-?[0-9]+", v) else v for k, v in (kv.split("=", 1) for kv in given)}
print(json.dumps({"meta": True, "bench": bench, "date": date, "cpu": cpu, "cores": os.cpu_count(),
                  "loadavg": os.getloadavg()[0], "rlrig_rev": rev, **extra}))
EOF
}

# The logging scripts' settings, each overridable from the environment: RLRIG (see
# rlrig_binary; never built here), OUT (results/ next to the script, created), PY; then LOG=$OUT/NAME.log and
# JSONL=$OUT/NAME.jsonl.
log_files() { # name
  rlrig_binary 0
  OUT=${OUT:-$HERE/results}
  PY=${PY:-python3}
  mkdir -p "$OUT"
  LOG=$OUT/$1.log JSONL=$OUT/$1.jsonl
}

# Runs the Python on stdin, which prints the markdown table of peers' results file FILE
# (sys.argv[1]) with these read for it: `recs`, the file's records (its meta line first),
# `meta`, that line, and `machine`, the title's "CPU, N cores, load L" from it.
results_table() { # file
  python3 -c "import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
meta = recs[0]
machine = f\"{meta['cpu']}, {meta['cores']} cores, load {meta['loadavg']:.2f}\"
$(cat)" "$1"
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

# Runs "$RLRIG" ARGS... --quiet (timeout SECONDS) after logging its command line, and sets
# out (its stdout and stderr), rc and wall (seconds of the whole process, 3 decimals);
# the caller declares them local and logs out as it likes.
rlrig_timed() { # seconds, args...
  local secs=$1; shift
  say "\$ rlrig $*"
  local t0 t1
  t0=$(date +%s%N)
  out=$(timeout "$secs" "$RLRIG" "$@" --quiet 2>&1); rc=$?
  t1=$(date +%s%N)
  wall=$(awk "BEGIN { printf \"%.3f\", ($t1 - $t0) / 1e9 }")
}

# Prints a script's header comment (its lines after the shebang, up to the first
# line that is not a comment): what --help shows, so it cannot drift from the header.
usage() {
  awk 'NR > 1 { if (!/^#/) exit; print }' "$1"
}

# A runner's argument that none of its options took: -h or --help prints the script's
# header (usage) and exits 0; anything else is refused, named, with exit 2.
help_or_unknown() { # arg
  case $1 in
    -h|--help) usage "$0"; exit 0 ;;
    *) echo "$(basename "$0"): unknown argument $1" >&2; exit 2 ;;
  esac
}

# Sets RLRIG, the binary a runner measures: $RLRIG when the caller set it (never
# rebuilt), else target/release/rlrig, built first (`cargo build --release -p rlrig`
# plus the arguments after BUILD) when BUILD is 1; a failed build falls back to an
# existing binary with a warning. Exits when there is no binary.
rlrig_binary() {
  local build=$1
  shift
  if [ -z "${RLRIG:-}" ]; then
    RLRIG=$ROOT/target/release/rlrig
    if [ "$build" = 1 ]; then
      echo "[run] cargo build --release -p rlrig${*:+ $*}" >&2
      if ! (cd "$ROOT" && cargo build --release -p rlrig -q "$@") >&2; then
        [ -x "$RLRIG" ] || { echo "[run] build failed and no $RLRIG" >&2; exit 1; }
        echo "[run] WARNING: build failed; using the existing $RLRIG" >&2
      fi
    fi
  fi
  [ -x "$RLRIG" ] || { echo "$(basename "$0"): no rlrig binary at $RLRIG" >&2; exit 1; }
}
