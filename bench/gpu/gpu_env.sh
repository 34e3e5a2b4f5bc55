# Sourced by the bench/gpu/*.sh runners: the carried binaries (BIN, default
# .carry/lib), NCCL's library from PyTorch's nvidia.nccl (NCCL_LIB) on
# LD_LIBRARY_PATH, and NVLink SHARP off.
BIN=${BIN:-.carry/lib}
NCCL_LIB=${NCCL_LIB:-$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib'))")}
export LD_LIBRARY_PATH=$BIN:$NCCL_LIB:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
