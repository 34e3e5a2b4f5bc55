# Compiler warnings and sanitizers, applied through reshard_add_library / reshard_add_executable.
add_library(reshard_warnings INTERFACE)
target_compile_options(reshard_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough>)

if(RESHARD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# libFuzzer: coverage instrumentation + ASan/UBSan for every library of this build
# dir; the fuzzer executables add -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt).
if(RESHARD_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(WARNING "RESHARD_BUILD_FUZZERS needs clang (libFuzzer); fuzzers are not built")
    set(RESHARD_BUILD_FUZZERS OFF)
  else()
    add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                        -fno-sanitize-recover=undefined)
    add_link_options(-fsanitize=address,undefined)
  endif()
endif()

# reshard_add_library(name SOURCES a.cc b.cc LINKS lib1 lib2 [PRIVATE_LINKS ...])
# Every module names its sources and its link dependencies explicitly (no globbing).
function(reshard_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINKS;PRIVATE_LINKS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${RESHARD_INCLUDE_ROOT})
  target_link_libraries(${name} PUBLIC ${ARG_LINKS} PRIVATE reshard_warnings ${ARG_PRIVATE_LINKS})
  # RESHARD_UNITY_BUILD: the sources in batches. A file that defines a file-local
  # helper under a name another file of the library also uses stays out of the
  # batches (SKIP_UNITY_BUILD_INCLUSION next to the library's source list).
  set_target_properties(${name} PROPERTIES UNITY_BUILD ${RESHARD_UNITY_BUILD})
  # The Python module (a shared object) links every library: position-independent then.
  if(RESHARD_HAVE_PYTHON)
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
endfunction()
