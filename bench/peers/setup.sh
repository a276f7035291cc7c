#!/usr/bin/env bash
# Installs the peer environment libraries that bench/peers/env_peers.py measures.
#
#   bench/peers/.venv          Python 3.11 (python3): gymnasium, numpy, envpool, jax[cpu], gymnax, optax, pgx, mctx
#   bench/peers/.venv-sb3      with RLRIG_PEERS_SB3=1: stable-baselines3 + torch (the SAC peer)
#   bench/peers/.venv-operant  Python 3.8 (if one is on PATH or in pyenv): operant
#
# operant's only Linux wheels are tagged cp38-cp38 (a CPython-3.8 ABI build)
# while its metadata says Requires-Python >=3.10, so pip refuses it on every
# Python. We install that wheel into its own Python 3.8 venv, ignoring the
# Requires-Python pin, with numpy 1.24 (the last numpy for 3.8; the wheel's
# metadata asks for numpy>=2, which does not exist for 3.8).
#
# gymnax 1.0.1 pins gymnasium<1.4; we want the latest Gymnasium (1.4.x) for the
# gymnasium-* peers, so gymnax is installed with --no-deps and its runtime
# dependencies (jax, flax, matplotlib, seaborn, and six, which gymnax imports
# without declaring it) are installed explicitly.
# gymnax's step/reset code does not use gymnasium.
#
# Idempotent: a peer whose import already works is skipped. Never reads stdin.
# A peer that fails to install is reported and the script goes on; it exits 0
# as long as the main venv exists.
set -u
cd "$(dirname "$0")"
HERE=$(pwd)
VENV="$HERE/.venv"
OPVENV="$HERE/.venv-operant"
GYMNASIUM_SPEC="gymnasium>=1.4,<1.5"
PIP_FLAGS=(--disable-pip-version-check --no-input -q)
exec </dev/null

declare -a REPORT=()
note() { REPORT+=("$1"); echo "[setup] $1"; }

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV"
    python3 -m venv "$VENV" || { echo "[setup] FATAL: python3 -m venv failed"; exit 1; }
    "$VENV/bin/pip" install "${PIP_FLAGS[@]}" --upgrade pip >/dev/null 2>&1 || true
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install "${PIP_FLAGS[@]}")

# have MODULE [PYTHON] -> prints version and returns 0 if importable
have() {
    local py=${2:-$PY}
    "$py" - "$1" 2>/dev/null <<'EOF'
import importlib, importlib.metadata as md, sys
name = sys.argv[1]
importlib.import_module(name)
try:
    print(md.version(name))
except Exception:
    print(getattr(sys.modules[name], "__version__", "?"))
EOF
}

install_peer() {  # label module pip-args...
    local label=$1 mod=$2; shift 2
    local v
    if v=$(have "$mod"); then
        note "$label: already installed ($mod $v)"
        return 0
    fi
    echo "[setup] installing $label: pip install $*"
    local log; log=$(mktemp)
    if "${PIP[@]}" "$@" >"$log" 2>&1 && v=$(have "$mod"); then
        note "$label: installed ($mod $v)"
        rm -f "$log"; return 0
    fi
    note "$label: FAILED to install: $(tail -n 1 "$log")"
    tail -n 5 "$log" | sed 's/^/    /'
    rm -f "$log"; return 1
}

# numpy + gymnasium (latest 1.4.x): needed by every Python peer.
install_peer numpy numpy numpy
v=$(have gymnasium) && case "$v" in 1.4.*) ;; *) v="";; esac
if [ -n "${v:-}" ]; then
    note "gymnasium: already installed (gymnasium $v)"
else
    echo "[setup] installing gymnasium: pip install $GYMNASIUM_SPEC"
    if "${PIP[@]}" "$GYMNASIUM_SPEC" >/dev/null 2>&1 && v=$(have gymnasium); then
        note "gymnasium: installed (gymnasium $v)"
    else
        note "gymnasium: FAILED to install"
    fi
fi

# Box2D 2.3 (pybox2d) + pygame: Gymnasium's LunarLander / BipedalWalker import both.
install_peer box2d Box2D box2d pygame

# EnvPool (C++ envs with a thread pool). Wheels exist for cp311 manylinux_2_28.
# Keep gymnasium pinned so envpool's 'gymnasium>=0.26' cannot move it.
install_peer envpool envpool envpool "$GYMNASIUM_SPEC"

# ale-py 0.11.2 (ALE, its AtariVectorEnv, the ROMs) and OpenCV: the Atari peer and the
# reference of scripts/golden/make_golden_atari.py (Gymnasium's AtariPreprocessing).
install_peer ale-py ale_py "ale-py==0.11.2" opencv-python-headless "$GYMNASIUM_SPEC"

# JAX on CPU + gymnax (gymnax pins gymnasium<1.4, hence --no-deps; see top).
if v=$(have gymnax); then
    note "gymnax: already installed (gymnax $v, jax $(have jax))"
else
    echo "[setup] installing jax[cpu] flax matplotlib seaborn six, then gymnax --no-deps"
    if "${PIP[@]}" "jax[cpu]" flax matplotlib seaborn six "$GYMNASIUM_SPEC" >/dev/null 2>&1 \
        && "${PIP[@]}" --no-deps gymnax >/dev/null 2>&1 && v=$(have gymnax); then
        note "gymnax: installed (gymnax $v, jax $(have jax))"
    else
        note "gymnax: FAILED to install (jax[cpu]/gymnax)"
    fi
fi

# optax (Adam + grad clipping for ppo_jax.py, the PureJaxRL-style PPO peer).
# flax usually pulls it in already.
install_peer optax optax optax

# pgx + mctx: the AlphaZero self-play peer (az_pgx.py, run_az.sh).
install_peer pgx pgx pgx
install_peer mctx mctx mctx

# Stable-Baselines3 (torch, ~3 GB of wheels) is the SAC peer in its own venv, only
# when asked: RLRIG_PEERS_SB3=1 bench/peers/setup.sh
if [ "${RLRIG_PEERS_SB3:-0}" = 1 ]; then
    if [ -x "$HERE/.venv-sb3/bin/python" ] && "$HERE/.venv-sb3/bin/python" -c "import stable_baselines3" 2>/dev/null; then
        note "stable-baselines3: already installed (in .venv-sb3)"
    elif python3 -m venv "$HERE/.venv-sb3" && "$HERE/.venv-sb3/bin/pip" install "${PIP_FLAGS[@]}" stable-baselines3 "$GYMNASIUM_SPEC" >/dev/null 2>&1; then
        note "stable-baselines3: installed (in .venv-sb3)"
    else
        note "stable-baselines3: FAILED to install"
    fi
fi

# operant: needs a CPython 3.8 (see top).
find_py38() {
    local c root=""
    command -v pyenv >/dev/null 2>&1 && root=$(pyenv root 2>/dev/null)
    for c in python3.8 ${root:+"$root"/versions/3.8*/bin/python3.8}; do
        # a pyenv shim exists even when 3.8 is not selected, so really run it
        if "$c" -c 'import sys; assert sys.version_info[:2] == (3, 8)' >/dev/null 2>&1; then
            command -v "$c"; return 0
        fi
    done
    return 1
}
if [ -x "$OPVENV/bin/python" ] && v=$(have operant "$OPVENV/bin/python"); then
    note "operant: already installed (operant $v, in .venv-operant, Python 3.8)"
elif PY38=$(find_py38); then
    echo "[setup] installing operant into .venv-operant with $PY38"
    log=$(mktemp)
    if { [ -x "$OPVENV/bin/python" ] || "$PY38" -m venv "$OPVENV"; } >"$log" 2>&1 \
        && "$OPVENV/bin/python" -m pip install "${PIP_FLAGS[@]}" "numpy==1.24.*" >>"$log" 2>&1 \
        && "$OPVENV/bin/python" -m pip install "${PIP_FLAGS[@]}" --no-deps --ignore-requires-python \
               --only-binary=:all: "operant==0.3.*" >>"$log" 2>&1 \
        && v=$(have operant "$OPVENV/bin/python"); then
        note "operant: installed (operant $v, in .venv-operant, Python 3.8, numpy 1.24; wheel is cp38-only)"
    else
        note "operant: FAILED to install: $(tail -n 1 "$log")"
        tail -n 5 "$log" | sed 's/^/    /'
    fi
    rm -f "$log"
else
    note "operant: NOT installed: its only Linux wheels are cp38-cp38 (Requires-Python >=3.10 contradicts them; no sdist) and no Python 3.8 was found"
fi

echo
echo "[setup] summary:"
for line in "${REPORT[@]}"; do echo "  - $line"; done
