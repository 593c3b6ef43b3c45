# Sourced by scripts/run, scripts/test and scripts/bench: make .venv with $PYTHON (python3 unless set),
# e.g. PYTHON=python3.13 ./scripts/test.
#
# `python -m venv` over a venv another Python made keeps the old interpreter's links and writes the new
# one's version into pyvenv.cfg: a venv that is neither. So one made by another minor version (asked for,
# or python3 upgraded since) is made again from scratch (--clear: its packages and bench's install stamp
# go too, so they are installed again after it).
make_venv() {
  local python="${PYTHON:-python3}"
  local version='import sys; print("%d.%d" % sys.version_info[:2])'
  local wanted had
  if ! wanted=$("$python" -c "$version"); then
    echo "error: $python did not run; set PYTHON to a Python 3.11 or newer" >&2
    exit 1
  fi
  if [ -x .venv/bin/python ]; then
    had=$(.venv/bin/python -c "$version" 2>/dev/null || echo "none")
    if [ "$had" = "$wanted" ]; then
      return 0
    fi
    echo "note: .venv holds Python $had; making it again with Python $wanted ($python; PYTHON picks another)" >&2
    "$python" -m venv --clear .venv
    return 0
  fi
  "$python" -m venv .venv
}
