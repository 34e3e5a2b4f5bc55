# Third-party packages, all from Debian (scripts/install-deps.sh installs them).
find_package(fmt REQUIRED)             # formatting of messages and tables
find_package(nlohmann_json 3.10 REQUIRED)  # JSON for plans, profiles, results
find_package(yaml-cpp REQUIRED)        # scenario files
find_package(CLI11 QUIET)              # command-line parsing (header-only)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
find_package(Boost 1.74 REQUIRED)      # Boost.Graph (header-only): matching, min-cost flow
find_package(Eigen3 3.3 REQUIRED NO_MODULE)  # least-squares fits of calibration curves
find_package(Threads REQUIRED)
find_package(MPI COMPONENTS CXX QUIET) # optional: multi-process runs under mpirun

# yaml-cpp: link statically where Debian ships the archive, so binaries carried
# to GPU machines that lack libyaml-cpp still run.
find_library(RESHARD_YAML_STATIC NAMES libyaml-cpp.a)
# Debian's archive is not position-independent: a shared object (the Python
# module) links the shared library instead.
if(RESHARD_YAML_STATIC)
  add_library(reshard_yaml INTERFACE)
  target_link_libraries(reshard_yaml INTERFACE
    $<IF:$<STREQUAL:$<TARGET_PROPERTY:TYPE>,MODULE_LIBRARY>,yaml-cpp,${RESHARD_YAML_STATIC}>)
  get_target_property(_yaml_inc yaml-cpp INTERFACE_INCLUDE_DIRECTORIES)
  if(_yaml_inc)
    target_include_directories(reshard_yaml INTERFACE ${_yaml_inc})
  endif()
else()
  add_library(reshard_yaml INTERFACE)
  target_link_libraries(reshard_yaml INTERFACE yaml-cpp)
endif()

# CUDA + NCCL for the executor's NCCL backend (optional).
set(RESHARD_HAVE_NCCL OFF)
if(RESHARD_WITH_NCCL)
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
    include(CheckLanguage)
    check_language(CUDA)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND CMAKE_CUDA_COMPILER)
      enable_language(CUDA)
      set(RESHARD_HAVE_NCCL ON)
      # CMake < 3.26 knows no nvcc flag for C++20 (the project's standard); nvcc 12+ takes -std=c++20.
      if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
        set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      endif()
      message(STATUS "reshard: NCCL backend ON (CUDA ${CUDAToolkit_VERSION}, ${NCCL_LIBRARY})")
    else()
      message(STATUS "reshard: NCCL backend skipped: CUDA found but NCCL headers/library or nvcc missing")
    endif()
  else()
    message(STATUS "reshard: NCCL backend skipped: CUDA toolkit not found (set CUDAToolkit_ROOT)")
  endif()
endif()
