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

if(BUILD_TESTING OR CANOPY_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(CANOPY_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
message(STATUS "canopy: verbs=${CANOPY_WITH_VERBS} cuda=${CANOPY_WITH_CUDA} sanitize='${CANOPY_SANITIZE}'")
