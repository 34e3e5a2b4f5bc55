#!/usr/bin/env python3
"""The tree's layering rules (docs/architecture.md), checked on the sources.

1. Includes follow the link layering: a file in a folder may include only the
   folders listed for it below (plus its own); a lower folder never includes a
   higher one.
2. In planner/, only the search step includes sim/.
3. CUDA and NCCL headers appear only in executor/nccl/, calib/ and bench/gpu/.
4. No source file in the library folders is over MAX_LINES lines.

Usage: check_layering.py SOURCE_DIR   (exit 1 and one line per violation)
"""
import pathlib
import re
import sys

ALLOWED = {
    "model": {"model"},
    "plan": {"model", "plan"},
    "sim": {"model", "plan", "sim"},
    "planner": {"model", "plan", "sim", "planner"},
    "executor": {"model", "plan", "executor"},
    "calib": {"model", "calib", "executor"},  # only executor/nccl/ (rule below)
    "cli": {"model", "plan", "sim", "planner", "executor", "calib", "cli"},
    "python": {"model", "plan", "sim", "planner", "executor", "cli"},  # the Python module, over the CLI's results
}
# planner/ files that may include sim/: the search step, which simulates candidates.
PLANNER_SIM_FILES = {"planner/search.cc", "planner/search_predict.cc", "planner/search_predict.h"}
GPU_FOLDERS = ("executor/nccl/", "calib/", "bench/gpu/")
GPU_HEADERS = re.compile(r'#include\s*[<"](cuda[^">]*|nccl\.h|cuda_runtime[^">]*)[">]')
INCLUDE = re.compile(r'^\s*#include\s*"([a-z_]+)/([^"]+)"', re.M)
SOURCES = (".h", ".cc", ".cu")
MAX_LINES = 800


def main() -> int:
    root = pathlib.Path(sys.argv[1]).resolve()
    problems = []
    for folder, allowed in ALLOWED.items():
        for f in sorted((root / folder).rglob("*")):
            if f.suffix not in SOURCES:
                continue
            rel = f.relative_to(root).as_posix()
            text = f.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                top, rest = m.group(1), m.group(2)
                if top not in ALLOWED and top not in ("tests", "bench"):
                    continue  # a third-party path such as "nlohmann/json.hpp" in quotes
                if top not in allowed:
                    problems.append(f"{rel}: includes {top}/{rest}: {folder}/ may include only {sorted(allowed)}")
                if folder == "planner" and top == "sim" and rel not in PLANNER_SIM_FILES:
                    problems.append(f"{rel}: includes sim/{rest}: only the planner's search step may ({sorted(PLANNER_SIM_FILES)})")
                if folder == "calib" and top == "executor" and not rest.startswith("nccl/"):
                    problems.append(f"{rel}: includes executor/{rest}: calib/'s measuring code may use only executor/nccl/")
            if GPU_HEADERS.search(text) and not rel.startswith(GPU_FOLDERS):
                problems.append(f"{rel}: includes a CUDA/NCCL header outside {GPU_FOLDERS}")
            lines = text.count("\n")
            if lines > MAX_LINES:
                problems.append(f"{rel}: {lines} lines (library files stay under {MAX_LINES}: split by job)")
    for p in problems:
        print(p)
    print(f"{len(problems)} layering problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
