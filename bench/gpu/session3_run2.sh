set -u
R=/tmp/r; mkdir -p $R
. bench/gpu/gpu_env.sh
echo "== nccl executor tests"; timeout 60 .carry/lib/executor_nccl_test 2>&1 | tail -15 > $R/executor_nccl_test.txt; tail -3 $R/executor_nccl_test.txt
SKIP_BASELINES=1 REPEAT=2 RUN_TIMEOUT=150 SCENARIOS="qwen3-30b-a3b-ep2-to-tp2" bash bench/gpu/run_h200x2.sh $R/main
SKIP_BASELINES=1 REPEAT=5 RUN_TIMEOUT=60 SCENARIOS="llama3-8b-tp2-to-tp1x2 llama3-8b-disaggregated" bash bench/gpu/run_h200x2.sh $R/main2
SKIP_BASELINES=1 REPEAT=1 RUN_TIMEOUT=150 SCENARIOS="llama3-8b-tp2-to-tp1x2-offload" bash bench/gpu/run_h200x2.sh $R/main3
PLANS=megatron REPEAT=1 RUN_TIMEOUT=150 SCENARIOS=llama3-8b-tp2-to-tp1x2-offload bash bench/gpu/run_megatron_h200x2.sh $R/megatron
SKIP_VALIDATE=1 BASELINE_SCENARIOS="llama3-8b-tp2-to-tp1x2 llama3-8b-tp2-to-tp1x2-offload" BASELINE_VARIANTS="--bucket 1GiB;--bucket 256MiB" BASELINE_ARGS="--runs 3 --warmup 1" RUN_TIMEOUT=100 bash bench/gpu/run_h200x2.sh $R/allgather
SKIP_VALIDATE=1 BASELINE_SCENARIOS=qwen3-30b-a3b-ep2-to-tp2 BASELINE_VARIANTS="--bucket 1GiB" BASELINE_ARGS="--runs 2 --warmup 1" RUN_TIMEOUT=120 bash bench/gpu/run_h200x2.sh $R/allgather
