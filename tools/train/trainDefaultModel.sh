#!/bin/sh
# Rebuilds models/austen-1m.gguf from scratch (CI never runs this). Run from the repository root:
#   sh tools/train/trainDefaultModel.sh
# Needs: apt-get install -y --no-install-recommends r-cran-janeaustenr python3-torch libopenblas0-pthread
set -eu
WORK="${WORK:-/tmp/austen}"
MINUTES="${MINUTES:-20}"
PYTHON="${PYTHON:-/usr/bin/python3}"
mkdir -p "$WORK"
"$PYTHON" tools/train/extract_austen.py "$WORK/books.json"
npm exec -- node tools/train/buildDataset.ts "$WORK/books.json" "$WORK/data"
OPENBLAS_NUM_THREADS=1 "$PYTHON" tools/train/train.py "$WORK/data" "$WORK/run" --minutes "$MINUTES" | tee "$WORK/train.log"
"$PYTHON" tools/train/reference.py "$WORK/data" "$WORK/run" models/austen-1m.reference.json
npm exec -- node tools/exportDefaultModel.ts "$WORK/data" "$WORK/run" models/austen-1m.gguf
npm exec -- node tools/parity/checkParityCli.ts models/austen-1m.gguf models/austen-1m.reference.json
npm exec -- node tools/measureSpeed.ts models/austen-1m.gguf 1
