// Scenario reader, sizes, built-in scenarios and the memory state at refit start.
#include <algorithm>
#include <filesystem>
#include <set>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/error.h"
#include "model/layout.h"
#include "model/scenario.h"

namespace reshard {
namespace {

using ::testing::HasSubstr;

const std::string kData = RESHARD_TEST_DATA_DIR;
const std::string kSource = RESHARD_SOURCE_DIR;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- ParseBytes ----

TEST(ParseBytes, AcceptsUnitsAndPlainNumbers) {
  struct Case {
    const char* text;
    int64_t bytes;
  };
  const Case cases[] = {
      {"0", 0},
      {"1048576", 1048576},
      {"256MiB", 256 * kMiB},
      {"256 MiB", 256 * kMiB},
      {"4 GiB", 4 * kGiB},
      {"4gib", 4 * kGiB},
      {"1.5GB", 1500000000},
      {"1.5 KiB", 1536},
      {"12.5 GiB", 12 * kGiB + kGiB / 2},
      {"2TB", 2000000000000},
      {"1PiB", int64_t{1} << 50},
      {"10B", 10},
      {"+7", 7},
      {"25e9", 25000000000},
      {"1e3 KiB", 1024000},
      {"0.5", 1},                      // rounded to the nearest byte
      {"  64MiB  ", 64 * kMiB},
      {"9223372036854775807", INT64_MAX},
      {"8191.99999 PiB", 9223372025595776740},  // just under the limit, exactly rounded
  };
  for (const auto& c : cases) EXPECT_EQ(ParseBytes(c.text, "f", "x"), c.bytes) << c.text;
}

TEST(ParseBytes, RejectsJunkNegativeNonFiniteAndOverflow) {
  struct Case {
    const char* text;
    const char* fragment;
  };
  const Case cases[] = {
      {"", "empty size"},
      {"   ", "empty size"},
      {"-1", "must not be negative"},
      {"-4GiB", "must not be negative"},
      {"nan", "not a finite size"},
      {".NaN", "not a finite size"},
      {"inf", "not a finite size"},
      {"-.inf", "not a finite size"},
      {"abc", "is not a size"},
      {"GiB", "is not a size"},
      {"12 parsecs", "unknown unit 'parsecs'"},
      {"12 Gib", ""},  // accepted: units are case-insensitive (checked below)
      {"256 MiBs", "did you mean 'MiB'?"},
      {"1e", "unknown unit 'e'"},
      {"1.5.5", "unknown unit '.5'"},
      {"9223372036854775808", "too large"},
      {"8 EiB", "unknown unit 'EiB'"},
      {"8192 PiB", "too large"},
      {"1e30", "too large"},
      {"123456789012345678901234567890123456789012345", "too large"},
  };
  for (const auto& c : cases) {
    if (std::string(c.fragment).empty()) {
      EXPECT_NO_THROW(ParseBytes(c.text, "f", "x")) << c.text;
      continue;
    }
    try {
      ParseBytes(c.text, "file.yaml", "plan.segment_bytes");
      ADD_FAILURE() << "accepted '" << c.text << "'";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(c.fragment)) << c.text;
      EXPECT_EQ(e.file(), "file.yaml");
      EXPECT_EQ(e.field(), "plan.segment_bytes");
    }
  }
}

// ---- good scenarios ----

TEST(Scenario, DesignExampleParsesToItsValues) {
  const Scenario s = BuiltinScenario("llama3-8b-tp2-to-tp1x2");
  EXPECT_EQ(s.name, "llama3-8b-tp2-to-tp1x2");
  EXPECT_EQ(s.path, "<builtin:llama3-8b-tp2-to-tp1x2>");
  EXPECT_EQ(s.model.config.name, "llama3-8b");
  EXPECT_EQ(s.model.Parameters(), 8030261248);
  EXPECT_EQ(s.dtype, DType::kBF16);
  EXPECT_EQ(s.destination_dtype, DType::kBF16);
  EXPECT_EQ(s.cluster, ClusterPreset("h200-x2"));
  EXPECT_EQ(s.source, (SourceParallel{.tp = 2, .pp = 1, .vpp = 1, .ep = 1, .etp = 1, .dp = 1, .cp = 1, .pp_layers = {}}));
  EXPECT_EQ(s.destination, (DestinationParallel{.tp = 1, .pp = 1, .ep = 1, .dp = 2, .pp_layers = {}}));
  EXPECT_EQ(s.source_gpus, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(s.destination_gpus, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(s.destination_placement_free);
  EXPECT_EQ(s.memory.optimizer.bytes_per_param, 12);
  EXPECT_EQ(s.memory.optimizer.offload, OffloadMode::kAuto);
  EXPECT_TRUE(s.memory.optimizer.distributed);
  EXPECT_FALSE(s.memory.keep_gradients);
  EXPECT_EQ(s.memory.kv_cache_bytes, 10 * kGiB);
  EXPECT_EQ(s.memory.reserve_bytes, 1 * kGiB);
  EXPECT_EQ(s.plan.segment_bytes, 0);
}

TEST(Scenario, EveryFieldFromYamlWithHfConfigRelativeToTheFile) {
  const Scenario s = LoadScenario(kData + "/scenarios/hf-llama3-8b.yaml");
  EXPECT_EQ(s.name, "hf-llama3-8b");
  EXPECT_EQ(s.model.Parameters(), 8030261248);  // the HF total of Llama-3-8B
  EXPECT_EQ(s.cluster.name, "dgx-h100+overrides");
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.source, (SourceParallel{.tp = 2, .pp = 2, .vpp = 1, .ep = 1, .etp = 1, .dp = 2, .cp = 1,
                                      .pp_layers = {15, 17}}));  // dp derived: 8 GPUs / (tp 2 x pp 2)
  EXPECT_EQ(s.source_gpus, (std::vector<int32_t>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(s.destination, (DestinationParallel{.tp = 4, .pp = 1, .ep = 1, .dp = 1, .pp_layers = {}}));
  EXPECT_EQ(s.destination_gpus, (std::vector<int32_t>{15, 14, 13, 12}));  // list order is rank order
  EXPECT_EQ(s.destination_dtype, DType::kFP8E4M3);
  EXPECT_FALSE(s.destination_placement_free);
  EXPECT_EQ(s.memory.optimizer.bytes_per_param, 16);
  EXPECT_EQ(s.memory.optimizer.offload, OffloadMode::kFraction);
  EXPECT_DOUBLE_EQ(s.memory.optimizer.fraction, 0.25);
  EXPECT_FALSE(s.memory.optimizer.distributed);
  EXPECT_TRUE(s.memory.keep_gradients);
  EXPECT_EQ(s.memory.grad_bytes_per_param, 2);
  EXPECT_EQ(s.memory.kv_cache_bytes, 12 * kGiB + kGiB / 2);
  EXPECT_EQ(s.memory.reserve_bytes, 512 * kMiB);
  EXPECT_EQ(s.plan.segment_bytes, 64 * kMiB);
}

TEST(Scenario, JsonScenarioEqualsItsYamlTwin) {
  const Scenario y = LoadScenario(kData + "/scenarios/hf-llama3-8b.yaml");
  const Scenario j = LoadScenario(kData + "/scenarios/hf-llama3-8b.json");
  EXPECT_EQ(j.name, y.name);
  EXPECT_EQ(j.model.Parameters(), y.model.Parameters());
  EXPECT_EQ(j.cluster, y.cluster);
  EXPECT_EQ(j.source, y.source);
  EXPECT_EQ(j.destination, y.destination);
  EXPECT_EQ(j.source_gpus, y.source_gpus);
  EXPECT_EQ(j.destination_gpus, y.destination_gpus);
  EXPECT_EQ(j.destination_dtype, y.destination_dtype);
  EXPECT_EQ(j.destination_placement_free, y.destination_placement_free);
  EXPECT_EQ(j.memory.kv_cache_bytes, y.memory.kv_cache_bytes);
  EXPECT_EQ(j.memory.reserve_bytes, y.memory.reserve_bytes);
  EXPECT_EQ(j.memory.optimizer.fraction, y.memory.optimizer.fraction);
  EXPECT_EQ(j.plan.segment_bytes, y.plan.segment_bytes);
}

TEST(Scenario, ClusterOverridesApplyAfterTheCalibrationProfile) {
  const Scenario s = LoadScenario(kData + "/scenarios/overrides.yaml");
  const Cluster& c = s.cluster;
  EXPECT_EQ(c.nodes, 4);
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.nvlink_domain_nodes, 2);
  EXPECT_EQ(c.nics_per_node, 2);
  EXPECT_EQ(c.gpu_memory_bytes, 80 * kGiB);
  EXPECT_EQ(c.host_memory_bytes, int64_t{1} << 40);
  EXPECT_EQ(c.overheads.cuda_context_bytes, 300 * kMiB);  // override beats the profile's 400 MB
  EXPECT_EQ(c.overheads.nccl_bytes_per_peer, 16 * kMiB);
  EXPECT_EQ(c.nvlink.bytes_per_s, 400e9);
  EXPECT_EQ(c.nvlink.duplex_bytes_per_s, 390e9);
  EXPECT_EQ(c.nvlink.latency_ns, 20000);
  // The profile's NVLink curve survives an override of bandwidth and latency only.
  EXPECT_EQ(c.nvlink.efficiency, (std::vector<EfficiencyPoint>{{4194304, 0.5}, {1073741824, 1.0}}));
  EXPECT_EQ(c.network.bytes_per_s, 25e9);
  EXPECT_EQ(c.network.latency_ns, 9000);
  EXPECT_EQ(c.pcie.bytes_per_s, 50e9);
  EXPECT_EQ(c.pcie.latency_ns, 8000);  // from the profile
  EXPECT_EQ(c.pcie_pageable.bytes_per_s, 5e9);
  EXPECT_EQ(c.device_copy.bytes_per_s, 1800e9);
  EXPECT_EQ(c.device_copy.efficiency, (std::vector<EfficiencyPoint>{{kMiB, 0.5}, {64 * kMiB, 1.0}}));
  EXPECT_TRUE(c.measured);
  EXPECT_THAT(c.profile_source, HasSubstr("profile.json"));
  EXPECT_EQ(s.source.dp, 8);  // 16 GPUs / tp 2
  EXPECT_EQ(s.destination.dp, 8);
  EXPECT_NE(c.Fingerprint(), ClusterPreset("dgx-h200").Fingerprint());
}

TEST(Scenario, DpDerivationAndGpuForms) {
  const std::string base = "model: llama3-8b\ncluster: {preset: dgx-h100, nodes: 2}\n";
  Scenario s = ParseScenario(base + "source: {tp: 2, pp: 2}\ndestination: {tp: 8, gpus: [8-15]}\n", "<test>");
  EXPECT_EQ(s.source.dp, 4);
  EXPECT_EQ(s.source_gpus.size(), 16u);
  EXPECT_EQ(s.destination.dp, 1);
  EXPECT_EQ(s.destination_gpus, (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  s = ParseScenario(base + "source: {tp: 1, dp: 1, gpus: 5}\ndestination: {tp: 2, gpus: [3, 0]}\n", "<test>");
  EXPECT_EQ(s.source_gpus, (std::vector<int32_t>{5}));
  EXPECT_EQ(s.destination_gpus, (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(s.name, "scenario");
}

TEST(Scenario, BuiltinsLoadAndMatchTheirYamlFiles) {
  const std::vector<std::string> names = BuiltinScenarioNames();
  for (const char* required : {"llama3-8b-tp2-to-tp1x2", "qwen3-30b-a3b-ep2-to-tp2", "llama3-8b-disaggregated",
                               "tiny-llama-tp2-to-tp1x2", "deepseek-v3-pp16ep16-to-tp32dp8",
                               "qwen3-235b-tp4pp8ep16-to-tp8dp16", "kimi-k2-256-to-128"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const Scenario b = BuiltinScenario(name);
    const std::string path = kSource + "/scenarios/" + name + ".yaml";
    const Scenario f = LoadScenario(path);
    EXPECT_EQ(b.name, name);  // the name inside the file matches the file name
    // The embedded text is the file's text (generated at build time).
    const Scenario again = ParseScenario(ReadFile(path), "<builtin:" + name + ">");
    EXPECT_EQ(b.cluster, again.cluster);
    Cluster bc = b.cluster, fc = f.cluster;
    bc.profile_source = fc.profile_source = "";  // overrides of a measured preset name the file they are in
    EXPECT_EQ(bc, fc);
    EXPECT_EQ(b.source, f.source);
    EXPECT_EQ(b.destination, f.destination);
    EXPECT_EQ(b.source_gpus, f.source_gpus);
    EXPECT_EQ(b.destination_gpus, f.destination_gpus);
    EXPECT_EQ(b.model.Parameters(), f.model.Parameters());
    EXPECT_EQ(b.memory.kv_cache_bytes, f.memory.kv_cache_bytes);
    EXPECT_EQ(b.plan.segment_bytes, f.plan.segment_bytes);
  }
  try {
    BuiltinScenario("llama3-8b-tp2-to-tp1x3");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("did you mean 'llama3-8b-tp2-to-tp1x2'?"));
  }
}

TEST(Scenario, AtScaleBuiltinsHaveTheirShapes) {
  const Scenario d = BuiltinScenario("deepseek-v3-pp16ep16-to-tp32dp8");
  EXPECT_EQ(d.cluster.Gpus(), 512);
  EXPECT_EQ(d.source.Ranks(), 256);
  EXPECT_EQ(d.destination.Ranks(), 256);
  EXPECT_EQ(d.destination.tp, 32);
  EXPECT_EQ(d.destination.dp, 8);
  EXPECT_EQ(d.source_gpus.front(), 0);
  EXPECT_EQ(d.destination_gpus.front(), 256);
  const Scenario q = BuiltinScenario("qwen3-235b-tp4pp8ep16-to-tp8dp16");
  EXPECT_EQ(q.source.Ranks(), 128);
  EXPECT_EQ(q.destination.Ranks(), 128);
  EXPECT_EQ(q.source_gpus, q.destination_gpus);  // colocated
  const Scenario k = BuiltinScenario("kimi-k2-256-to-128");
  EXPECT_EQ(k.source.Ranks(), 256);
  EXPECT_EQ(k.destination.Ranks(), 128);
  EXPECT_EQ(k.destination_dtype, DType::kFP8E4M3);
}

// ---- bad scenarios: every file in tests/data/bad_scenarios/expected.txt ----

struct BadCase {
  std::string file, fragment;
};

std::vector<BadCase> BadCases() {
  std::vector<BadCase> out;
  std::ifstream in(kData + "/bad_scenarios/expected.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    out.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return out;
}

TEST(BadScenarios, EachFailsWithItsMessageNamingTheFile) {
  const std::vector<BadCase> cases = BadCases();
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = kData + "/bad_scenarios/" + c.file;
    ASSERT_TRUE(std::filesystem::exists(path));
    try {
      LoadScenario(path);
      ADD_FAILURE() << "loaded without error";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(c.fragment));
      // The message names the scenario file (or, for a bad HF config or
      // profile, the scenario's field and then that file).
      EXPECT_THAT(e.what(), HasSubstr("bad_scenarios/"));
    }
  }
}

TEST(BadScenarios, EveryFileIsListed) {
  std::set<std::string> listed;
  for (const auto& c : BadCases()) listed.insert(c.file);
  for (const auto& entry : std::filesystem::directory_iterator(kData + "/bad_scenarios")) {
    if (!entry.is_regular_file() || entry.path().filename() == "expected.txt") continue;
    EXPECT_TRUE(listed.count(entry.path().filename().string())) << entry.path() << " has no expected message";
  }
}

TEST(BadScenarios, MissingFileAndDirectory) {
  EXPECT_THROW(LoadScenario(kData + "/no-such-file.yaml"), InputError);
  EXPECT_THROW(LoadScenario(kData + "/bad_scenarios"), InputError);
}

// ---- memory at refit start ----

int64_t ExpertParams(const ModelSpec& m) {
  int64_t n = 0;
  for (const auto& t : m.tensors)
    if (t.kind == TensorKind::kExpertGate || t.kind == TensorKind::kExpertUp || t.kind == TensorKind::kExpertDown)
      n += t.shape.Elements();
  return n;
}

TEST(MemoryAtStart, ColocatedDenseTp2) {
  const Scenario s = BuiltinScenario("llama3-8b-tp2-to-tp1x2");
  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype);
  const auto mem = MemoryAtStart(s, src);
  ASSERT_EQ(mem.size(), 2u);
  int64_t weights = 0;
  for (int32_t g = 0; g < 2; ++g) {
    EXPECT_EQ(mem[g].gpu, g);
    EXPECT_EQ(mem[g].training_weights, src.RankBytes(g));
    // dp = 1: the distributed optimizer has nothing to shard over.
    EXPECT_EQ(mem[g].optimizer, src.RankBytes(g) / 2 * 12);
    EXPECT_EQ(mem[g].gradients, 0);
    EXPECT_EQ(mem[g].kv_cache, 10 * kGiB);
    EXPECT_EQ(mem[g].reserve, kGiB);
    EXPECT_EQ(mem[g].overheads, s.cluster.overheads.cuda_context_bytes);
    EXPECT_EQ(mem[g].Total(), mem[g].training_weights + mem[g].optimizer + 11 * kGiB + mem[g].overheads);
    weights += mem[g].training_weights;
  }
  // TP2 halves everything but the replicated norms.
  EXPECT_GE(weights, s.model.Bytes(DType::kBF16));
  EXPECT_LT(weights, s.model.Bytes(DType::kBF16) + 2 * kMiB);
  EXPECT_TRUE(CheckStartFits(s, mem).fits);
}

TEST(MemoryAtStart, DisaggregatedPutsKvOnlyOnTheDestination) {
  const Scenario s = BuiltinScenario("llama3-8b-disaggregated");
  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype);
  const auto mem = MemoryAtStart(s, src);
  EXPECT_EQ(mem[0].training_weights, s.model.Bytes(DType::kBF16));
  EXPECT_EQ(mem[0].optimizer, s.model.Parameters() * 12);
  EXPECT_EQ(mem[0].kv_cache, 0);
  EXPECT_EQ(mem[1].training_weights, 0);
  EXPECT_EQ(mem[1].optimizer, 0);
  EXPECT_EQ(mem[1].kv_cache, 10 * kGiB);
  EXPECT_EQ(mem[1].reserve, kGiB);  // both GPUs are used
}

TEST(MemoryAtStart, DistributedOptimizerShardsDenseOverDpAndExpertsOverExpertDp) {
  Scenario s = BuiltinScenario("qwen3-30b-a3b-ep2-to-tp2");  // tp1 ep2 dp2: edp = 1*1*2/(2*1) = 1
  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype);
  const int64_t experts = ExpertParams(s.model);
  const int64_t dense = s.model.Parameters() - experts;
  ASSERT_GT(experts, 0);
  s.memory.optimizer.bytes_per_param = 12;
  auto mem = MemoryAtStart(s, src);
  for (int32_t g = 0; g < 2; ++g) {
    EXPECT_EQ(mem[g].training_weights, (dense + experts / 2) * 2);  // dense replicated, half the experts
    EXPECT_EQ(mem[g].optimizer, 12 * (dense / 2 + experts / 2));
  }
  s.memory.optimizer.distributed = false;
  s.memory.optimizer.bytes_per_param = 6;
  s.memory.keep_gradients = true;
  mem = MemoryAtStart(s, src);
  for (int32_t g = 0; g < 2; ++g) {
    EXPECT_EQ(mem[g].optimizer, 6 * (dense + experts / 2));
    EXPECT_EQ(mem[g].gradients, 4 * (dense + experts / 2));
  }
}

// memory.optimizer.on_host: the share of the state that lives in host memory
// is not on the GPU at refit start, and state wholly on the host leaves the
// refit nothing to offload.
TEST(MemoryAtStart, OptimizerOnHostIsNotOnTheGpu) {
  const std::string base =
      "model: llama3-8b\ncluster: h200-x2\nsource: {tp: 2}\ndestination: {tp: 1, dp: 2}\nmemory: {optimizer: ";
  const Scenario dev = ParseScenario(base + "{bytes_per_param: 12}}\n", "<test>");
  const Scenario host = ParseScenario(base + "{bytes_per_param: 12, on_host: true}}\n", "<test>");
  const Scenario half = ParseScenario(base + "{bytes_per_param: 12, on_host: 0.5}}\n", "<test>");
  EXPECT_EQ(dev.memory.optimizer.on_host, 0);
  EXPECT_EQ(host.memory.optimizer.on_host, 1);
  EXPECT_EQ(host.memory.optimizer.offload, OffloadMode::kNone);  // nothing on the GPUs to move
  EXPECT_EQ(half.memory.optimizer.offload, OffloadMode::kAuto);
  const Layout src = MakeSourceLayout(dev.model, dev.source, dev.dtype);
  const auto m_dev = MemoryAtStart(dev, src), m_host = MemoryAtStart(host, src), m_half = MemoryAtStart(half, src);
  for (int32_t g = 0; g < 2; ++g) {
    // tp2, dp1: each GPU's optimizer state is 12 bytes x its RankBytes / 2 parameters.
    EXPECT_EQ(m_dev[g].optimizer, src.RankBytes(g) / 2 * 12);
    EXPECT_EQ(m_host[g].optimizer, 0);
    EXPECT_EQ(m_half[g].optimizer, src.RankBytes(g) / 2 * 6);
    EXPECT_EQ(m_host[g].Total(), m_dev[g].Total() - m_dev[g].optimizer);
  }
  // Offloading state that is already on the host is refused, naming the field.
  try {
    ParseScenario(base + "{on_host: true, offload: all}}\n", "<test>");
    ADD_FAILURE() << "accepted offload: all with on_host: true";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("memory.optimizer.offload"));
    EXPECT_THAT(e.what(), HasSubstr("lives on the host"));
  }
  EXPECT_THROW(ParseScenario(base + "{on_host: 2}}\n", "<test>"), InputError);
}

TEST(MemoryAtStart, UnusedGpusAreEmpty) {
  const Scenario s = ParseScenario(
      "model: tiny-llama\ncluster: dgx-h100\nsource: {tp: 2, gpus: 0-1}\ndestination: {tp: 1, gpus: 4}\n"
      "memory: {kv_cache: 1GiB, reserve: 1MiB}\n",
      "<test>");
  const auto mem = MemoryAtStart(s, MakeSourceLayout(s.model, s.source, s.dtype));
  ASSERT_EQ(mem.size(), 8u);
  for (int32_t g : {2, 3, 5, 6, 7}) EXPECT_EQ(mem[g].Total(), 0) << g;
  EXPECT_EQ(mem[4].kv_cache, kGiB);
  EXPECT_EQ(mem[4].reserve, kMiB);
  EXPECT_EQ(mem[0].kv_cache, 0);
}

TEST(CheckStartFits, ReportsTheGpuMissingTheMost) {
  const Scenario s = LoadScenario(kData + "/scenarios/does-not-fit.yaml");
  const auto mem = MemoryAtStart(s, MakeSourceLayout(s.model, s.source, s.dtype));
  const Feasibility f = CheckStartFits(s, mem);
  EXPECT_FALSE(f.fits);
  EXPECT_EQ(f.gpu, 0);  // both GPUs hold the same; ties go to the lowest id
  EXPECT_EQ(f.missing_bytes, mem[0].Total() - s.cluster.gpu_memory_bytes);
  EXPECT_EQ(f.message, "GPU 0 needs " + FormatBytes(mem[0].Total()) + " but has " +
                           FormatBytes(s.cluster.gpu_memory_bytes) + ": " + FormatBytes(f.missing_bytes) + " missing");
  // Exactly full fits; one byte more does not.
  Scenario t = s;
  std::vector<GpuMemoryAtStart> m(2);
  m[0].gpu = 0, m[1].gpu = 1;
  m[0].kv_cache = t.cluster.gpu_memory_bytes;
  m[1].kv_cache = t.cluster.gpu_memory_bytes + 1;
  EXPECT_TRUE(CheckStartFits(t, {m[0]}).fits);
  const Feasibility g = CheckStartFits(t, m);
  EXPECT_FALSE(g.fits);
  EXPECT_EQ(g.gpu, 1);
  EXPECT_EQ(g.missing_bytes, 1);
}

TEST(FormatBytes, BinaryUnitsThreeFigures) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(FormatBytes(kGiB - 1), "1.00 GiB");  // rounds up into the next unit, not "1024.0 MiB"
  EXPECT_EQ(FormatBytes(8030261248), "7.48 GiB");
  EXPECT_EQ(FormatBytes(int64_t{151} * kGiB + kGiB / 5), "151.2 GiB");
  EXPECT_EQ(FormatBytes(-2048), "-2.00 KiB");
  EXPECT_EQ(FormatBytes(INT64_MAX), "8.00 EiB");
}

}  // namespace
}  // namespace reshard
