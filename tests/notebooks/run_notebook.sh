#!/bin/sh
# Executes one notebook of notebooks/ the way CI does:
#   run_notebook.sh NOTEBOOK.ipynb OUTPUT_DIR PYTHON_DIR
# PYTHON_DIR holds the build tree's `reshard` Python module (build/python); it
# goes first on the kernel's PYTHONPATH. Fails if the notebook was committed
# with outputs, or if any cell raises (the notebooks assert what they show).
# Exits 77 (CTest SKIP_RETURN_CODE) only when `jupyter nbconvert` is not
# installed (scripts/install-deps.sh --notebooks), or when the notebook imports
# reshard and this build has no Python module (no pybind11).
set -eu
nb=$1 outdir=$2 pydir=$3
PYTHONPATH=$pydir${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
if ! jupyter nbconvert --version >/dev/null 2>&1; then
  echo "jupyter nbconvert not found: skipping $nb (scripts/install-deps.sh --notebooks installs it)"
  exit 77
fi
if grep -q 'import reshard' "$nb" && [ ! -d "$pydir/reshard" ]; then
  echo "no reshard Python module in $pydir (pybind11-dev missing?): skipping $nb"
  exit 77
fi
python3 - "$nb" <<'PY'
import json, sys
nb = json.load(open(sys.argv[1]))
dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
if dirty:
    sys.exit(f"{sys.argv[1]}: cells {dirty} have outputs: commit notebooks without them "
             "(jupyter nbconvert --clear-output --inplace NOTEBOOK)")
PY
mkdir -p "$outdir"
# Matplotlib without a display; quiet the debugger's note about frozen modules.
export MPLBACKEND=Agg PYDEVD_DISABLE_FILE_VALIDATION=1
exec jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
  --output-dir "$outdir" "$nb"
