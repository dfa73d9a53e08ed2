# Every dependency comes from Debian's packages (see README.md for the apt-get line).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)

# Standalone Asio (libasio-dev) is header-only; it is used privately, never in a public header.
find_path(CANOPY_ASIO_INCLUDE_DIR asio.hpp REQUIRED)

# Optional: RDMA verbs. ON when libibverbs-dev is installed.
find_library(CANOPY_IBVERBS_LIBRARY ibverbs)
find_path(CANOPY_IBVERBS_INCLUDE_DIR infiniband/verbs.h)
if(CANOPY_IBVERBS_LIBRARY AND CANOPY_IBVERBS_INCLUDE_DIR)
  set(_canopy_verbs_found ON)
else()
  set(_canopy_verbs_found OFF)
endif()
option(CANOPY_WITH_VERBS "Build the RDMA verbs transport" ${_canopy_verbs_found})

# Optional: CUDA. ON when a CUDA compiler is found (no GPU is needed to build).
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_canopy_cuda_found ON)
else()
  set(_canopy_cuda_found OFF)
endif()
option(CANOPY_WITH_CUDA "Build CUDA gradient staging" ${_canopy_cuda_found})

# Optional: libtorch (Debian: libtorch-dev), for examples/torch_trainer and its test, and for canopy_torch
# (below). Off under sanitizers: libtorch itself is not instrumented, and its process-lifetime allocations
# would read as leaks. CANOPY_NO_TORCH=1 in the environment leaves it out, as in scripts/install-deps.sh.
if(NOT CANOPY_SANITIZE AND NOT "$ENV{CANOPY_NO_TORCH}" STREQUAL "1")
  find_package(Torch QUIET)
endif()
# canopy_torch_option(NAME DOC MISSING): an option, ON by default when MISSING (what is lacking, in words)
# is empty; ON while something is missing is an error naming it. CANOPY_NO_TORCH=1 in the environment turns
# it OFF even where a cache holds ON: asked for in this configure, it wins.
function(canopy_torch_option name doc missing)
  if("$ENV{CANOPY_NO_TORCH}" STREQUAL "1")
    set(${name} OFF CACHE BOOL "${doc}" FORCE)
  endif()
  if(missing)
    option(${name} "${doc}" OFF)
  else()
    option(${name} "${doc}" ON)
  endif()
  if(${name} AND missing)
    message(FATAL_ERROR "${name} is ON but ${missing}")
  endif()
endfunction()

if(Torch_FOUND)
  set(_canopy_torch_missing "")
else()
  set(_canopy_torch_missing "libtorch was not found (Debian: apt-get install libtorch-dev)")
endif()
canopy_torch_option(CANOPY_WITH_TORCH "Build the libtorch example trainer and its test" "${_canopy_torch_missing}")
include(cmake/CanopyTorchPython.cmake)

if(BUILD_TESTING OR CANOPY_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(CANOPY_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
message(STATUS "canopy: verbs=${CANOPY_WITH_VERBS} cuda=${CANOPY_WITH_CUDA} torch=${CANOPY_WITH_TORCH} "
               "pytorch=${CANOPY_WITH_PYTORCH} sanitize='${CANOPY_SANITIZE}'")
