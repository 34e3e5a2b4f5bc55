# The `reshard` Python module (python/): found here, before the libraries are
# added, because a Python extension is a shared object and every static
# library linked into it must then be position-independent code
# (reshard_add_library sets that when RESHARD_HAVE_PYTHON; executables keep
# their flags).
#
# The interpreter: -DPython_EXECUTABLE=... when given (setup.py passes the
# venv's); else Debian's /usr/bin/python3 where it exists (pytest and pandas
# come from Debian packages, scripts/install-deps.sh); else the first python3
# on PATH. pybind11 is Debian's pybind11-dev (its CMake config, no download).
set(RESHARD_HAVE_PYTHON OFF)
if(RESHARD_BUILD_PYTHON AND (RESHARD_SANITIZE OR RESHARD_BUILD_FUZZERS))
  message(STATUS "reshard: Python module skipped in sanitizer / fuzzer builds (an instrumented module needs an instrumented interpreter)")
elseif(RESHARD_BUILD_PYTHON AND NOT RESHARD_BUILD_CLI)
  message(STATUS "reshard: Python module skipped: it is built over cli/ (RESHARD_BUILD_CLI=OFF)")
elseif(RESHARD_BUILD_PYTHON)
  if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
  set(PYBIND11_FINDPYTHON ON)
  if(Python_FOUND)
    find_package(pybind11 2.6 CONFIG QUIET)
  endif()
  if(Python_FOUND AND pybind11_FOUND)
    set(RESHARD_HAVE_PYTHON ON)
    message(STATUS "reshard: Python module ON (${Python_EXECUTABLE}, pybind11 ${pybind11_VERSION})")
  else()
    message(STATUS "reshard: Python module skipped: needs Python development headers and pybind11 "
                   "(python3-dev pybind11-dev, scripts/install-deps.sh)")
  endif()
endif()
