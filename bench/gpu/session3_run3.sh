# Third GPU call of 2026-11-30 (session 3): calibrate with every GPU offloading at once, then
# validate the four scenarios of issue 5 on the new profile. Run from the repository root.
set -u
R=${1:-/tmp/r}; mkdir -p $R
EXTRA_LIB=.carry/lib bash bench/gpu/calibrate.sh $R/calib .carry/lib/reshard 2>&1 | tail -25
[ -s $R/calib/profile.json ] && cp $R/calib/profile.json calib/h200-x2.json
SKIP_BASELINES=1 REPEAT=2 RUN_TIMEOUT=150 SCENARIOS="qwen3-30b-a3b-ep2-to-tp2" bash bench/gpu/run_h200x2.sh $R/main
SKIP_BASELINES=1 REPEAT=5 RUN_TIMEOUT=60 SCENARIOS="llama3-8b-tp2-to-tp1x2 llama3-8b-disaggregated" bash bench/gpu/run_h200x2.sh $R/main
SKIP_BASELINES=1 REPEAT=1 RUN_TIMEOUT=150 SCENARIOS="llama3-8b-tp2-to-tp1x2-offload" bash bench/gpu/run_h200x2.sh $R/main
