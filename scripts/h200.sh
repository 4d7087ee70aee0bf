#!/usr/bin/env bash
# The device calls: bash scripts/h200.sh STEP... on the lent H200. Each step logs to stdout and
# leaves files under $OUT/work; at the end everything is packed into $OUT/results.tgz (the device
# tool brings back at most 8 files, 2 folders deep). A failing step is reported and the next runs.
#   install    editable install; the wheels in .whl/ if carried: this image lacks msgspec and plotly (for its Python
#              3.12: pip download --no-deps -d .whl plotly narwhals; pip download --only-binary=:all: --no-deps
#              --python-version 3.12 --platform manylinux2014_x86_64 -d .whl msgspec), and Liger-Kernel
#   build      build the fused CUDA ops verbosely (ptxas resource report -> build.log)
#   pycache    a Python bytecode cache for the later steps (this image has none: see the step)
#   tests      the gpu/ncu-marked tests
#   contract   only the input-contract tests of the CUDA ops
#   ktests     only the kernel tests (tests/test_gpu_kernels.py)
#   sanitize   compute-sanitizer memcheck and racecheck over every CUDA kernel path
#   ceilings   fuseprof ceilings (copy, FMA, bf16 matmul)
#   capture    fuseprof profile with ncu: every case at a few shapes
#   bench      fuseprof bench: every case over the issue-3 shape grid
#   sweep      the register-pressure sweep of the fused Triton kernel, with ncu
#   ncuinfo    ncu's tensor-pipe metric names for gh100 and its roofline section files
#   rooffix    the roofline cross-check fixture: scripts/roofline_fixture.py under ncu --set roofline
#   mlp        fuseprof profile llama_mlp (bf16, M = 128 and 2048) with ncu
#   model      whole-model traces of the small Llama decoder, eager and compiled
#   captests   only the capture tests (tests/test_gpu_capture.py)
#   mlpauto    llama_mlp eager at M = 128 with the default metric list: replay passes per kernel
#   regions    fuseprof run on examples/region_demo.py with ncu, and the run/capture GPU tests
#   tpmlp      tensor-parallel MLP over every GPU with torchrun: one trace per rank (nvidia-h200-x2)
#   shardbench the bench grid with --gpus 1 and 2, cold caches then warm: speed-up, where the time went, ratio agreement
#   shardthreads the same, cold, with one Inductor compile thread per process
#   shardlong  the same grid, cold, with --repeats 400: more work per item, the same fixed costs
#   coldstart  what a fresh process pays before its first item (scripts/cold_start.py), alone and two at once
#   shardprofile fuseprof profile --gpus 2 with ncu on each rank (nvidia-h200-x2)
#   passes     replay passes per kernel for candidate ncu metric lists (scripts/ncu_passes.py)
#   explain    why Inductor's silu_mul / add_rms_norm beat the CUDA kernels: traversal-order A/B, ncu of each
#   graphtests the GPU tests of variants that replay their own CUDA graphs (tests/test_gpu_graphs.py)
#   decoder    fuseprof profile decoder_layer: 5 variants x prefill and decode shapes, copy baseline, no ncu
#   graphpair  a CUDA-graph capture and its replays, and an eager trace with known idle causes (scripts/capture_graph_pair.py)
#   seed002    seed 002's exercises B and E: fuseprof profile qkv_projection and gemm_bias_gelu with ncu (bf16)
#   verify     fuseprof fusion --verify 4 on the eager Llama trace and on a decoder-layer capture with shapes
#   verifytests the GPU test of fusion --verify (tests/test_gpu_verify.py)
#   verifytruth fuseprof fusion --verify on the truth set's FP8, attention and training captures: each table,
#              and the median and worst |prediction error| over their chains (scripts/verify_errors.py)
#   whatifpairs A/B pairs for the step-level what-if, with their step times (scripts/capture_whatif_pairs.py)
#   unprofiled plain torch.profiler captures with their truth measured apart from the profiler: the step, GPU busy and
#              the step with each candidate change, in the same process (scripts/capture_unprofiled_truth.py;
#              UNPROFILED_ONLY=name,name picks workloads). Needs torch only: no install step
#   calibrate  the profiler's cost per recorded event against loops timed before any profiler ran
#              (scripts/calibrate_profiler_cost.py); torch only
#   timefirst  two sets of unprofiled's captures, each in its own process with --time-first (every workload timed
#              before the process runs any profiler): one to fit the profiler's cost on, one held out
#   perprocess a set (PERPROCESS_SETS="fit heldout": two) of unprofiled's captures, every workload in its own process with --time-first: timed, then
#              profiled seconds later (no after-effect, and no drift of the host across the set between the two)
#   paired     a set (PAIRED_SETS="fit heldout": two) of unprofiled's captures, every workload in its own process under
#              TEARDOWN_CUPTI=1, the capture between the middle two paired rounds, the host's speed beside each round;
#              SETTINGS_SHIFT=N moves each workload's profiler settings N places (a held-out set unlike the rule-writing ones)
#   aftereffect the profiler's after-effect (scripts/probe_profiler_after_effect.py), as torch leaves it and with
#              TEARDOWN_CUPTI=1 (Kineto then finalises CUPTI when a session ends: pytorch/pytorch#144455)
#   truthset   small models of known truth, each trace with its execution trace and truth file (scripts/capture_truth_set.py),
#              and fuseprof run / profile bundles with their execution traces (the op graph's agreement, scripts/graph_agreement.py)
set -u -o pipefail
export PYTHONUNBUFFERED=1
# never NVLink multicast (the device README says why): for every step that starts NCCL
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/out}
W="$OUT/work"
mkdir -p "$W/traces"
log() { echo "=== $(date +%T) $*"; }
run() { local name=$1; shift; log "$name"; local t=$SECONDS; "$@"; local rc=$?; echo "--- $name rc=$rc $((SECONDS - t)) s"; }

step_install() {
  python3 -m pip install -q --no-deps --no-build-isolation -e . >"$W/pip.log" 2>&1 || { cat "$W/pip.log"; return 1; }
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  fi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
}
step_pycache() {
  # This device's image sets PYTHONDONTWRITEBYTECODE=1 and ships torch without __pycache__, so every
  # process compiles torch from source: import torch 4.0-4.3 s, + Inductor 9.5 s (python -X importtime,
  # 2026-11-29), once per rank of a sharded run. A pip-installed Python has its bytecode; give the later
  # steps one (outside the image, under /tmp) so they measure fuseprof, not the image.
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX=/tmp/pycache SHARD_PREFIX=pyc
  local t=$SECONDS site; site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  timeout 300 python3 -m compileall -q -j 0 "$site" fuseprof kernels >/dev/null 2>&1
  echo "compileall rc=$? $((SECONDS - t)) s"
  for i in 1 2; do /usr/bin/time -f "import torch and Inductor: %e s" python3 -c "import torch._inductor.compile_fx"; done
}
step_build() { python3 -m fuseprof_kernels._cuda 2>&1 | tee "$W/build.log" | grep -E "ptxas info *: Used|spill|error|built"; }
step_ktests() {
  timeout 200 python3 -m pytest tests/test_gpu_kernels.py -q -p no:cacheprovider -n 4 2>&1 | tee "$W/gpu_kernel_tests.log" | tail -3
}
step_tests() {
  step_ktests
  timeout 150 python3 -m pytest tests/test_gpu_capture.py -q -p no:cacheprovider 2>&1 | tee "$W/gpu_capture_tests.log" | tail -6
}
step_contract() {
  timeout 120 python3 -X faulthandler -m pytest tests/test_gpu_kernels.py -q -p no:cacheprovider -k "contract or stream" \
    2>&1 | tee "$W/gpu_contract_tests.log" | tail -8
}
step_sanitize() {
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m fuseprof_kernels._cuda.sanitize \
      >"$W/sanitize_$tool.log" 2>&1
    echo "$tool rc=$?"; tail -3 "$W/sanitize_$tool.log"
  done
}
step_ceilings() { fuseprof ceilings --out "$W/traces" 2>&1 | tail -3; }
step_capture() {
  timeout 200 fuseprof profile rmsnorm_swiglu --shapes 128x4096,512x4096,1024x4096,1024x8192 --dtype float16 --out "$W/traces" 2>&1 | tail -4
  timeout 200 fuseprof profile add_rms_norm --shapes 1x4096,128x4096,4096x4096 --dtype bfloat16 --out "$W/traces" 2>&1 | tail -3
  timeout 200 fuseprof profile silu_and_mul --shapes 1x14336,128x14336,4096x14336 --dtype bfloat16 --out "$W/traces" 2>&1 | tail -3
}
step_sweep() {
  timeout 150 fuseprof profile fuseprof_kernels.rmsnorm_swiglu.sweep:CASE --out "$W/traces" 2>&1 | tail -8
}
step_bench() {
  timeout 240 fuseprof bench rmsnorm_swiglu add_rms_norm silu_and_mul silu_mul --dtype bfloat16 --out "$W/traces" 2>&1 \
    | tee "$W/bench.log" | grep -vE "^  " | tail -120
}

step_ncuinfo() {
  ncu --version | tail -1
  ncu --query-metrics --chip gh100 >"$W/query_metrics_gh100.txt" 2>&1
  grep -E "ops_path_tensor|inst_executed_pipe_tensor" "$W/query_metrics_gh100.txt" | cut -c1-110 | head -60
  mkdir -p "$W/sections"
  for d in /opt/nvidia/nsight-compute/*/sections; do cp "$d"/SpeedOfLight*.section "$W/sections/" 2>/dev/null; done
  ls "$W/sections"
}
step_rooffix() { timeout 300 python3 scripts/roofline_fixture.py --capture "$W" 2>&1 | grep -v "^  ncu: kernel" | tail -20; }
step_mlp() {
  timeout 420 fuseprof profile llama_mlp --shapes 128x4096,2048x4096 --dtype bfloat16 --out "$W/traces" 2>&1 | tail -14
}
step_mlpauto() {
  timeout 300 fuseprof profile llama_mlp --shapes 128x4096 --variants eager --out "$W/traces" --name mlp-auto 2>&1 | tail -5
  python3 -c "import json; m = json.load(open('$W/traces/mlp-auto/manifest.json'))['ncu']; print('passes', m['replay_passes_per_kernel'], 'tensor', m['tensor_precisions'], 'dropped', m['dropped_metrics'])"
}
step_model() { timeout 300 python3 scripts/capture_model_trace.py --out "$W/model" 2>&1 | tail -8; }
step_regions() {
  timeout 300 python3 -m pytest tests/test_run_regions.py tests/test_gpu_capture.py -q -p no:cacheprovider 2>&1 \
    | tee "$W/regions_tests.log" | tail -4
  (cd "$W" && timeout 300 fuseprof run --out "$W/traces" "$OLDPWD/examples/region_demo.py" --steps 2 2>&1 | tail -3)
}
step_tpmlp() {
  nvidia-smi topo -m | head -4
  timeout 300 torchrun --nproc-per-node "$(nvidia-smi -L | wc -l)" scripts/capture_tp_mlp.py --out "$W/tp" 2>&1 | tail -6
}
# Each run gets its own Inductor/Triton caches under $C (a 2-GPU run's ranks use rank0/, rank1/ in them):
# "cold" runs start empty, "warm" ones reuse the cold run's caches, as a user's second run would.
timed_bench() {  # LABEL GPUS [ENV=VALUE...]: fuseprof bench of the 4-case grid; wall time -> $W/wall-LABEL
  local label=$1 gpus=$2; shift 2
  local t0; t0=$(date +%s.%N)
  env "$@" TORCHINDUCTOR_CACHE_DIR="$C/gpus$gpus/inductor" TRITON_CACHE_DIR="$C/gpus$gpus/triton" \
    fuseprof bench rmsnorm_swiglu add_rms_norm silu_and_mul silu_mul --dtype bfloat16 --gpus "$gpus" \
    ${BENCH_ARGS:-} --out "$W/shard-$label" >"$W/bench-$label.log" 2>&1
  local rc=$?
  python3 -c "print(round($(date +%s.%N) - $t0, 1))" >"$W/wall-$label"
  echo "$label: rc=$rc wall $(cat "$W/wall-$label") s"
}
step_shardbench() {  # labels get $SHARD_PREFIX (the pycache step sets it), so the step can run in both states
  python3 -m fuseprof_kernels._cuda >/dev/null 2>&1  # build the extension once; every run loads it from the cache
  local p=${SHARD_PREFIX:-}
  C=/tmp/fuseprof-shardbench$p; rm -rf "$C"
  for run in "${p}cold-1 1" "${p}cold-2 2" "${p}warm-1 1" "${p}warm-2 2"; do
    # shellcheck disable=SC2086
    timed_bench $run
  done
  python3 scripts/shard_speedup.py "$W" "${p}cold-1" "${p}cold-2" "${p}warm-1" "${p}warm-2"
}
step_shardlong() {  # the same grid with 8x the timed calls per variant (--repeats 400), cold caches
  C=/tmp/fuseprof-shardlong; rm -rf "$C"
  BENCH_ARGS="--repeats 400" timed_bench r400cold-1 1
  BENCH_ARGS="--repeats 400" timed_bench r400cold-2 2
  python3 scripts/shard_speedup.py "$W" r400cold-1 r400cold-2
}
step_coldstart() {  # a fresh process's cold start (scripts/cold_start.py): alone, then two at once as two ranks
  local c=/tmp/fuseprof-coldstart; rm -rf "$c"
  TORCHINDUCTOR_CACHE_DIR=$c/alone/i TRITON_CACHE_DIR=$c/alone/t timeout 120 python3 scripts/cold_start.py 2>&1 | grep -v USDT
  for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r TORCHINDUCTOR_COMPILE_THREADS=$(( $(nproc) / 2 )) TORCHINDUCTOR_CACHE_DIR=$c/r$r/i \
      TRITON_CACHE_DIR=$c/r$r/t timeout 120 python3 scripts/cold_start.py >"$W/coldstart-rank$r.log" 2>&1 &
  done
  wait
  echo "two at once:"; grep -vh USDT "$W"/coldstart-rank*.log | grep -E " s$"
}
step_shardthreads() {  # does Inductor's compile worker pool pay for itself on this grid? one compile thread, cold
  C=/tmp/fuseprof-shardthreads; rm -rf "$C"
  timed_bench t1cold-2 2 TORCHINDUCTOR_COMPILE_THREADS=1
  timed_bench t1cold-1 1 TORCHINDUCTOR_COMPILE_THREADS=1
  python3 scripts/shard_speedup.py "$W" t1cold-1 t1cold-2
}
step_shardprofile() {
  timeout 300 fuseprof profile silu_mul --gpus 2 --variants compiled,fused_cuda --dtype bfloat16 --repeats 20 \
    --shapes 1024x8192,4096x8192,8192x8192,32768x8192 --out "$W/traces" >"$W/profile_gpus2.log" 2>&1
  echo "profile --gpus 2: rc=$?"; grep -vE "^USDT" "$W/profile_gpus2.log" | grep -E "wrote|error|ncu:" | tail -6
  python3 - "$W" <<'PY'
import sys, glob, json, fuseprof
b = glob.glob(f"{sys.argv[1]}/traces/silu_mul-*")[0]
m = json.load(open(f"{b}/manifest.json"))
print([(r["rank"], r["gpu"], r["pci_bus_id"], r["shapes"], r["wall_s"]) for r in m["device"]["ranks"]])
print([(r["rank"], r["status"], r.get("replay_passes_per_kernel")) for r in m["ncu"]["ranks"]])
k = fuseprof.load(b)
print(k.groupby(["source", "rank"]).size().to_dict(), fuseprof.load_timings(b)[["shape", "rank", "gpu", "correct"]].drop_duplicates().to_dict("records"))
PY
}
step_explain() {
  TORCH_LOGS=output_code timeout 240 python3 scripts/explain_silu_mul.py --out "$W/explain_silu_mul.csv" \
    2>"$W/inductor_output_code.log" | tail -12
  grep -A40 "def triton_poi_fused_mul_silu" "$W/inductor_output_code.log" | head -60 >"$W/inductor_silu_mul.py"
  timeout 200 fuseprof profile silu_mul --variants compiled,fused_cuda,fused_triton --shapes 8192x8192,4096x8192 \
    --dtype bfloat16 --repeats 20 --out "$W/traces" 2>&1 | tail -2
  timeout 200 fuseprof profile add_rms_norm --variants compiled,fused_cuda --shapes 1024x4096,1024x8192,8192x8192 \
    --dtype bfloat16 --repeats 20 --out "$W/traces" 2>&1 | tail -2
}
step_decoder() {
  timeout 300 fuseprof profile decoder_layer --no-ncu --copy-baseline --repeats 30 --out "$W/traces" >"$W/decoder.log" 2>&1
  echo "rc=$?"; grep -vE "^USDT" "$W/decoder.log" | tail -30
}
step_seed002() {
  timeout 280 fuseprof profile qkv_projection --shapes 1x4096,2048x4096 --dtype bfloat16 --out "$W/traces" 2>&1 \
    | grep -vE "^USDT" | tail -12
  timeout 280 fuseprof profile gemm_bias_gelu --shapes 128x4096,2048x4096 --dtype bfloat16 --out "$W/traces" 2>&1 \
    | grep -vE "^USDT" | tail -12
}
step_verify() {
  # into traces/verify of this copy of the tree (replaced), so the bundles name their traces as committed
  local V=traces/verify; rm -rf "$V"; mkdir -p "$V"
  timeout 300 fuseprof profile decoder_layer --variants eager --shapes 1x2048x2048,1x1x2048 --no-ncu --repeats 10 \
    --out "$V" 2>&1 | grep -vE "^USDT" | tail -4
  timeout 400 fuseprof fusion traces/llama4l-eager-h200 --verify 4 --out "$V" --wide 2>&1 | grep -vE "^USDT" | tail -40
  timeout 400 fuseprof fusion "$V"/decoder_layer-* --verify 4 --out "$V" --wide 2>&1 | grep -vE "^USDT" | tail -40
  cp -r "$V" "$W/traces/"
}
step_verifytruth() {
  local capture  # not t: run()'s local t is in scope here (bash scopes dynamically)
  mkdir -p "$W/verifytruth"
  for capture in fp8_gemm attn_eager attn_sdpa train_foreach train_fused; do
    log "verify $capture"
    timeout 300 fuseprof fusion "tests/fixtures/truth/$capture.json.gz" --verify 6 --repeats 30 --out "$W/verifytruth" \
      --format json >"$W/verifytruth/$capture.json" 2>"$W/verifytruth/$capture.log"; echo "rc=$?"
    grep -E "Traceback|WRONG|not replayed" "$W/verifytruth/$capture.log" | head -5
  done
  python3 scripts/verify_errors.py "$W"/verifytruth/*.json
}
step_verifytests() {
  timeout 500 python3 -m pytest tests/test_gpu_verify.py -q -p no:cacheprovider 2>&1 | tee "$W/gpu_verify_tests.log" | tail -4
}
step_truthset() {
  timeout 480 python3 scripts/capture_truth_set.py --out "$W/truth" ${TRUTH_ONLY:+--only $TRUTH_ONLY} 2>&1 \
    | grep -vE "^USDT|UserWarning|_warn_once|execution_trace_observer"
  (cd "$W" && timeout 120 fuseprof run --no-ncu --out "$W/etbundles" "$OLDPWD/examples/region_demo.py" --steps 2 2>&1 | tail -1)
  timeout 200 fuseprof profile silu_mul --no-ncu --shapes 1024x8192 --repeats 5 --out "$W/etbundles" 2>&1 | tail -1
  timeout 200 fuseprof profile decoder_layer --no-ncu --variants eager --shapes 1x256x2048 --repeats 3 --out "$W/etbundles" 2>&1 | tail -1
  du -sh "$W/truth" "$W/etbundles"
}
step_unprofiled() {
  timeout "${UNPROFILED_TIMEOUT:-540}" python3 scripts/capture_unprofiled_truth.py --out "$W/unprofiled" \
    ${UNPROFILED_ONLY:+--only $UNPROFILED_ONLY} 2>&1 | grep -vE "^USDT|UserWarning|_warn_once|check_worker_number"
  du -sh "$W/unprofiled"
}
step_calibrate() {
  timeout 300 python3 scripts/calibrate_profiler_cost.py --out "$W/calibrate" --units 1000 --rounds 15 --steps 10 2>&1 \
    | grep -vE "^USDT|UserWarning|_warn_once|round [0-9]+/"
}
step_timefirst() {
  for set in fit heldout; do
    timeout "${UNPROFILED_TIMEOUT:-270}" python3 scripts/capture_unprofiled_truth.py --out "$W/timefirst-$set" \
      --time-first 2>&1 | grep -vE "^USDT|UserWarning|_warn_once|check_worker_number"
  done
  du -sh "$W"/timefirst-*
}
step_perprocess() {
  local names; names=$(python3 scripts/capture_unprofiled_truth.py --out /tmp/none --list | awk '{print $1}')
  for set in ${PERPROCESS_SETS:-heldout}; do
    for name in $names; do
      timeout 120 python3 scripts/capture_unprofiled_truth.py --out "$W/perprocess-$set" --only "$name" \
        --time-first >"$W/perprocess-$set-$name.log" 2>&1
      grep -E "^$name:" "$W/perprocess-$set-$name.log" || tail -5 "$W/perprocess-$set-$name.log"
    done
  done
  du -sh "$W"/perprocess-*
}
step_paired() {
  # each workload in its own process, TEARDOWN_CUPTI=1 (no after-effect to speak of), the capture between the middle
  # two of the paired rounds: truth and trace on the same host within seconds
  local names; names=$(python3 scripts/capture_unprofiled_truth.py --out /tmp/none --list | awk '{print $1}')
  for set in ${PAIRED_SETS:-heldout}; do
    for name in $names; do
      TEARDOWN_CUPTI=1 timeout 120 python3 scripts/capture_unprofiled_truth.py --out "$W/paired-$set" --only "$name" \
        --settings-shift "${SETTINGS_SHIFT:-0}" >"$W/paired-$set-$name.log" 2>&1
      grep -E "^$name:" "$W/paired-$set-$name.log" || tail -5 "$W/paired-$set-$name.log"
    done
  done
  du -sh "$W"/paired-*
}
step_aftereffect() {
  timeout 100 python3 scripts/probe_profiler_after_effect.py 2>&1 | tail -12
  TEARDOWN_CUPTI=1 timeout 100 python3 scripts/probe_profiler_after_effect.py 2>&1 | tail -12
}
step_whatifpairs() {
  timeout 420 python3 scripts/capture_whatif_pairs.py --out "$W/whatif" 2>&1 | grep -vE "^USDT|UserWarning|_warn_once"
  du -sh "$W/whatif"/*
}
step_graphpair() { timeout 300 python3 scripts/capture_graph_pair.py --out "$W/graphpair" 2>&1 | tail -40; }
step_passes() { timeout 300 python3 scripts/ncu_passes.py 2>&1 | tail -12; }
step_graphtests() {
  timeout 200 python3 -m pytest tests/test_gpu_graphs.py -q -p no:cacheprovider 2>&1 | tee "$W/gpu_graph_tests.log" | tail -4
}
step_captests() {
  timeout 200 python3 -m pytest tests/test_gpu_capture.py -q -p no:cacheprovider 2>&1 | tee "$W/gpu_capture_tests.log" | tail -6
}

# Pack after every step, so a command stopped at its time limit still brings back what finished.
for s in "$@"; do
  run "$s" "step_$s"
  tar czf "$OUT/results.tgz.tmp" -C "$W" . && mv "$OUT/results.tgz.tmp" "$OUT/results.tgz"
done
du -sh "$W/traces"/* "$W/model"/* "$W/graphpair"/* "$W/truth" 2>/dev/null
log done
