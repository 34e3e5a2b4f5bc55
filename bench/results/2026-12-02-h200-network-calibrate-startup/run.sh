#!/usr/bin/env bash
# Device call 5: calibrate --network start-up on the GPU machine (one GPU): two ranks that
# claim different hosts meet at the rendezvous and must be refused for sharing one GPU;
# mpirun -np 1 / -np 2 refusals.
set -u
export EXTRA_LIB=.carry/lib BIN=.carry/lib/a
. bench/gpu/run/gpu_env.sh
R=$OUT/e; mkdir -p $R; RV=$(mktemp -d)
write_environment $R $BIN/reshard > /dev/null
for r in 0 1; do
  OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=1 \
    timeout 120 $BIN/reshard calibrate --network --rendezvous $RV --rendezvous-timeout 60 --host fake$r -o $R/net-rank$r.json \
    > $R/fake-rank$r.log 2>&1 &
done
wait; for r in 0 1; do echo "== fake rank $r"; cat $R/fake-rank$r.log | tail -5; done
ls -la $RV
echo "== mpirun -np 1"; timeout 60 mpirun --allow-run-as-root -np 1 $BIN/reshard calibrate --network --rendezvous $RV -o $R/x.json > $R/mpirun-np1.log 2>&1; echo "rc $?"; tail -3 $R/mpirun-np1.log
echo "== mpirun -np 2"; timeout 60 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH $BIN/reshard calibrate --network --rendezvous $RV -o $R/x.json > $R/mpirun-np2.log 2>&1; echo "rc $?"; tail -4 $R/mpirun-np2.log
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
