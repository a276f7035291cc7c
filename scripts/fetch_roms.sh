#!/usr/bin/env bash
# Copies Atari ROMs from ale-py 0.11.2's wheel on PyPI (pinned by SHA-256) into the rlrig
# cache's roms/ directory (RLRIG_CACHE_DIR, else $XDG_CACHE_HOME/rlrig, else ~/.cache/rlrig),
# where rlrig's Atari envs look for them (after --env-arg rom_dir=, RLRIG_ROM_DIR and an
# installed ale-py). ROMs are never part of rlrig's repository.
#
#   bash scripts/fetch_roms.sh              # every ROM in the wheel (~110 games)
#   bash scripts/fetch_roms.sh pong tetris  # only these
set -euo pipefail
exec </dev/null
URL=https://files.pythonhosted.org/packages/3d/92/623e8b3157fdd39a0d78026a1c2727c9215d882d67bfb72697661c7dba6f/ale_py-0.11.2-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
SHA=f7a2082e00fc81b6706daf945bd4c97b69c5542739707638c65ddf65ad74db38
CACHE="${RLRIG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rlrig}"
WHL="$CACHE/ale_py-0.11.2-cp311-manylinux_x86_64.whl"
mkdir -p "$CACHE/roms"
if [ "$#" -gt 0 ] && (cd "$CACHE/roms" && for g in "$@"; do [ -f "$g.bin" ] || exit 1; done); then
  exit 0
fi
if [ ! -f "$WHL" ]; then
  curl -sSfL --retry 3 -o "$WHL.part" "$URL"
  echo "$SHA  $WHL.part" | sha256sum -c --quiet - || { rm -f "$WHL.part"; echo "fetch_roms: checksum mismatch for $URL" >&2; exit 1; }
  mv "$WHL.part" "$WHL"
fi
python3 - "$WHL" "$CACHE/roms" "$@" <<'PY'
import sys, zipfile, os
whl, dest, games = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith("ale_py/roms/") and n.endswith(".bin")]
    have = {os.path.basename(n)[:-4]: n for n in names}
    missing = [g for g in games if g not in have]
    if missing:
        sys.exit(f"fetch_roms: ale-py 0.11.2 has no ROM for {', '.join(missing)} (it has: {', '.join(sorted(have))})")
    for g in games or sorted(have):
        tmp = os.path.join(dest, g + ".bin.part")
        with open(tmp, "wb") as f:
            f.write(z.read(have[g]))
        os.replace(tmp, os.path.join(dest, g + ".bin"))
    print(f"fetch_roms: {len(games or have)} ROM(s) in {dest}")
PY
