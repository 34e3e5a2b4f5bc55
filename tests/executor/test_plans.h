// Hand-built plans for the executor tests (host backend, MPI, NCCL): no
// planner involved, so each plan says exactly what it exercises.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.h"

namespace reshard::testplans {

// A one-node cluster of `gpus` GPUs on NVLink (numbers are placeholders; the
// executor only uses the topology).
inline Cluster TestCluster(int32_t gpus) {
  Cluster c;
  c.name = "test-" + std::to_string(gpus) + "gpu";
  c.nodes = 1;
  c.gpus_per_node = gpus;
  c.nvlink_domain_nodes = 1;
  c.gpu_memory_bytes = int64_t{80} << 30;
  c.host_memory_bytes = int64_t{512} << 30;
  c.nvlink.bytes_per_s = 300e9;
  c.nvlink.latency_ns = 20000;
  c.pcie.bytes_per_s = 50e9;
  c.pcie_pageable.bytes_per_s = 6e9;
  c.device_copy.bytes_per_s = 2e12;
  c.profile_source = "executor tests";
  return c;
}

class PlanBuilder {
 public:
  PlanBuilder(int32_t gpus, std::string name) {
    p_.name = std::move(name);
    p_.cluster = TestCluster(gpus);
  }

  int32_t Tensor(std::string name, Shape shape, DType dtype = DType::kBF16) {
    p_.tensors.push_back({std::move(name), shape, dtype, {}});
    return static_cast<int32_t>(p_.tensors.size()) - 1;
  }
  int32_t Buffer(int32_t gpu, int64_t bytes, BufferRole role, bool preexisting, std::string name,
                 MemorySpace space = MemorySpace::kDevice) {
    PlanBuffer b;
    b.id = static_cast<int32_t>(p_.buffers.size());
    b.gpu = gpu;
    b.space = space;
    b.role = role;
    b.bytes = bytes;
    b.preexisting = preexisting;
    b.name = std::move(name);
    p_.buffers.push_back(b);
    return b.id;
  }
  int32_t Add(Op op) {
    op.id = static_cast<int32_t>(p_.ops.size());
    p_.ops.push_back(std::move(op));
    return p_.ops.back().id;
  }
  int32_t Alloc(int32_t gpu, int32_t stream, int32_t buffer, std::vector<int32_t> deps = {}) {
    Op op;
    op.kind = OpKind::kAlloc;
    op.gpu = gpu;
    op.stream = stream;
    op.buffer = buffer;
    op.deps = std::move(deps);
    return Add(std::move(op));
  }
  int32_t Free(int32_t gpu, int32_t stream, int32_t buffer, std::vector<int32_t> deps = {}) {
    Op op;
    op.kind = OpKind::kFree;
    op.gpu = gpu;
    op.stream = stream;
    op.buffer = buffer;
    op.deps = std::move(deps);
    return Add(std::move(op));
  }
  int32_t Copy(int32_t gpu, int32_t stream, std::vector<CopyPair> pairs, std::vector<int32_t> deps = {},
               OpKind kind = OpKind::kCopy) {
    Op op;
    op.kind = kind;
    op.gpu = gpu;
    op.stream = stream;
    op.copies = std::move(pairs);
    op.deps = std::move(deps);
    return Add(std::move(op));
  }
  // A send on `from` and its receive on `to` (added in that order).
  std::pair<int32_t, int32_t> SendRecv(int32_t from, const Region& src, int32_t to, const Region& dst, int32_t group,
                                       std::vector<int32_t> send_deps = {}, std::vector<int32_t> recv_deps = {},
                                       int32_t stream = kStreamComm) {
    Op s;
    s.kind = OpKind::kSend;
    s.gpu = from;
    s.stream = stream;
    s.group = group;
    s.region = src;
    s.peer = to;
    s.deps = std::move(send_deps);
    const int32_t sid = Add(std::move(s));
    Op r;
    r.kind = OpKind::kRecv;
    r.gpu = to;
    r.stream = stream;
    r.group = group;
    r.region = dst;
    r.peer = from;
    r.deps = std::move(recv_deps);
    const int32_t rid = Add(std::move(r));
    p_.ops[sid].match = rid;
    p_.ops[rid].match = sid;
    return {sid, rid};
  }
  void Source(int32_t buffer, int32_t tensor, Box box, int64_t offset_elems, Extents stride) {
    p_.sources.push_back({buffer, tensor, box, offset_elems, stride});
  }
  void Destination(int32_t buffer, int32_t tensor, Box box, int64_t offset_elems, Extents stride) {
    p_.destinations.push_back({buffer, tensor, box, offset_elems, stride});
  }
  Plan& plan() { return p_; }
  Plan Build() {
    p_.cluster_fingerprint = p_.cluster.Fingerprint();
    return p_;
  }

 private:
  Plan p_;
};

inline Region Strided(int32_t buffer, int64_t offset, int64_t row_bytes, int64_t rows, int64_t row_stride) {
  Region r;
  r.buffer = buffer;
  r.offset_bytes = offset;
  r.row_bytes = row_bytes;
  r.rows = rows;
  r.row_stride_bytes = row_stride;
  return r;
}

inline Box Box2(int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  Box b;
  b.ndim = 2;
  b.lo = {r0, c0, 0};
  b.hi = {r1, c1, 1};
  return b;
}

// Local copies on each of `gpus` GPUs: every GPU holds the whole tensor W
// [rows, cols] and splits it by columns into two row-major buffers (one
// batched copy of two strided pairs).
inline Plan LocalCopyPlan(int32_t gpus = 2, int64_t rows = 8, int64_t cols = 16) {
  PlanBuilder b(gpus, "local-copy");
  const int32_t t = b.Tensor("layers.0.mlp.down_proj.weight", MakeShape({rows, cols}));
  const int64_t half = cols / 2;
  for (int32_t g = 0; g < gpus; ++g) {
    const int32_t src = b.Buffer(g, rows * cols * 2, BufferRole::kSourceWeights, true, "train.w");
    const int32_t left = b.Buffer(g, rows * half * 2, BufferRole::kDestinationWeights, true, "gen.w.left");
    const int32_t right = b.Buffer(g, rows * half * 2, BufferRole::kDestinationWeights, true, "gen.w.right");
    b.Source(src, t, Box2(0, rows, 0, cols), 0, {cols, 1, 1});
    b.Copy(g, kStreamCompute,
           {{Strided(src, 0, half * 2, rows, cols * 2), ContiguousRegion(left, 0, rows * half * 2)},
            {Strided(src, half * 2, half * 2, rows, cols * 2), Strided(right, 0, half * 2, rows, half * 2)}});
    b.Destination(left, t, Box2(0, rows, 0, half), 0, {half, 1, 1});
    b.Destination(right, t, Box2(0, rows, half, cols), 0, {half, 1, 1});
  }
  return b.Build();
}

// GPU 0 holds W [rows, cols] (row-major); GPU 1 wants its middle half of
// columns in a buffer with padded rows (row stride cols/2 + 4, 2 elements in).
// Pack (strided -> staging) -> send -> recv -> unpack (staging -> strided).
// `pack_shift_bytes` corrupts the pack's source offset; `drop_transfer`
// leaves out the send and its receive (and the unpack).
struct PackOptions {
  int64_t rows = 16, cols = 32;
  int64_t pack_shift_bytes = 0;
  bool drop_transfer = false;
};
inline Plan PackSendUnpackPlan(const PackOptions& o = {}) {
  PlanBuilder b(2, "pack-send-unpack");
  const int64_t rows = o.rows, cols = o.cols, c0 = cols / 4, width = cols / 2, padded = cols / 2 + 4;
  const int32_t t = b.Tensor("layers.0.self_attn.q_proj.weight", MakeShape({rows, cols}));
  const int32_t src = b.Buffer(0, rows * cols * 2, BufferRole::kSourceWeights, true, "train.q");
  const int32_t stage0 = b.Buffer(0, rows * width * 2, BufferRole::kStaging, false, "pack");
  const int32_t stage1 = b.Buffer(1, rows * width * 2, BufferRole::kStaging, false, "unpack");
  const int32_t dst = b.Buffer(1, rows * padded * 2, BufferRole::kDestinationWeights, true, "gen.q");
  b.Source(src, t, Box2(0, rows, 0, cols), 0, {cols, 1, 1});
  const int64_t bytes = rows * width * 2;
  const int32_t a0 = b.Alloc(0, kStreamCompute, stage0);
  const int32_t pack = b.Copy(0, kStreamCompute,
                              {{Strided(src, c0 * 2 + o.pack_shift_bytes, width * 2, rows, cols * 2),
                                ContiguousRegion(stage0, 0, bytes)}},
                              {a0});
  const int32_t a1 = b.Alloc(1, kStreamComm, stage1);
  if (!o.drop_transfer) {
    auto [send, recv] = b.SendRecv(0, ContiguousRegion(stage0, 0, bytes), 1, ContiguousRegion(stage1, 0, bytes), 0,
                                   {pack}, {a1});
    b.Free(0, kStreamCompute, stage0, {send});
    const int32_t unpack = b.Copy(1, kStreamCompute,
                                  {{ContiguousRegion(stage1, 0, bytes), Strided(dst, 2 * 2, width * 2, rows, padded * 2)}},
                                  {recv});
    b.Free(1, kStreamCompute, stage1, {unpack});
  } else {
    b.Free(0, kStreamCompute, stage0, {pack});
    b.Free(1, kStreamComm, stage1, {a1});
  }
  b.Destination(dst, t, Box2(0, rows, c0, c0 + width), 2, {padded, 1, 1});
  return b.Build();
}

// Row-split tensor W [rows, cols]: GPU g holds row block g; every GPU wants
// the whole W in a buffer it allocates. One group carries every transfer
// (all ordered pairs: a cycle of sends inside one group); each GPU copies its
// own block locally. `drop` leaves out the transfer from drop.first to
// drop.second.
struct ExchangeOptions {
  int32_t gpus = 2;
  int64_t rows = 16, cols = 24;
  DType dtype = DType::kBF16;
  std::pair<int32_t, int32_t> drop{-1, -1};
};
inline Plan ExchangePlan(const ExchangeOptions& o = {}) {
  PlanBuilder b(o.gpus, "exchange");
  const int64_t eb = DTypeBytes(o.dtype);
  const int64_t block_rows = o.rows / o.gpus, block = block_rows * o.cols * eb;
  const int32_t t = b.Tensor("model.embed_tokens.weight", MakeShape({o.rows, o.cols}), o.dtype);
  std::vector<int32_t> src(o.gpus), dst(o.gpus), alloc(o.gpus), local(o.gpus);
  for (int32_t g = 0; g < o.gpus; ++g) {
    src[g] = b.Buffer(g, block, BufferRole::kSourceWeights, true, "train.embed");
    dst[g] = b.Buffer(g, o.rows * o.cols * eb, BufferRole::kDestinationWeights, false, "gen.embed");
    b.Source(src[g], t, Box2(g * block_rows, (g + 1) * block_rows, 0, o.cols), 0, {o.cols, 1, 1});
    b.Destination(dst[g], t, Box2(0, o.rows, 0, o.cols), 0, {o.cols, 1, 1});
  }
  for (int32_t g = 0; g < o.gpus; ++g) {
    alloc[g] = b.Alloc(g, kStreamCompute, dst[g]);
    local[g] = b.Copy(g, kStreamCompute, {{ContiguousRegion(src[g], 0, block), ContiguousRegion(dst[g], g * block, block)}});
  }
  for (int32_t from = 0; from < o.gpus; ++from)
    for (int32_t to = 0; to < o.gpus; ++to) {
      if (from == to || (from == o.drop.first && to == o.drop.second)) continue;
      b.SendRecv(from, ContiguousRegion(src[from], 0, block), to, ContiguousRegion(dst[to], from * block, block), 0, {},
                 {alloc[to]});
    }
  return b.Build();
}

// For HostBackendOptions::lose_receive: true for the receive on GPU `to` of
// the transfer from GPU `from` in a plan named `plan_name`.
inline std::function<bool(const Plan&, int32_t)> LoseReceive(std::string plan_name, int32_t from, int32_t to) {
  return [=](const Plan& p, int32_t op) {
    const Op& o = p.ops[op];
    return p.name == plan_name && o.kind == OpKind::kRecv && o.gpu == to && o.peer == from;
  };
}

// Optimizer offload and reload on GPU 0: the fp32 state O [rows, cols] goes
// to a pinned host buffer (halves swapped, strided), O is freed, a new device
// buffer is allocated and the state comes back (halves swapped back). GPU 1
// does the same with the other half of the rows in one contiguous pair.
inline Plan OffloadReloadPlan(int64_t rows = 32, int64_t cols = 16) {
  PlanBuilder b(2, "offload-reload");
  const int32_t t = b.Tensor("optimizer.exp_avg", MakeShape({rows, cols}), DType::kFP32);
  const int64_t half_rows = rows / 2, bytes = half_rows * cols * 4, half = bytes / 2;
  for (int32_t g = 0; g < 2; ++g) {
    const int32_t opt = b.Buffer(g, bytes, BufferRole::kOptimizer, true, "optimizer");
    const int32_t host = b.Buffer(g, bytes, BufferRole::kHost, false, "optimizer.host", MemorySpace::kHost);
    const int32_t back = b.Buffer(g, bytes, BufferRole::kOptimizer, false, "optimizer.reloaded");
    b.Source(opt, t, Box2(g * half_rows, (g + 1) * half_rows, 0, cols), 0, {cols, 1, 1});
    const int32_t ah = b.Alloc(g, kStreamHost, host);
    std::vector<CopyPair> out, in;
    if (g == 0) {  // swap the two halves on the way out and back
      out = {{ContiguousRegion(opt, 0, half), ContiguousRegion(host, half, half)},
             {ContiguousRegion(opt, half, half), ContiguousRegion(host, 0, half)}};
      in = {{ContiguousRegion(host, half, half), ContiguousRegion(back, 0, half)},
            {ContiguousRegion(host, 0, half), ContiguousRegion(back, half, half)}};
    } else {
      out = {{ContiguousRegion(opt, 0, bytes), ContiguousRegion(host, 0, bytes)}};
      in = {{ContiguousRegion(host, 0, bytes), ContiguousRegion(back, 0, bytes)}};
    }
    const int32_t off = b.Copy(g, kStreamHost, out, {ah}, OpKind::kOffload);
    const int32_t fo = b.Free(g, kStreamHost, opt, {off});
    const int32_t ab = b.Alloc(g, kStreamHost, back, {fo});
    const int32_t rel = b.Copy(g, kStreamHost, in, {ab}, OpKind::kReload);
    b.Free(g, kStreamHost, host, {rel});
    b.Destination(back, t, Box2(g * half_rows, (g + 1) * half_rows, 0, cols), 0, {cols, 1, 1});
  }
  return b.Build();
}

// One GPU: a staging buffer A gets a copy of the source W and is freed, then
// the destination D (as large as A, on the same stream) is allocated, so the
// allocator's pool may hand it A's memory, which holds D's expected bytes;
// then the copy W -> D (op id in `*d_copy`).
inline Plan ReusedMemoryPlan(int64_t rows, int64_t cols, int32_t* d_copy) {
  PlanBuilder b(1, "reused-memory");
  const int32_t t = b.Tensor("layers.0.mlp.down_proj.weight", MakeShape({rows, cols}));
  const int64_t bytes = rows * cols * 2;
  const int32_t src = b.Buffer(0, bytes, BufferRole::kSourceWeights, true, "train.w");
  const int32_t a = b.Buffer(0, bytes, BufferRole::kStaging, false, "staging");
  const int32_t d = b.Buffer(0, bytes, BufferRole::kDestinationWeights, false, "gen.w");
  b.Source(src, t, Box2(0, rows, 0, cols), 0, {cols, 1, 1});
  const int32_t aa = b.Alloc(0, kStreamCompute, a);
  const int32_t ca = b.Copy(0, kStreamCompute, {{ContiguousRegion(src, 0, bytes), ContiguousRegion(a, 0, bytes)}}, {aa});
  const int32_t fa = b.Free(0, kStreamCompute, a, {ca});
  const int32_t ad = b.Alloc(0, kStreamCompute, d, {fa});
  *d_copy = b.Copy(0, kStreamCompute, {{ContiguousRegion(src, 0, bytes), ContiguousRegion(d, 0, bytes)}}, {ad});
  b.Destination(d, t, Box2(0, rows, 0, cols), 0, {cols, 1, 1});
  return b.Build();
}

// Stacked experts E [experts, rows, cols] (3-D): GPU g holds experts of
// block g (EP); every GPU wants rows of block g of every expert (TP along
// dimension 1). Local part: one 3-level strided copy; remote part: pack (3
// levels) -> send -> receive straight into the destination.
inline Plan ExpertsPlan(int64_t experts = 4, int64_t rows = 8, int64_t cols = 16) {
  PlanBuilder b(2, "experts");
  const int32_t t = b.Tensor("model.layers.0.mlp.experts.gate_proj.weight", MakeShape({experts, rows, cols}));
  const int64_t ex = experts / 2, rh = rows / 2, eb = 2;
  const int64_t plane = rows * cols * eb, half_bytes = ex * rh * cols * eb;
  std::vector<int32_t> src(2), dst(2), stage(2), alloc(2), pack(2);
  for (int32_t g = 0; g < 2; ++g) {
    src[g] = b.Buffer(g, ex * plane, BufferRole::kSourceWeights, true, "train.experts");
    dst[g] = b.Buffer(g, experts * rh * cols * eb, BufferRole::kDestinationWeights, true, "gen.experts");
    stage[g] = b.Buffer(g, half_bytes, BufferRole::kStaging, false, "pack");
    Box sb;
    sb.ndim = 3;
    sb.lo = {g * ex, 0, 0};
    sb.hi = {(g + 1) * ex, rows, cols};
    b.Source(src[g], t, sb, 0, {rows * cols, cols, 1});
    Box db;
    db.ndim = 3;
    db.lo = {0, g * rh, 0};
    db.hi = {experts, (g + 1) * rh, cols};
    b.Destination(dst[g], t, db, 0, {rh * cols, cols, 1});
  }
  auto rows_of = [&](int32_t buffer, int32_t row_block) {
    Region r = Strided(buffer, row_block * rh * cols * eb, rh * cols * eb, 1, 0);
    r.planes = ex;
    r.plane_stride_bytes = plane;
    return r;
  };
  for (int32_t g = 0; g < 2; ++g) {
    b.Copy(g, kStreamCompute, {{rows_of(src[g], g), ContiguousRegion(dst[g], g * half_bytes, half_bytes)}});
    alloc[g] = b.Alloc(g, kStreamCompute, stage[g]);
    pack[g] = b.Copy(g, kStreamCompute, {{rows_of(src[g], 1 - g), ContiguousRegion(stage[g], 0, half_bytes)}});
  }
  std::vector<int32_t> sends;
  for (int32_t g = 0; g < 2; ++g) {
    const int32_t to = 1 - g;
    sends.push_back(b.SendRecv(g, ContiguousRegion(stage[g], 0, half_bytes), to,
                               ContiguousRegion(dst[to], g * half_bytes, half_bytes), 3, {pack[g]})
                        .first);
  }
  for (int32_t g = 0; g < 2; ++g) b.Free(g, kStreamCompute, stage[g], {sends[g]});
  return b.Build();
}

// One copy op of `pairs` pairs on GPU 0 (more than a kernel launch carries in
// its parameters): row r of W goes to row pairs-1-r of the destination.
inline Plan ManyPairsPlan(int64_t pairs = 100, int64_t cols = 256) {
  PlanBuilder b(1, "many-pairs");
  const int32_t t = b.Tensor("lm_head.weight", MakeShape({pairs, cols}));
  const int32_t src = b.Buffer(0, pairs * cols * 2, BufferRole::kSourceWeights, true, "train.lm_head");
  const int32_t dst = b.Buffer(0, pairs * cols * 2, BufferRole::kDestinationWeights, true, "gen.lm_head");
  b.Source(src, t, Box2(0, pairs, 0, cols), 0, {cols, 1, 1});
  std::vector<CopyPair> list;
  for (int64_t r = 0; r < pairs; ++r) {
    list.push_back({ContiguousRegion(src, r * cols * 2, cols * 2), ContiguousRegion(dst, (pairs - 1 - r) * cols * 2, cols * 2)});
    b.Destination(dst, t, Box2(r, r + 1, 0, cols), (pairs - 1 - r) * cols, {cols, 1, 1});
  }
  b.Copy(0, kStreamCompute, list);
  return b.Build();
}

// One GPU sends W [parts * rows, cols] to itself in one NCCL group, a row
// block per send / recv pair (blocks land in reverse order), into buffer A;
// then a copy on the compute stream, waiting for the group's last receive
// (an op that does not own the group's events: EventOwners), moves A into
// buffer B. A and B both hold W (as two replicas would), so the check sees both.
inline Plan SelfGroupPlan(int64_t parts = 8, int64_t rows = 64, int64_t cols = 256) {
  PlanBuilder b(1, "self-group");
  const int64_t n = parts * rows, block = rows * cols * 2;
  const int32_t t = b.Tensor("lm_head.weight", MakeShape({n, cols}));
  const int32_t src = b.Buffer(0, n * cols * 2, BufferRole::kSourceWeights, true, "train.w");
  const int32_t a = b.Buffer(0, n * cols * 2, BufferRole::kDestinationWeights, true, "gen.a");
  const int32_t c = b.Buffer(0, n * cols * 2, BufferRole::kDestinationWeights, true, "gen.b");
  b.Source(src, t, Box2(0, n, 0, cols), 0, {cols, 1, 1});
  int32_t last_recv = -1;
  for (int64_t k = 0; k < parts; ++k) {
    const int64_t at = (parts - 1 - k) * block;
    last_recv = b.SendRecv(0, ContiguousRegion(src, k * block, block), 0, ContiguousRegion(a, at, block), 0).second;
    b.Destination(a, t, Box2(k * rows, (k + 1) * rows, 0, cols), (parts - 1 - k) * rows * cols, {cols, 1, 1});
  }
  b.Copy(0, kStreamCompute, {{ContiguousRegion(a, 0, n * cols * 2), ContiguousRegion(c, 0, n * cols * 2)}}, {last_recv});
  for (int64_t k = 0; k < parts; ++k)
    b.Destination(c, t, Box2(k * rows, (k + 1) * rows, 0, cols), (parts - 1 - k) * rows * cols, {cols, 1, 1});
  return b.Build();
}

// One GPU sends W [2 * parts * rows, cols] to itself over both communicator
// lanes: the first half's row blocks in a group on "comm" (lane 0), the
// second half's in a group on "comm2" (lane 1: the second communicator),
// each block landing in reverse order in buffer A; then a copy waiting for
// both groups' last receives moves A into buffer B.
inline Plan SelfLanesPlan(int64_t parts = 4, int64_t rows = 64, int64_t cols = 256) {
  PlanBuilder b(1, "self-lanes");
  b.plan().stream_names = {"compute", "comm", "host", "release", std::string(kCommLane2StreamName)};
  const int64_t n = 2 * parts * rows, block = rows * cols * 2, blocks = 2 * parts;
  const int32_t t = b.Tensor("lm_head.weight", MakeShape({n, cols}));
  const int32_t src = b.Buffer(0, n * cols * 2, BufferRole::kSourceWeights, true, "train.w");
  const int32_t a = b.Buffer(0, n * cols * 2, BufferRole::kDestinationWeights, true, "gen.a");
  const int32_t c = b.Buffer(0, n * cols * 2, BufferRole::kDestinationWeights, true, "gen.b");
  b.Source(src, t, Box2(0, n, 0, cols), 0, {cols, 1, 1});
  std::vector<int32_t> last(2, -1);
  for (int64_t k = 0; k < blocks; ++k) {
    const int32_t lane = k < parts ? 0 : 1;
    const int64_t at = (blocks - 1 - k) * block;
    last[lane] = b.SendRecv(0, ContiguousRegion(src, k * block, block), 0, ContiguousRegion(a, at, block), lane, {},
                            {}, lane ? 4 : kStreamComm)
                     .second;
    b.Destination(a, t, Box2(k * rows, (k + 1) * rows, 0, cols), (blocks - 1 - k) * rows * cols, {cols, 1, 1});
  }
  b.Copy(0, kStreamCompute, {{ContiguousRegion(a, 0, n * cols * 2), ContiguousRegion(c, 0, n * cols * 2)}}, last);
  for (int64_t k = 0; k < blocks; ++k)
    b.Destination(c, t, Box2(k * rows, (k + 1) * rows, 0, cols), (blocks - 1 - k) * rows * cols, {cols, 1, 1});
  return b.Build();
}

}  // namespace reshard::testplans
