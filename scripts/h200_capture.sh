#!/usr/bin/env bash
# One device call: install, run the GPU tests, capture the committed seed-000 bundles, and
# make the small parser fixtures. Results come back in $OUT (logs + one tarball).
# Usage on the device machine: bash scripts/h200_capture.sh
set -u -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT/work/traces" "$OUT/work/fixtures"
log() { echo "=== $(date +%T) $*"; }

log install
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/work/pip.log" 2>&1 || { cat "$OUT/work/pip.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
ncu --version | tail -1

log "gpu tests"
timeout 240 python3 -m pytest -m "gpu or ncu" tests -q -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -25

log "seed-000 capture"
start=$SECONDS; timeout 300 fuseprof profile rmsnorm_swiglu \
  --shapes 128x4096,512x4096,1024x4096,1024x8192 --dtype float16 --out "$OUT/work/traces" 2>&1 | tee "$OUT/profile.log" | tail -40; echo "profile wall $((SECONDS-start)) s"

log "fixtures"
METRICS=$(python3 -c "from fuseprof.parse.ncu_metrics import NCU_METRICS; print(','.join(NCU_METRICS))")
TARGET="python3 -m fuseprof.capture.ncu_target --case rmsnorm_swiglu --variants compiled,eager --shapes 128x4096 --dtype float16"
timeout 120 ncu --clock-control none --nvtx --nvtx-include "fuseprof:compiled:128x4096/" --metrics "$METRICS" \
  --export "$OUT/work/fixtures/compiled_128x4096" $TARGET >"$OUT/work/fixtures/ncu_export.log" 2>&1
ncu --import "$OUT/work/fixtures/compiled_128x4096.ncu-rep" --csv --page raw >"$OUT/work/fixtures/compiled_128x4096_auto_units.csv"
# stdout CSV with ==PROF== lines and auto-scaled units, no NVTX filter: shows what a user's plain capture looks like
timeout 120 ncu --clock-control none --nvtx --csv --page raw --launch-count 12 --metrics "$METRICS" $TARGET \
  >"$OUT/work/fixtures/plain_stdout.csv" 2>&1
ls -la "$OUT/work/fixtures"; du -sh "$OUT/work/traces"/*
tar czf "$OUT/results.tgz" -C "$OUT/work" traces fixtures pip.log
rm -rf "$OUT/work"
log done
