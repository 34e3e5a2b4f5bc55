// Bad input through the built `reshard`: every input path refuses it with
// exit code 2, one message naming the file, the field and the problem, and no
// output file. Corpora (each file with its expected message in expected.txt):
// tests/data/bad_plans (plan.json), tests/data/bad_profiles (calibration
// profiles: in a scenario, by --calibration and `calibrate --refit`),
// tests/data/bad_hf (HF config.json); bad flags are a table here. Then plans from elsewhere (a plan
// run against another cluster, model or layout, or edited by hand) and faults
// injected into a run (RESHARD_FAULT).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace bad_inputs_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using nlohmann::json;
using Result = ::reshard::testing::RunResult;

const std::string kData = RESHARD_TEST_DATA_DIR;
const std::string kTiny = "tiny-llama-tp2-to-tp1x2";  // built-in scenario: plans in milliseconds
const std::string kExchange = kData + "/plans/exchange.json";  // a valid 2-GPU plan; the bad plans edit it

Result Reshard(const std::vector<std::string>& args) { return ::reshard::testing::RunBinary(RESHARD_BINARY, args); }

// `env VAR=VALUE reshard ARGS...`
Result ReshardWithEnv(const std::string& assignment, std::vector<std::string> args) {
  args.insert(args.begin(), {assignment, RESHARD_BINARY});
  return ::reshard::testing::RunBinary("/usr/bin/env", args);
}

// A scratch directory per test, removed afterwards.
class Scratch {
 public:
  Scratch() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("reshard_bad_inputs_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Scratch() { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name), std::ios::binary) << text;
    return Path(name);
  }

 private:
  fs::path dir_;
};

struct Case {
  std::string file, how, fragment;
};

// expected.txt: file<TAB>fragment, or file<TAB>how<TAB>fragment; '#' comments.
std::vector<Case> ReadCases(const std::string& dir, bool with_how) {
  std::vector<Case> cases;
  std::ifstream in(kData + "/" + dir + "/expected.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t a = line.find('\t');
    const size_t b = with_how ? line.find('\t', a + 1) : a;
    if (a == std::string::npos || b == std::string::npos) {
      ADD_FAILURE() << dir << "/expected.txt: malformed line: " << line;
      continue;
    }
    cases.push_back(
        {line.substr(0, a), with_how ? line.substr(a + 1, b - a - 1) : std::string(), line.substr(b + 1)});
  }
  return cases;
}

// Every file of a corpus directory is listed in its expected.txt and vice versa.
void ExpectCorpusComplete(const std::string& dir, const std::vector<Case>& cases) {
  std::vector<std::string> listed, present;
  for (const Case& c : cases) listed.push_back(c.file);
  for (const auto& e : fs::directory_iterator(kData + "/" + dir))
    if (e.path().filename() != "expected.txt") present.push_back(e.path().filename().string());
  std::sort(listed.begin(), listed.end());
  std::sort(present.begin(), present.end());
  EXPECT_EQ(listed, present) << dir;
}

// Exit 2, "error: FILE...FRAGMENT" on stderr, nothing on stdout, `output` not written.
void ExpectRefused(const Result& r, const std::string& what, const std::string& fragment, const std::string& output) {
  EXPECT_EQ(r.code, 2) << what << "\n" << r.err;
  EXPECT_THAT(r.err, HasSubstr("error: ")) << what;
  EXPECT_THAT(r.err, HasSubstr(fragment)) << what;
  EXPECT_TRUE(r.out.empty()) << what << ": " << r.out;
  EXPECT_FALSE(fs::exists(output)) << what << ": wrote " << output;
}

// ---- plan.json -----------------------------------------------------------------

TEST(BadPlans, TheUneditedPlanRuns) {
  const Scratch tmp;
  const Result r = Reshard({"run", kExchange, "--save-plan", tmp.Path("out.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp.Path("out.json")));  // so "not written" below means something
}

TEST(BadPlans, EveryFileIsRefusedByRunAndSimulateWithItsMessage) {
  const Scratch tmp;
  const std::vector<Case> cases = ReadCases("bad_plans", false);
  EXPECT_GE(cases.size(), 40u);
  ExpectCorpusComplete("bad_plans", cases);
  for (const Case& c : cases) {
    const std::string path = kData + "/bad_plans/" + c.file, out = tmp.Path("out.json");
    Result r = Reshard({"run", path, "--save-plan", out});
    ExpectRefused(r, "run " + c.file, c.fragment, out);
    EXPECT_THAT(r.err, HasSubstr(c.file)) << "the message names the file";
    r = Reshard({"simulate", path, "--trace", out});
    ExpectRefused(r, "simulate " + c.file, c.fragment, out);
  }
}

// ---- calibration profiles --------------------------------------------------------

std::string ScenarioWithProfile(const Scratch& tmp, const std::string& profile) {
  return tmp.Write("scenario.yaml", "model: tiny-llama\ncluster: {preset: h200-x2, calibration: " + profile +
                                        "}\nsource: {tp: 2}\ndestination: {tp: 1, dp: 2}\n");
}

TEST(BadProfiles, ValidProfilesAreAccepted) {
  const Scratch tmp;
  Result r = Reshard({"inspect", ScenarioWithProfile(tmp, kData + "/scenarios/profile.json")});
  EXPECT_EQ(r.code, 0) << r.err;
  r = Reshard({"calibrate", "--refit", kData + "/calib/refit-small.json", "-o", tmp.Path("b.json")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp.Path("b.json")));
}

TEST(BadProfiles, EveryFileIsRefusedWithItsMessage) {
  const Scratch tmp;
  const std::vector<Case> cases = ReadCases("bad_profiles", true);
  EXPECT_GE(cases.size(), 30u);
  ExpectCorpusComplete("bad_profiles", cases);
  for (const Case& c : cases) {
    const std::string path = kData + "/bad_profiles/" + c.file, out = tmp.Path("out.json");
    Result r;
    if (c.how == "scenario") {
      r = Reshard({"plan", ScenarioWithProfile(tmp, path), "-o", out});
      EXPECT_THAT(r.err, HasSubstr("cluster.calibration")) << c.file;
      // The same file given by --calibration: the same message, naming it.
      const Result flag = Reshard({"plan", kTiny, "--calibration", path, "-o", out});
      ExpectRefused(flag, "--calibration " + c.file, c.fragment, out);
      EXPECT_THAT(flag.err, HasSubstr("error: " + path)) << "the message names the file";
    } else {
      ASSERT_EQ(c.how, "refit") << c.file;
      r = Reshard({"calibrate", "--refit", path, "-o", out});
    }
    ExpectRefused(r, c.how + " " + c.file, c.fragment, out);
    EXPECT_THAT(r.err, HasSubstr(c.file)) << "the message names the file";
  }
}

TEST(BadProfiles, AMissingCalibrationFlagFileIsRefusedByEveryVerb) {
  const Scratch tmp;
  const std::string missing = tmp.Path("no-such-profile.json"), out = tmp.Path("out.json");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plan", kTiny, "-o", out}, {"simulate", kTiny, "--trace", out},
        {"run", kTiny, "--save-plan", out}, {"validate", kTiny, "--save-plan", out}, {"sweep", kTiny, "--csv", out},
        {"inspect", kTiny}}) {
    std::vector<std::string> with = args;
    with.insert(with.end(), {"--calibration", missing});
    ExpectRefused(Reshard(with), args[0], "error: " + missing + ": no such calibration profile", out);
  }
}

// ---- Hugging Face config.json ------------------------------------------------------

std::string ScenarioWithHf(const Scratch& tmp, const std::string& config) {
  return tmp.Write("scenario.yaml", "model: {hf_config: " + config +
                                        "}\ncluster: h200-x2\nsource: {tp: 1}\ndestination: {tp: 1}\n");
}

TEST(BadHfConfigs, EveryFileIsRefusedWithItsMessage) {
  const Scratch tmp;
  const std::vector<Case> cases = ReadCases("bad_hf", false);
  EXPECT_GE(cases.size(), 15u);
  ExpectCorpusComplete("bad_hf", cases);
  // The corpus' base config (every bad file changes one thing) plans fine.
  const std::string good = tmp.Write("good.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 4, "tie_word_embeddings": false})");
  Result r = Reshard({"inspect", ScenarioWithHf(tmp, good)});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const Case& c : cases) {
    const std::string path = kData + "/bad_hf/" + c.file, out = tmp.Path("out.json");
    r = Reshard({"plan", ScenarioWithHf(tmp, path), "-o", out});
    ExpectRefused(r, c.file, c.fragment, out);
    EXPECT_THAT(r.err, HasSubstr("model.hf_config: ")) << "names the scenario field";
    EXPECT_THAT(r.err, HasSubstr("bad_hf/" + c.file)) << "names the config file";
  }
}

// A 10.7-trillion-parameter model: every count exact, nothing wraps; it does
// not fit (exit 3), which is an answer, not an error.
TEST(BadHfConfigs, TenTrillionParametersDoNotWrap) {
  const Scratch tmp;
  const std::string scenario =
      tmp.Write("10t.yaml", "model: {hf_config: " + kData +
                                "/hf/llama-10t/config.json}\ncluster: {preset: dgx-h200, nodes: 20}\n"
                                "source: {tp: 8, pp: 20, gpus: all}\ndestination: {tp: 8, pp: 20, gpus: all}\n");
  const Result r = Reshard({"inspect", scenario, "--json"});
  ASSERT_EQ(r.code, 3) << r.err;
  const json j = json::parse(r.out);
  // Llama: 2·V·H (embedding, lm_head) + H (final norm) + L·(2H + 2H² + 2·H·kv_dim + 3·H·I).
  const int64_t H = 32768, I = 131072, L = 700, V = 262144, kv_dim = 32 * 128;
  const int64_t params = 2 * V * H + H + L * (2 * H + 2 * H * H + 2 * H * kv_dim + 3 * H * I);
  ASSERT_GT(params, int64_t{10'000'000'000'000});
  EXPECT_EQ(j.at("parameters").get<int64_t>(), params);
  EXPECT_EQ(j.at("model_bytes").get<int64_t>(), 2 * params);
  int64_t sum = 0;
  for (const auto& b : j.at("source_bytes")) {
    EXPECT_GT(b.get<int64_t>(), 0);
    sum += b.get<int64_t>();
  }
  // TP x PP shards add up to the model, plus the norms every TP rank holds
  // whole (two per layer and the final one, replicated tp - 1 more times).
  const int64_t tp = 8;
  EXPECT_EQ(sum, 2 * params + 2 * (tp - 1) * (2 * L * H + H));
  EXPECT_GT(j.at("missing_bytes").get<int64_t>(), 0);
}

// ---- flags -----------------------------------------------------------------------

TEST(BadFlags, EachIsRefusedWithItsMessageAndWritesNothing) {
  const Scratch tmp;
  const std::string out = tmp.Path("out.file");
  const std::string missing_dir = tmp.Path("no/such/dir/out.json");
  struct Flag {
    std::vector<std::string> args;
    std::string fragment;
  };
  std::string many_sizes = "4MiB";  // 300 segment sizes
  for (int i = 1; i < 300; ++i) many_sizes += "," + std::to_string((int64_t{4} << 20) + 4096 * i);
  const std::vector<Flag> table = {
      // Unknown flags and verbs, with a suggestion.
      {{"plan", kTiny, "--segmnet-bytes", "1MiB", "-o", out}, "did you mean '--segment-bytes'?"},
      {{"run", kExchange, "--jsn", "--save-plan", out}, "did you mean '--json'?"},
      {{"simulate", kExchange, "--tarce", out}, "did you mean '--trace'?"},
      {{"inspekt", kTiny}, "did you mean 'inspect'?"},
      {{"plan"}, "scenario is required"},
      // Counts.
      {{"run", kExchange, "--repeat", "-1", "--save-plan", out}, "--repeat: Value -1 not in range"},
      {{"run", kExchange, "--repeat", "0", "--save-plan", out}, "--repeat: Value 0 not in range"},
      {{"run", kExchange, "--repeat", "1001", "--save-plan", out}, "--repeat"},
      {{"run", kExchange, "--repeat", "two", "--save-plan", out}, "--repeat"},
      {{"run", kExchange, "--max-mismatches", "-3", "--save-plan", out}, "--max-mismatches"},
      {{"sweep", kTiny, "--threads", "-1", "--csv", out}, "--threads: Value -1 not in range 0 to 4096"},
      {{"plan", kTiny, "--replica-blocks", "-2", "-o", out}, "--replica-blocks"},
      // One source replica: no identical blocks to plan once (planner/replica_blocks.h).
      {{"plan", kTiny, "--replica-blocks", "2", "-o", out},
       "replica_blocks: the refit does not split into 2 identical blocks: source dp=1"},
      // Sizes.
      {{"plan", kTiny, "--segment-bytes", "0", "-o", out}, "--segment-bytes: must be > 0 (or 'auto')"},
      {{"run", kTiny, "--segment-bytes", "0", "--save-plan", out}, "--segment-bytes: must be > 0"},
      {{"simulate", kTiny, "--segment-bytes", "0", "--trace", out}, "--segment-bytes: must be > 0"},
      {{"plan", kTiny, "--segment-bytes", "1.5XiB", "-o", out}, "--segment-bytes: '1.5XiB' has an unknown unit 'XiB'"},
      {{"plan", kTiny, "--segment-bytes", "-5MiB", "-o", out}, "--segment-bytes: size must not be negative"},
      {{"plan", kTiny, "--segment-bytes", "nan", "-o", out}, "--segment-bytes: 'nan' is not a finite size"},
      {{"plan", kTiny, "--segment-bytes", "inf", "-o", out}, "--segment-bytes"},
      {{"plan", kTiny, "--segment-bytes", "99999999999PiB", "-o", out}, "is too large"},
      {{"sweep", kTiny, "--segment-bytes", "0", "--csv", out}, "--segment-bytes"},
      {{"calibrate", "-o", out, "--max-bytes", "1.5XiB"}, "--max-bytes: '1.5XiB' has an unknown unit"},
      // Numbers.
      {{"run", kExchange, "--timeout", "-1", "--save-plan", out}, "--timeout: must be a finite number > 0, got '-1'"},
      {{"run", kExchange, "--timeout", "0", "--save-plan", out}, "--timeout: must be a finite number > 0"},
      {{"run", kExchange, "--timeout", "nan", "--save-plan", out}, "--timeout: must be a finite number > 0"},
      {{"validate", kExchange, "--timeout", "inf"}, "--timeout: must be a finite number > 0"},
      {{"sweep", kTiny, "--margin", "2", "--csv", out}, "--margin"},
      {{"sweep", kTiny, "--margin", "nan", "--csv", out}, "--margin"},
      {{"sweep", kTiny, "--offload", "1.5", "--csv", out}, "--offload"},
      {{"sweep", kTiny, "--domains", "0", "--csv", out}, "--domains"},
      // Choices.
      {{"run", kExchange, "--backend", "gloo", "--save-plan", out}, "--backend"},
      {{"run", kTiny, "--scenario", kTiny, "--save-plan", out}, "--scenario: applies to a plan.json"},
      // Files in and out.
      {{"run", tmp.Path("nothere.json"), "--save-plan", out}, "no such scenario file or built-in scenario"},
      {{"calibrate", "--refit", tmp.Path("nothere.json"), "-o", out}, "cannot open the profile to refit"},
      {{"plan", kTiny, "-o", missing_dir}, "does not exist"},
      {{"run", kExchange, "--save-plan", missing_dir}, "--save-plan: cannot write"},
      {{"simulate", kExchange, "--trace", missing_dir}, "--trace: cannot write"},
      {{"sweep", kTiny, "--csv", missing_dir}, "--csv: cannot write"},
      {{"calibrate", "--refit", kData + "/calib/refit-small.json", "-o", missing_dir}, "does not exist"},
      {{"plan", kTiny, "-o", kData}, "is a directory"},
      // Outputs that are not regular files: refused before any work, never hung on or reported as written.
      {{"sweep", kTiny, "--csv", "/dev/full"}, "--csv: '/dev/full' is a character device"},
      {{"plan", kTiny, "-o", "/dev/full"}, "-o: '/dev/full' is a character device"},
      // Sizes and times whose implied work or nanoseconds would overflow or run away.
      {{"plan", kTiny, "--segment-bytes", "9223372036854775807", "-o", out}, "is more than a GPU's memory"},
      {{"run", kTiny, "--segment-bytes", "1", "--save-plan", out}, "--segment-bytes: segment_bytes below 4 KiB"},
      {{"plan", "llama3-8b-tp2-to-tp1x2", "--segment-bytes", "4KiB", "-o", out},
       "segments, more than the 131072 reshard plans; give at least"},
      {{"sweep", kTiny, "--segment-bytes", "1KiB", "--csv", out}, "--segment-bytes: segment_bytes below 4 KiB"},
      {{"run", kExchange, "--timeout", "1e10", "--save-plan", out}, "--timeout: 1e10 s is more than"},
      {{"validate", kExchange, "--timeout", "9.3e9"}, "--timeout"},
      {{"run", kExchange, "--timeout", "1e-9", "--save-plan", out}, "--timeout: 1e-9 s is less than 0.001 s"},
      {{"calibrate", "-o", out, "--max-bytes", "9223372036854775807"}, "--max-bytes: 9223372036854775807 bytes is more than 1 TiB"},
      // calibrate's numbers: checked before any GPU is looked for, each naming its range.
      {{"calibrate", "-o", out, "--host-calls", "-5"}, "--host-calls: must be a whole number in [256, 10000000], got '-5'"},
      {{"calibrate", "-o", out, "--host-calls", "0"}, "--host-calls: must be a whole number in [256, 10000000], got '0'"},
      {{"calibrate", "-o", out, "--host-calls", "99999999999"}, "--host-calls: must be a whole number in [256, 10000000]"},
      {{"calibrate", "-o", out, "--host-calls", "2e4"}, "--host-calls: must be a whole number in [256, 10000000]"},
      {{"calibrate", "-o", out, "--max-bytes", "0"}, "--max-bytes: must be in [8 KiB, 1 TiB], got 0"},
      {{"calibrate", "-o", out, "--max-bytes", "8KiB", "--quick"}, "--max-bytes: must be in [16 KiB, 1 TiB], got 8KiB"},
      {{"calibrate", "-o", out, "--pin-max-bytes", "0"}, "--pin-max-bytes: must be in [1 MiB, 1 TiB], got 0"},
      {{"calibrate", "-o", out, "--pin-max-bytes", "-4"}, "--pin-max-bytes: size must not be negative"},
      {{"calibrate", "-o", out, "--pin-max-bytes", "2TiB"}, "--pin-max-bytes: 2199023255552 bytes is more than 1 TiB (must be in [1 MiB, 1 TiB])"},
      {{"calibrate", "-o", out, "--copy-bytes", "1MiB"}, "--copy-bytes: must be in [2 MiB, 1 TiB], got 1MiB"},
      {{"calibrate", "-o", out, "--copy-bytes", "3000000"}, "--copy-bytes: must be a whole number of MiB"},
      {{"calibrate", "-o", out, "--quantize-bytes", "0"}, "--quantize-bytes: must be in [1 MiB, 1 TiB], got 0"},
      {{"calibrate", "-o", out, "--quantize-bytes", "9223372036854775807"}, "--quantize-bytes: 9223372036854775807 bytes is more than 1 TiB"},
      {{"sweep", kTiny, "--segment-bytes", many_sizes, "--csv", out},
       "1 domain sizes x 300 segment sizes x 4 offload fractions x 4 memory policies = 4800 points, more than the 1024"},
  };
  EXPECT_GE(table.size(), 30u);
  for (const Flag& f : table) {
    std::string what;
    for (const auto& a : f.args) what += a + " ";
    const Result r = Reshard(f.args);
    ExpectRefused(r, what, f.fragment, out);
    EXPECT_FALSE(fs::exists(missing_dir)) << what;
  }
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}
json ReadJsonFile(const std::string& path) { return ReadJson(path); }

// ---- files: inputs and outputs that are not regular files, outputs over inputs, torn outputs ----

TEST(Files, AFifoOrDeviceAsInputIsRefusedAtOnce) {
  const Scratch tmp;
  const std::string fifo = tmp.Path("fifo"), out = tmp.Path("out.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nobody writes the FIFO: reading it would hang; /dev/zero would read until bad_alloc.
  for (const std::string& input : {fifo, std::string("/dev/zero")}) {
    ExpectRefused(Reshard({"plan", input, "-o", out}), "plan " + input, "not a regular file", out);
    ExpectRefused(Reshard({"inspect", input}), "inspect " + input, "not a regular file", out);
    ExpectRefused(Reshard({"plan", kTiny, "--calibration", input, "-o", out}), "--calibration " + input,
                  "no such calibration profile", out);
    ExpectRefused(Reshard({"plan", tmp.Write("hf.yaml", "model: {hf_config: " + input +
                                                            "}\ncluster: h200-x2\nsource: {tp: 1}\ndestination: {tp: 1}\n"),
                           "-o", out}),
                  "hf_config " + input, "not a regular file", out);
    ExpectRefused(Reshard({"calibrate", "--refit", input, "-o", out}), "--refit " + input, "not a regular file", out);
  }
  // A FIFO as the output: refused, not waited on.
  const Result r = Reshard({"plan", kTiny, "-o", fifo});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("-o: '" + fifo + "' is a FIFO"));
}

TEST(Files, AnOutputEqualToAnInputIsRefusedAndTheInputKept) {
  const Scratch tmp;
  const std::string scenario = tmp.Write("s.yaml", "model: tiny-llama\ncluster: h200-x2\nsource: {tp: 2}\n"
                                                   "destination: {tp: 1, dp: 2}\n");
  const std::string before = tmp.Write("copy.yaml", "");
  fs::copy_file(scenario, before, fs::copy_options::overwrite_existing);
  Result r = Reshard({"plan", scenario, "-o", scenario});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("-o: '" + scenario + "' is an input of this command"));
  EXPECT_EQ(fs::file_size(scenario), fs::file_size(before));
  const std::string plan = tmp.Path("plan.json");
  ASSERT_EQ(Reshard({"plan", kTiny, "--no-simulate", "-o", plan}).code, 0);
  r = Reshard({"run", plan, "--save-plan", plan});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--save-plan: '" + plan + "' is an input of this command"));
  r = Reshard({"simulate", plan, "--trace", plan});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(Reshard({"simulate", plan}).code, 0) << "the plan is intact";
}

TEST(Files, ARefusedRunLeavesAnExistingOutputUntouchedAndNoTemporaryFile) {
  const Scratch tmp;
  const std::string out = tmp.Write("out.json", "previous content\n");
  // Bad input after the output path was checked: nothing is written over it.
  const Result r = Reshard({"plan", kData + "/bad_scenarios/segment_bytes_1b.yaml", "-o", out});
  EXPECT_EQ(r.code, 2);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "previous content\n");
  // A successful write replaces it whole (written to a temporary file, then renamed).
  ASSERT_EQ(Reshard({"plan", kTiny, "--no-simulate", "-o", out}).code, 0);
  EXPECT_NO_THROW(ReadJsonFile(out));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp.Path(""))) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "no temporary file left behind";
}

TEST(Files, ANameThatIsNotUtf8IsRefusedBeforeAnyOutput) {
  const Scratch tmp;
  // The name comes from the file name when the scenario has none.
  const std::string scenario = tmp.Write("bad\xff.yaml", "model: tiny-llama\ncluster: h200-x2\nsource: {tp: 2}\n"
                                                         "destination: {tp: 1, dp: 2}\n");
  const std::string out = tmp.Path("out.json");
  ExpectRefused(Reshard({"plan", scenario, "--json", "-o", out}), "plan", "name: not valid UTF-8 text: byte 0xff",
                out);
  ExpectRefused(Reshard({"inspect", scenario, "--json"}), "inspect", "name: not valid UTF-8 text: byte 0xff", out);
}

// A scenario names more input files than the command line: -o over its
// hf_config or calibration profile would destroy them.
TEST(Files, AnOutputOverAFileTheScenarioReadsIsRefused) {
  const Scratch tmp;
  const std::string hf = tmp.Write("config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 4})");
  const std::string hf_scenario = ScenarioWithHf(tmp, hf);
  const std::string profile = tmp.Path("profile.json");
  fs::copy_file(kData + "/scenarios/profile.json", profile);
  const std::string profile_scenario = tmp.Write("p.yaml", "model: tiny-llama\ncluster: {preset: h200-x2, calibration: " +
                                                               profile + "}\nsource: {tp: 2}\ndestination: {tp: 1, dp: 2}\n");
  const auto hf_size = fs::file_size(hf), profile_size = fs::file_size(profile);
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"plan", hf_scenario, "-o", hf}, "-o"},
           {{"simulate", hf_scenario, "--trace", hf}, "--trace"},
           {{"run", profile_scenario, "--save-plan", profile}, "--save-plan"},
           {{"sweep", profile_scenario, "--csv", profile}, "--csv"}}) {
    const Result r = Reshard(args);
    EXPECT_EQ(r.code, 2) << args[0] << " " << r.err;
    EXPECT_THAT(r.err, HasSubstr(flag + ": '")) << args[0];
    EXPECT_THAT(r.err, HasSubstr("is an input of this command")) << args[0];
  }
  EXPECT_EQ(fs::file_size(hf), hf_size);
  EXPECT_EQ(fs::file_size(profile), profile_size);
}

// Under `ulimit -v`: a plan below the size cap but larger than the memory the
// process may take is refused by name (not an internal bad_alloc), and a
// sweep asked for more threads than can start runs on the ones that did.
TEST(Files, InputsLargerThanTheProcessMayAllocate) {
  const Scratch tmp;
  const std::string plan = tmp.Path("big.json");
  {
    std::ofstream f(plan, std::ios::binary);
    f << R"({"format_version": 1, "ops": [)";
  }
  fs::resize_file(plan, int64_t{3} << 30);  // sparse: 3 GiB, under the 4 GiB cap, no disk used
  const std::string limit = "ulimit -v 1048576; exec \"$0\" \"$@\"";  // 1 GiB of address space
  Result r = ::reshard::testing::RunBinary("/bin/sh", {"-c", limit, RESHARD_BINARY, "simulate", plan});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(plan + ": the plan is 3221225472 bytes, more memory than this process could get"));
  r = ::reshard::testing::RunBinary("/bin/sh", {"-c", limit, RESHARD_BINARY, "sweep", kTiny, "--threads", "4096"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("recommended:"));
}

// A write that fails part-way (here the file size limit, EFBIG; a full disk
// is the same): exit 2 naming the file, the existing file as it was, no
// temporary file left.
TEST(Files, AFailedWriteIsReportedAndLeavesTheExistingFile) {
  const Scratch tmp;
  const std::string out = tmp.Write("out.json", "previous content\n");
  // 16 blocks of 512 bytes; the plan is ~70 KB. SIGXFSZ ignored, so write(2) fails instead.
  const std::string limit = "trap '' XFSZ; ulimit -f 16; exec \"$0\" \"$@\"";
  const Result r =
      ::reshard::testing::RunBinary("/bin/sh", {"-c", limit, RESHARD_BINARY, "plan", kTiny, "--no-simulate", "-o", out});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(out + ": writing failed"));
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "previous content\n");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp.Path(""))) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "no temporary file left behind";
}

// ---- plans from elsewhere ----------------------------------------------------------------


TEST(PlansFromElsewhere, APlanRecordsItsScenarioAndRunsOnIt) {
  const Scratch tmp;
  const std::string plan = tmp.Path("plan.json");
  ASSERT_EQ(Reshard({"plan", kTiny, "--no-simulate", "-o", plan}).code, 0);
  const json j = ReadJson(plan);
  EXPECT_THAT(j.at("scenario_fingerprint").get<std::string>(), MatchesRegex("[0-9a-f]{16}"));
  // Planning again records the same fingerprint (stable).
  ASSERT_EQ(Reshard({"plan", kTiny, "--no-simulate", "-o", tmp.Path("again.json")}).code, 0);
  EXPECT_EQ(ReadJson(tmp.Path("again.json")).at("scenario_fingerprint"), j.at("scenario_fingerprint"));
  // inspect shows the same one, so a user can compare before running.
  const Result inspect = Reshard({"inspect", kTiny, "--json"});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_EQ(json::parse(inspect.out).at("scenario_fingerprint"), j.at("scenario_fingerprint"));
  const Result r = Reshard({"run", plan, "--scenario", kTiny, "--save-plan", tmp.Path("ran.json")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp.Path("ran.json")));
}

TEST(PlansFromElsewhere, AnotherClusterModelOrLayoutIsRefusedBeforeAnyWork) {
  const Scratch tmp;
  const std::string plan = tmp.Path("plan.json"), out = tmp.Path("out.json");
  ASSERT_EQ(Reshard({"plan", kTiny, "--no-simulate", "-o", plan}).code, 0);
  // Another cluster (80 GiB GPUs): the field that differs is named.
  Result r = Reshard({"run", plan, "--scenario", kData + "/scenarios/tiny-llama-80gib.yaml", "--save-plan", out});
  ExpectRefused(r, "other cluster", "cluster_fingerprint: not a plan for scenario 'tiny-llama-80gib'", out);
  EXPECT_THAT(r.err, HasSubstr("refused before any work"));
  const int64_t memory = ReadJson(plan).at("cluster").at("gpu_memory_bytes").get<int64_t>();
  EXPECT_THAT(r.err, HasSubstr("cluster.gpu_memory_bytes: " + std::to_string(memory) + " in the plan, 85899345920 here"));
  // Same cluster and model, another destination layout.
  r = Reshard({"simulate", plan, "--scenario", kData + "/scenarios/tiny-llama-tp2-to-tp2.yaml", "--trace", out});
  ExpectRefused(r, "other layout", "scenario_fingerprint: not a plan for scenario 'tiny-llama-tp2-to-tp2'", out);
  EXPECT_THAT(r.err, HasSubstr("the layouts, dtypes or GPU lists differ"));
  // Another model.
  r = Reshard({"validate", plan, "--scenario", "llama3-8b-tp2-to-tp1x2"});
  ExpectRefused(r, "other model", "tensors: not a plan for scenario 'llama3-8b-tp2-to-tp1x2'", out);
}

TEST(PlansFromElsewhere, HandEditsAreRefused) {
  const Scratch tmp;
  const std::string plan = tmp.Path("plan.json"), out = tmp.Path("out.json");
  ASSERT_EQ(Reshard({"plan", kTiny, "--no-simulate", "-o", plan}).code, 0);
  const json original = ReadJson(plan);
  // Written back by nlohmann (keys sorted: "buffers" first), as another tool would.
  auto edited = [&](const std::string& name, const std::function<void(json&)>& edit) {
    json j = original;
    edit(j);
    return tmp.Write(name, j.dump());
  };
  // A tensor made larger, consistently: the plan itself still verifies, but it
  // no longer matches the model it claims (--scenario).
  const std::string shape = edited("shape.json", [](json& j) { j["tensors"][0]["shape"][0] = 4096; });
  Result r = Reshard({"run", shape, "--scenario", kTiny, "--save-plan", out});
  ExpectRefused(r, "edited shape", "tensors: not a plan for scenario", out);
  EXPECT_THAT(r.err, HasSubstr("tensors[0] '" + original["tensors"][0]["name"].get<std::string>() + "' has shape [4096"));
  // A destination buffer made smaller: Verify fails, with or without a scenario.
  size_t dst = 0;
  while (original["buffers"][dst]["role"] != "destination_weights") ++dst;
  const std::string size = edited("size.json", [&](json& j) { j["buffers"][dst]["bytes"] = 2; });
  for (const char* verb : {"run", "validate"}) {
    r = Reshard({verb, size, "--save-plan", out});
    ExpectRefused(r, std::string(verb) + " edited size", "the plan fails Verify", out);
    EXPECT_THAT(r.err, HasSubstr("buffer " + std::to_string(dst)));
  }
  r = Reshard({"simulate", size, "--trace", out});
  ExpectRefused(r, "simulate edited size", "the plan fails Verify", out);
  // An op edited: a send's size no longer matches its receive.
  size_t send = 0;
  while (original["ops"][send]["kind"] != "send") ++send;
  const std::string op = edited("op.json", [&](json& j) {
    json& region = j["ops"][send]["region"];
    region["row_bytes"] = region["row_bytes"].get<int64_t>() - 2;
  });
  r = Reshard({"run", op, "--scenario", kTiny, "--save-plan", out});
  ExpectRefused(r, "edited op", "the plan fails Verify", out);
  EXPECT_THAT(r.err, HasSubstr("op " + std::to_string(send) + " (send"));
  // The scenario fingerprint deleted: the plan can no longer prove its layouts.
  const std::string unstamped = edited("unstamped.json", [](json& j) { j.erase("scenario_fingerprint"); });
  r = Reshard({"run", unstamped, "--scenario", kTiny, "--save-plan", out});
  ExpectRefused(r, "no fingerprint", "scenario_fingerprint: not a plan for scenario", out);
  EXPECT_THAT(r.err, HasSubstr("scenario_fingerprint is missing"));
  // A destination piece dropped (fingerprint intact): the pieces the run would
  // check are no longer the scenario's destination layout.
  const std::string dropped = edited("dropped.json", [](json& j) { j["destinations"].erase(0); });
  r = Reshard({"run", dropped, "--scenario", kTiny, "--save-plan", out});
  ExpectRefused(r, "dropped destination", "destinations: not a plan for scenario", out);
  EXPECT_THAT(r.err, HasSubstr("is missing"));
  // An op removed.
  const std::string removed = edited("removed.json", [&](json& j) { j["ops"].erase(send); });
  r = Reshard({"simulate", removed, "--trace", out});
  ExpectRefused(r, "removed op", "the plan fails Verify", out);
}

// ---- faults during a run -----------------------------------------------------------------

TEST(Faults, AFailingRankEndsTheRunNamingOpAndGpu) {
  const Scratch tmp;
  // exchange.json: op 6 is GPU 1's send to GPU 0, op 7 GPU 0's receive of it.
  const auto start = std::chrono::steady_clock::now();
  const Result r = ReshardWithEnv("RESHARD_FAULT=gpu=1,op=6", {"run", kExchange, "--json", "--timeout", "300"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 1) << r.err;
  // Every rank ended because the failure woke it, not because it waited out the 300 s timeout.
  EXPECT_LT(seconds, 60);
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("verified"), false);
  EXPECT_EQ(j.at("failed_op"), 6);
  EXPECT_EQ(j.at("failed_gpu"), 1);
  EXPECT_THAT(j.at("error").get<std::string>(), HasSubstr("op 6 (send gpu 1->0) on GPU 1: injected fault"));
  EXPECT_THAT(r.err, HasSubstr("NOT verified"));
  // validate reports it the same way.
  const Result v = ReshardWithEnv("RESHARD_FAULT=rank=0,op=1", {"validate", kExchange});
  EXPECT_EQ(v.code, 1);
  EXPECT_THAT(v.err, HasSubstr("op 1 (copy gpu 0) on GPU 0: injected fault"));
}

TEST(Faults, ABadFaultSpecIsBadInput) {
  const Scratch tmp;
  const std::string out = tmp.Path("out.json");
  ExpectRefused(ReshardWithEnv("RESHARD_FAULT=gpu=1", {"run", kExchange, "--save-plan", out}), "no op",
                "RESHARD_FAULT: 'gpu=1': the op is missing", out);
  ExpectRefused(ReshardWithEnv("RESHARD_FAULT=gpu=1,opp=3", {"run", kExchange, "--save-plan", out}), "typo",
                "unknown key 'opp' (did you mean 'op'?)", out);
  ExpectRefused(ReshardWithEnv("RESHARD_FAULT=gpu=0,op=6", {"run", kExchange, "--save-plan", out}), "wrong GPU",
                "RESHARD_FAULT: op 6 (send) runs on GPU 1, not GPU 0", out);
  ExpectRefused(ReshardWithEnv("RESHARD_FAULT=gpu=1,op=99", {"run", kExchange, "--save-plan", out}), "no such op",
                "op 99 does not exist", out);
}

}  // namespace bad_inputs_test
