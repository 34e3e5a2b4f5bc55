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

// Builds valid plans: what an op reads comes from a preexisting per-GPU read
// pool (reads share its first bytes), what it writes goes to bytes of its own
// in a per-GPU write pool, so no two ops touch the same bytes with one of them
// writing (Verify's race check); offload / reload use host pools alike. Pools
// grow as ops are added.
class PlanBuilder {
 public:
  explicit PlanBuilder(const Cluster& c) {
    p_.name = "test";
    p_.cluster = c;
    pool_.assign(c.Gpus(), -1);
    out_pool_.assign(c.Gpus(), -1);
    host_pool_.assign(c.Gpus(), -1);
    host_out_pool_.assign(c.Gpus(), -1);
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
    so.region = Read(src, bytes);
    Op& ro = p_.ops[r];
    ro.peer = src;
    ro.match = s;
    ro.region = Write(dst, bytes);
    return {s, r};
  }

  int32_t Copy(int32_t gpu, int64_t bytes, Opts o = {kStreamCompute}) {
    const int32_t i = Add(OpKind::kCopy, gpu, o);
    p_.ops[i].copies.push_back({Read(gpu, bytes), Write(gpu, bytes)});
    return i;
  }
  // A quantize op with one tile per input size: bf16 input, fp8 output of
  // half its bytes, 4 B of scales per tile (regions in the GPU's pool).
  int32_t Quantize(int32_t gpu, const std::vector<int64_t>& input_bytes, Opts o = {kStreamCompute}) {
    const int32_t i = Add(OpKind::kQuantize, gpu, o);
    for (int64_t b : input_bytes) {
      QuantizeTile t;
      t.input = Read(gpu, b);
      t.output = Write(gpu, b / 2);
      t.scales = Write(gpu, 4);
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
    return Offload(gpu, Read(gpu, bytes), Write(gpu, bytes, MemorySpace::kHost), o);
  }
  int32_t ReloadBytes(int32_t gpu, int64_t bytes, Opts o = {kStreamHost}) {
    return Reload(gpu, Read(gpu, bytes, MemorySpace::kHost), Write(gpu, bytes), o);
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
  // The first `bytes` of the read pool; the next `bytes` of the write pool.
  Region Read(int32_t gpu, int64_t bytes, MemorySpace space = MemorySpace::kDevice) {
    return ContiguousRegion(Grow(space == MemorySpace::kHost ? host_pool_ : pool_, gpu, bytes, space), 0, bytes);
  }
  Region Write(int32_t gpu, int64_t bytes, MemorySpace space = MemorySpace::kDevice) {
    std::vector<int32_t>& pools = space == MemorySpace::kHost ? host_out_pool_ : out_pool_;
    const int64_t at = pools[gpu] < 0 ? 0 : p_.buffers[pools[gpu]].bytes;
    return ContiguousRegion(Grow(pools, gpu, at + bytes, space), at, bytes);
  }

  Plan p_;
  std::vector<int32_t> pool_, out_pool_, host_pool_, host_out_pool_;
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
