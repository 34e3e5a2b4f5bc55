// docs/json.md lists every field of every `--json` output. This test runs each
// verb on built-in scenarios (and the cases that add fields: a plan that does
// not fit, a run that fails, a plan larger than host memory, -o, --trace,
// --baseline), collects every field
// path of the JSON (`a.b`, `a[].b` for the elements of a list) and compares the
// union per verb with the fields the doc's sections give that verb, both ways.
// `calibrate` needs GPUs and is left out, and so are rows marked
// "**NCCL backend only**" in the output-lacks direction (this test runs the
// host backend; anything it does output must still be documented).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

namespace {

using nlohmann::json;

const std::string kData = RESHARD_TEST_DATA_DIR;
const std::string kDoc = std::string(RESHARD_SOURCE_DIR) + "/docs/json.md";
const std::vector<std::string> kVerbs = {"inspect", "plan", "simulate", "run", "validate", "sweep", "import"};

void Walk(const json& j, const std::string& prefix, std::set<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
      out.insert(path);
      Walk(it.value(), path, out);
    }
  } else if (j.is_array()) {
    for (const json& e : j) Walk(e, prefix + "[]", out);
  }
}

// Field paths per verb from the doc: a `## ...` section applies to every verb
// named in backticks in its heading; a table row's first cell lists fields in
// backticks, `.x` meaning a sibling of the cell's first field.
std::map<std::string, std::set<std::string>> DocFields() {
  std::ifstream in(kDoc);
  EXPECT_TRUE(in.good()) << kDoc;
  std::map<std::string, std::set<std::string>> fields;
  std::vector<std::string> verbs;
  const std::regex code("`([^`]+)`");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) {
      verbs.clear();
      for (std::sregex_iterator m(line.begin(), line.end(), code), end; m != end; ++m) {
        const std::string name = (*m)[1];
        if (std::find(kVerbs.begin(), kVerbs.end(), name) != kVerbs.end()) verbs.push_back(name);
      }
      continue;
    }
    if (verbs.empty() || !line.starts_with("| `")) continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    std::string first;
    for (std::sregex_iterator m(cell.begin(), cell.end(), code), end; m != end; ++m) {
      std::string name = (*m)[1];
      if (name.starts_with(".")) name = first.substr(0, first.rfind('.')) + name;
      if (first.empty()) first = name;
      for (const std::string& v : verbs) fields[v].insert(name);
      if (line.find("**NCCL backend only**") != std::string::npos) fields["<nccl-only>"].insert(name);
    }
  }
  return fields;
}

struct Scratch {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("reshard_json_doc_" + std::to_string(::getpid()));
  Scratch() { std::filesystem::create_directories(dir); }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string Path(const std::string& name) const { return (dir / name).string(); }
};

TEST(JsonDoc, EveryOutputFieldIsDocumentedAndEveryDocumentedFieldIsOutput) {
  const Scratch tmp;
  const std::string tiny = "tiny-llama-tp2-to-tp1x2";
  const std::string too_big = kData + "/scenarios/does-not-fit.yaml";
  const std::string binary = RESHARD_BINARY;
  struct Case {
    std::string verb;
    std::vector<std::string> args;  // after the binary; "/usr/bin/env" cases set a variable first
    int code = 0;
    bool env = false;
  };
  const std::vector<Case> cases = {
      {"inspect", {"inspect", tiny, "--json"}},
      {"inspect", {"inspect", too_big, "--json"}, 3},
      {"plan", {"plan", tiny, "--json"}},
      {"plan", {"plan", tiny, "--json", "--baseline", "megatron", "-o", tmp.Path("plan.json")}},
      {"plan", {"plan", too_big, "--json"}, 3},
      {"simulate", {"simulate", tiny, "--json", "--trace", tmp.Path("sim_trace.json")}},
      {"run", {"run", tiny, "--backend", "host", "--json", "--trace", tmp.Path("run_trace.json")}},
      {"run", {"RESHARD_FAULT=gpu=0,op=1", binary, "run", tiny, "--backend", "host", "--json"}, 1, true},
      {"run", {"RESHARD_HOST_MEMORY_BYTES=1000000", binary, "run", tiny, "--backend", "host", "--json"}, 3, true},
      {"validate", {"validate", tiny, "--backend", "host", "--json", "--trace", tmp.Path("val_trace.json")}},
      {"validate", {"RESHARD_HOST_MEMORY_BYTES=1000000", binary, "validate", tiny, "--backend", "host", "--json"}, 3,
       true},
      {"sweep", {"sweep", tiny, "--json"}},
      {"import", {"import", "verl", kData + "/import/ppo_megatron_minimal.yaml", "--json"}},
      {"import", {"import", "megatron", "--json", "--model", "llama3-8b", "--nproc-per-node", "2", "--lr", "1e-5",
                  "-o", tmp.Path("imported.yaml")}},
  };
  std::map<std::string, std::set<std::string>> seen;
  for (const Case& c : cases) {
    const auto r = ::reshard::testing::RunBinary(c.env ? "/usr/bin/env" : binary, c.args);
    ASSERT_EQ(r.code, c.code) << c.args[0] << " " << c.args[1] << ": " << r.err;
    const json j = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << c.verb << ": not JSON: " << r.out.substr(0, 200);
    Walk(j, "", seen[c.verb]);
  }
  const auto doc = DocFields();
  for (const std::string& verb : kVerbs) {
    const std::set<std::string>& out = seen[verb];
    const std::set<std::string> documented = doc.count(verb) ? doc.at(verb) : std::set<std::string>{};
    for (const std::string& f : out) {
      EXPECT_TRUE(documented.count(f)) << "`" << verb << " --json` writes `" << f << "`, which docs/json.md lacks";
    }
    const std::set<std::string> nccl_only = doc.count("<nccl-only>") ? doc.at("<nccl-only>") : std::set<std::string>{};
    for (const std::string& f : documented) {
      if (nccl_only.count(f)) continue;
      EXPECT_TRUE(out.count(f)) << "docs/json.md lists `" << f << "` for `" << verb << "`, which its output lacks";
    }
  }
}

}  // namespace
