// Hand-built plans for the simulator's tests: a test cluster whose links move
// 1 GB/s = 1 byte/ns (device copies 2 bytes/ns), with no latency, no
// efficiency curve and no host costs unless a test sets them, so expected
// times are exact nanoseconds; and a builder of valid plans over it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "sim/simulator.h"

namespace reshard::sim_test {

// nodes × gpus_per_node GPUs, one NVLink domain per node, `nics` NICs per node.
inline Cluster TestCluster(int32_t nodes = 1, int32_t gpus_per_node = 4, int32_t nics = 1) {
  Cluster c;
  c.name = "test";
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.nvlink_domain_nodes = 1;
  c.nics_per_node = nics;
  c.gpu_memory_bytes = int64_t{1} << 40;
  c.host_memory_bytes = int64_t{1} << 40;
  LinkProfile one;  // 1 byte/ns, no latency, flat efficiency
  one.bytes_per_s = 1e9;
  c.nvlink = one;
  c.network = one;
  c.pcie = one;
  c.pcie_pageable = one;
  c.device_copy = one;
  c.device_copy.bytes_per_s = 2e9;  // 2 bytes/ns: copies are told apart from links
  return c;
}

struct Opts {
  int32_t stream = kStreamComm;
  int32_t group = -1;
  std::vector<int32_t> deps = {};
};

// Builds valid plans: sends read and recvs write a preexisting per-GPU pool
// buffer; copies go within it; offload/reload use a per-GPU host pool. Pools
// are sized to the largest use when the plan is built.
class PlanBuilder {
 public:
  explicit PlanBuilder(const Cluster& c) {
    p_.name = "test";
    p_.cluster = c;
    pool_.assign(c.Gpus(), -1);
    host_pool_.assign(c.Gpus(), -1);
  }

  int32_t Buffer(int32_t gpu, int64_t bytes, bool preexisting, MemorySpace space = MemorySpace::kDevice) {
    PlanBuffer b;
    b.id = static_cast<int32_t>(p_.buffers.size());
    b.gpu = gpu;
    b.space = space;
    b.role = space == MemorySpace::kHost ? BufferRole::kHost : BufferRole::kStaging;
    b.bytes = bytes;
    b.preexisting = preexisting;
    b.name = fmt_name("buf", b.id);
    p_.buffers.push_back(b);
    return b.id;
  }

  // Returns {send, recv}.
  std::pair<int32_t, int32_t> Transfer(int32_t src, int32_t dst, int64_t bytes, Opts send = {}, Opts recv = {}) {
    const int32_t s = Add(OpKind::kSend, src, send);
    const int32_t r = Add(OpKind::kRecv, dst, recv);
    Op& so = p_.ops[s];
    so.peer = dst;
    so.match = r;
    so.region = ContiguousRegion(Pool(src, bytes), 0, bytes);
    Op& ro = p_.ops[r];
    ro.peer = src;
    ro.match = s;
    ro.region = ContiguousRegion(Pool(dst, src == dst ? 2 * bytes : bytes), src == dst ? bytes : 0, bytes);
    return {s, r};
  }

  int32_t Copy(int32_t gpu, int64_t bytes, Opts o = {kStreamCompute}) {
    const int32_t i = Add(OpKind::kCopy, gpu, o);
    const int32_t pool = Pool(gpu, 2 * bytes);
    p_.ops[i].copies.push_back({ContiguousRegion(pool, 0, bytes), ContiguousRegion(pool, bytes, bytes)});
    return i;
  }
  // A quantize op with one tile per input size: bf16 input, fp8 output of
  // half its bytes, 4 B of scales per tile (regions in the GPU's pool).
  int32_t Quantize(int32_t gpu, const std::vector<int64_t>& input_bytes, Opts o = {kStreamCompute}) {
    const int32_t i = Add(OpKind::kQuantize, gpu, o);
    int64_t total = 0;
    for (int64_t b : input_bytes) total += b + b / 2 + 4;
    const int32_t pool = Pool(gpu, total);
    int64_t at = 0;
    for (int64_t b : input_bytes) {
      QuantizeTile t;
      t.input = ContiguousRegion(pool, at, b);
      t.output = ContiguousRegion(pool, at + b, b / 2);
      t.scales = ContiguousRegion(pool, at + b + b / 2, 4);
      at += b + b / 2 + 4;
      p_.ops[i].tiles.push_back(t);
    }
    return i;
  }
  int32_t Offload(int32_t gpu, Region dev, Region host, Opts o = {kStreamHost}) {
    const int32_t i = Add(OpKind::kOffload, gpu, o);
    p_.ops[i].copies.push_back({dev, host});
    return i;
  }
  int32_t Reload(int32_t gpu, Region host, Region dev, Opts o = {kStreamHost}) {
    const int32_t i = Add(OpKind::kReload, gpu, o);
    p_.ops[i].copies.push_back({host, dev});
    return i;
  }
  int32_t OffloadBytes(int32_t gpu, int64_t bytes, Opts o = {kStreamHost}) {
    return Offload(gpu, ContiguousRegion(Pool(gpu, bytes), 0, bytes), ContiguousRegion(HostPool(gpu, bytes), 0, bytes),
                   o);
  }
  int32_t ReloadBytes(int32_t gpu, int64_t bytes, Opts o = {kStreamHost}) {
    return Reload(gpu, ContiguousRegion(HostPool(gpu, bytes), 0, bytes), ContiguousRegion(Pool(gpu, bytes), 0, bytes),
                  o);
  }
  int32_t Alloc(int32_t buffer, Opts o = {kStreamCompute}) {
    const int32_t i = Add(OpKind::kAlloc, p_.buffers[buffer].gpu, o);
    p_.ops[i].buffer = buffer;
    return i;
  }
  int32_t Free(int32_t buffer, Opts o = {kStreamCompute}) {
    const int32_t i = Add(OpKind::kFree, p_.buffers[buffer].gpu, o);
    p_.ops[i].buffer = buffer;
    return i;
  }

  int64_t PoolBytes(int32_t gpu) const { return pool_[gpu] < 0 ? 0 : p_.buffers[pool_[gpu]].bytes; }

  Plan Build() {
    Plan p = p_;
    p.cluster_fingerprint = p.cluster.Fingerprint();
    return p;
  }

 private:
  static std::string fmt_name(const char* what, int32_t id) { return std::string(what) + std::to_string(id); }

  int32_t Add(OpKind k, int32_t gpu, const Opts& o) {
    Op op;
    op.id = static_cast<int32_t>(p_.ops.size());
    op.kind = k;
    op.gpu = gpu;
    op.stream = o.stream;
    op.group = o.group;
    op.deps = o.deps;
    p_.ops.push_back(op);
    return op.id;
  }
  int32_t Grow(std::vector<int32_t>& pools, int32_t gpu, int64_t bytes, MemorySpace space) {
    if (pools[gpu] < 0) pools[gpu] = Buffer(gpu, 0, /*preexisting=*/true, space);
    PlanBuffer& b = p_.buffers[pools[gpu]];
    b.bytes = std::max(b.bytes, bytes);
    return b.id;
  }
  int32_t Pool(int32_t gpu, int64_t bytes) { return Grow(pool_, gpu, bytes, MemorySpace::kDevice); }
  int32_t HostPool(int32_t gpu, int64_t bytes) { return Grow(host_pool_, gpu, bytes, MemorySpace::kHost); }

  Plan p_;
  std::vector<int32_t> pool_, host_pool_;
};

// Simulates a plan that must verify.
inline Prediction SimVerified(const Plan& p, SimObserver* obs = nullptr) {
  const VerifyResult v = Verify(p);
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  SimOptions o;
  o.observer = obs;
  return Simulate(p, o);
}

}  // namespace reshard::sim_test
