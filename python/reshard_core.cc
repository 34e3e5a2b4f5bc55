// reshard._core: the C++ half of the `reshard` Python module (pybind11).
//
// One translation unit (pybind11 compiles slowly). It holds scenarios and
// plans as opaque objects and returns every result as the JSON text the CLI's
// --json prints, built by the same functions (cli/json_reports.h,
// cli/run_common.h, planner/sweep.h), so the Python objects' to_dict() and the
// CLI cannot drift apart. The Python half (python/reshard/) parses that text
// into typed results and DataFrames and raises its exceptions.
//
// Planning, simulating, sweeping and running release the GIL: they read only
// their own arguments (a Scenario or Plan is never changed once made), so
// several Python threads may call them at once.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/host_memory.h"
#include "cli/inputs.h"
#include "cli/json_reports.h"
#include "cli/run_common.h"
#include "executor/backend.h"
#include "model/error.h"
#include "model/import.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "planner/sweep.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace py = pybind11;

namespace reshard::python {

namespace {

// Never changed once made (pybind11 holders cannot be shared_ptr<const T>).
using ScenarioPtr = std::shared_ptr<Scenario>;
using PlanPtr = std::shared_ptr<Plan>;

// Raises reshard._errors.<name>(*args): the Python classes carry the fields.
template <typename... Args>
void Raise(const char* name, Args&&... args) {
  py::object cls = py::module_::import("reshard._errors").attr(name);
  py::object exc = cls(std::forward<Args>(args)...);
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

void TranslateErrors(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const InputError& e) {
    Raise("InputError", e.what(), e.file(), e.field(), e.problem());
  } catch (const RunError& e) {
    Raise("RunFailed", e.what(), e.op(), e.gpu());
  } catch (const cli::HostMemoryError& e) {
    Raise("HostMemoryTooSmall", e.what(), py::module_::import("json").attr("loads")(cli::HostMemoryJson(e).dump()));
  } catch (const InternalError& e) {
    Raise("InternalError", e.what());
  }
}

ScenarioPtr LoadScenarioArg(const std::string& arg, const std::string& calibration) {
  return std::make_shared<Scenario>(cli::LoadScenarioArg(arg, calibration));
}

// `origin` names the text in messages; a path makes relative paths in it
// (hf_config, calibration) relative to its directory, "<...>" to the working
// directory.
ScenarioPtr ParseScenarioText(const std::string& text, const std::string& origin, const std::string& calibration) {
  Scenario s = ParseScenario(text, origin);
  if (!calibration.empty()) cli::ApplyCalibrationFlag(s.cluster, calibration);
  return std::make_shared<Scenario>(std::move(s));
}

// `reshard import KIND`: (scenario, yaml, assumptions, ignored). The scenario
// is read from the YAML as if written beside the recipe (the import's
// default output), so its relative paths resolve the same way.
py::tuple Import(const std::string& kind, const std::string& path, const std::vector<std::string>& args,
                 const ImportOptions& o) {
  ImportResult r;
  if (kind == "nemo-rl") {
    r = ImportNemoRl(path, o);
  } else if (kind == "verl") {
    r = ImportVerl(path, o);
  } else if (kind == "megatron") {
    r = ImportMegatron(args, o);
  } else {
    throw InputError("<python>", "kind", "unknown import kind '" + kind + "' (nemo-rl, verl or megatron)");
  }
  const std::filesystem::path dir = kind == "megatron" ? std::filesystem::path(".")
                                                       : std::filesystem::path(path).parent_path();
  const std::string origin = o.output_path.empty() ? (dir / (r.name + ".yaml")).string() : o.output_path;
  return py::make_tuple(ParseScenarioText(r.yaml, origin, ""), r.yaml, r.assumptions, r.ignored);
}

// (plan or None, the JSON `reshard plan --json` prints). A scenario that does
// not fit gives None and the infeasible JSON (fits false).
py::tuple MakePlanOf(const ScenarioPtr& s, int64_t segment_bytes, const std::string& baseline, bool simulate,
                     int32_t replica_blocks) {
  PlanResult r;
  {
    py::gil_scoped_release release;
    PlannerOptions po;
    if (segment_bytes > 0) CheckSegmentBytes(*s, segment_bytes, "<python>", "segment_bytes");
    po.segment_bytes = segment_bytes;
    po.simulate = simulate;
    po.replica_blocks = replica_blocks;
    r = cli::PlanScenario(*s, po, baseline);
    if (r.ok()) cli::RecordScenario(r.plan, *s);
  }
  if (!r.ok()) return py::make_tuple(py::none(), cli::InfeasibleJson(*s, r).dump());
  const std::string json = cli::PlanJson(*s, r, baseline, "").dump();
  return py::make_tuple(std::make_shared<Plan>(std::move(r.plan)), json);
}

IssueModel IssueOf(const std::string& issue) {
  if (issue == "none") return IssueModel::kNone;
  if (issue == "executor") return IssueModel::kExecutor;
  if (issue == "python") return IssueModel::kPython;
  throw InputError("<python>", "issue", "'" + issue + "' is not one of executor, python, none");
}

// (the JSON `reshard simulate --json` prints, "" or the message of a peak
// above capacity less `reserve_bytes`).
py::tuple SimulatePlan(const PlanPtr& plan, const std::string& issue, bool one_process, bool cold,
                       const std::string& trace, int64_t reserve_bytes) {
  SimOptions so;
  so.issue = IssueOf(issue);
  so.one_process = one_process;
  so.cold = cold;
  std::string json, over;
  {
    py::gil_scoped_release release;
    if (!trace.empty()) cli::CheckOutputPath(trace, "trace");
    TraceWritten written;
    const Prediction pr =
        trace.empty() ? Simulate(*plan, so) : SimulateWithTrace(*plan, trace, so, std::nullopt, &written);
    json = cli::SimulateJson(*plan, pr, reserve_bytes, trace, written).dump();
    over = cli::PeakAboveUsable(pr.peak_bytes, plan->cluster, reserve_bytes);
  }
  return py::make_tuple(json, over);
}

std::string SweepScenario(const ScenarioPtr& s, const std::vector<int64_t>& segment_bytes,
                          const std::vector<double>& offload_fractions, const std::vector<int32_t>& domains,
                          double margin, int32_t threads, bool exhaustive) {
  py::gil_scoped_release release;
  SweepGrid grid;
  grid.segment_bytes = segment_bytes;
  grid.offload_fractions = offload_fractions;
  grid.nvlink_domain_nodes = domains;
  if (!grid.segment_bytes.empty()) {
    const int64_t destination_bytes = DestinationBytes(*s, "<python>");  // one layout for every size
    for (int64_t b : grid.segment_bytes)
      if (const std::string problem = SegmentBytesProblem(*s, b, destination_bytes); !problem.empty())
        throw InputError("<python>", "segment_bytes", problem);
  }
  SweepOptions so;
  so.threads = threads;
  so.margin = margin;
  so.exhaustive = exhaustive;
  return nlohmann::json(Sweep(*s, grid, so)).dump();
}

// `reshard run --json` for one process; a run that fails part-way raises
// RunFailed (op, gpu), a plan larger than host memory on the host backend
// HostMemoryTooSmall (before anything is allocated).
std::string RunPlan(const PlanPtr& plan, const std::string& backend, int32_t repeat, double timeout_s,
                    int32_t max_mismatches, bool warmup) {
  if (backend != "host" && backend != "nccl")
    throw InputError("<python>", "backend", "'" + backend + "' is not host or nccl");
  cli::ExecuteArgs a;
  a.target.target = "<python>";
  a.backend = backend;
  a.repeat = repeat;
  a.timeout_s = timeout_s;
  a.max_mismatches = max_mismatches;
  a.no_warmup = !warmup;
  py::gil_scoped_release release;
  const cli::ExecuteOutcome o = cli::ExecutePlan(*plan, a, nullptr);
  if (o.failed()) throw RunError(o.failure, o.failed_op, o.failed_gpu);
  return cli::RunJson(a, o).dump();
}

}  // namespace

}  // namespace reshard::python

PYBIND11_MODULE(_core, m) {
  using namespace reshard;
  using namespace reshard::python;
  m.doc() = "reshard's C++ core; use the `reshard` package";
  m.attr("__version__") = RESHARD_VERSION;
#ifdef RESHARD_HAVE_NCCL
  m.attr("have_nccl") = true;
#else
  m.attr("have_nccl") = false;
#endif
  py::register_exception_translator(&TranslateErrors);

  py::class_<Scenario, ScenarioPtr>(m, "Scenario")
      .def_property_readonly("name", [](const Scenario& s) { return s.name; })
      .def_property_readonly("path", [](const Scenario& s) { return s.path; })
      .def_property_readonly("gpus", [](const Scenario& s) { return s.cluster.Gpus(); })
      .def_property_readonly("reserve_bytes", [](const Scenario& s) { return s.memory.reserve_bytes; })
      .def_property_readonly("usable_bytes",
                             [](const Scenario& s) { return cli::UsableBytes(s.cluster, s.memory.reserve_bytes); })
      .def_property_readonly("fingerprint", [](const Scenario& s) { return ScenarioFingerprint(s); });

  py::class_<Plan, PlanPtr>(m, "Plan")
      .def_property_readonly("name", [](const Plan& p) { return p.name; })
      .def_property_readonly("gpus", [](const Plan& p) { return p.Gpus(); })
      .def_property_readonly("ops", [](const Plan& p) { return p.ops.size(); })
      .def_property_readonly("gpu_memory_bytes", [](const Plan& p) { return p.cluster.gpu_memory_bytes; })
      .def_property_readonly("scenario_fingerprint", [](const Plan& p) { return p.scenario_fingerprint; })
      .def("to_json", [](const Plan& p) { return PlanToJson(p).dump(); })
      .def("summary_json", [](const Plan& p) { return cli::PredictedJson(p).dump(); })
      .def("save", [](const Plan& p, const std::string& path) {
        cli::CheckOutputPath(path, "path");
        WritePlan(p, path);
      });

  m.def("builtin_scenarios", &BuiltinScenarioNames);
  m.def("load_scenario", &LoadScenarioArg, py::arg("arg"), py::arg("calibration") = "");
  m.def("parse_scenario", &ParseScenarioText, py::arg("text"), py::arg("origin"), py::arg("calibration") = "");
  m.def(
      "import_recipe",
      [](const std::string& kind, const std::string& path, const std::vector<std::string>& args,
         const std::string& hf_config, const std::string& model, const std::string& cluster, const std::string& name,
         double reserve_gib, const std::vector<std::string>& overrides, int32_t generation_gpus) {
        ImportOptions o;
        o.hf_config = hf_config;
        o.model_preset = model;
        o.cluster_preset = cluster;
        o.name = name;
        o.reserve_gib = reserve_gib;
        o.overrides = overrides;
        o.generation_gpus = generation_gpus;
        return Import(kind, path, args, o);
      },
      py::arg("kind"), py::arg("path"), py::arg("args"), py::arg("hf_config"), py::arg("model"), py::arg("cluster"),
      py::arg("name"), py::arg("reserve_gib"), py::arg("overrides"), py::arg("generation_gpus"));
  m.def("parse_bytes", [](const std::string& text, const std::string& field) {
    return ParseBytes(text, "<python>", field);
  });
  m.def("inspect", [](const ScenarioPtr& s) {
    std::string json;
    {
      py::gil_scoped_release release;
      json = cli::InspectJson(*s).dump();
    }
    return json;
  });
  m.def("plan", &MakePlanOf, py::arg("scenario"), py::arg("segment_bytes"), py::arg("baseline"),
        py::arg("simulate"), py::arg("replica_blocks"));
  m.def(
      "load_plan",
      [](const std::string& path, const ScenarioPtr& s) {
        py::gil_scoped_release release;
        return std::make_shared<Plan>(cli::CheckPlanFile(ReadPlan(path), path, s.get()));
      },
      py::arg("path"), py::arg("scenario").none(true));
  m.def("simulate", &SimulatePlan, py::arg("plan"), py::arg("issue"), py::arg("one_process"), py::arg("cold"),
        py::arg("trace"), py::arg("reserve_bytes"));
  m.def("sweep", &SweepScenario, py::arg("scenario"), py::arg("segment_bytes"), py::arg("offload_fractions"),
        py::arg("domains"), py::arg("margin"), py::arg("threads"), py::arg("exhaustive") = false);
  m.def("run", &RunPlan, py::arg("plan"), py::arg("backend"), py::arg("repeat"), py::arg("timeout_s"),
        py::arg("max_mismatches"), py::arg("warmup"));
}
