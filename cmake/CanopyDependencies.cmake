# Every dependency comes from Debian's packages (see README.md for the apt-get line).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)

# Standalone Asio (libasio-dev) is header-only; it is used privately, never in a public header.
find_path(CANOPY_ASIO_INCLUDE_DIR asio.hpp REQUIRED)

# canopy_runtime_library(VAR library): the file a program loads `library` from at run time (with dlopen,
# when first used: common/shared_library.hpp), its soname beside it: /usr/lib/.../libpmix.so (the -dev
# package's link) -> /usr/lib/.../libpmix.so.2 (the run-time package's).
function(canopy_runtime_library var library)
  get_filename_component(_real "${library}" REALPATH)
  get_filename_component(_dir "${library}" DIRECTORY)
  get_filename_component(_name "${_real}" NAME)
  string(REGEX REPLACE "(\\.so\\.[0-9]+).*$" "\\1" _soname "${_name}")
  set(${var} "${_dir}/${_soname}" PARENT_SCOPE)
endfunction()

# Optional: RDMA verbs. ON when libibverbs-dev is installed.
find_library(CANOPY_IBVERBS_LIBRARY ibverbs)
find_path(CANOPY_IBVERBS_INCLUDE_DIR infiniband/verbs.h)
canopy_option_if_found(CANOPY_WITH_VERBS "Build the RDMA verbs transport"
  CANOPY_IBVERBS_LIBRARY CANOPY_IBVERBS_INCLUDE_DIR)

# Optional: PMIx (Debian: libpmix-dev), the process-management interface of Open MPI's mpirun and of
# srun --mpi=pmix, through which ranks spread over hosts find the store without being given its address.
# ON when found. Debian keeps the header under pmix2/include, which its pkg-config file names.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(CANOPY_PC_PMIX QUIET pmix)
endif()
find_library(CANOPY_PMIX_LIBRARY pmix HINTS ${CANOPY_PC_PMIX_LIBRARY_DIRS})
find_path(CANOPY_PMIX_INCLUDE_DIR pmix.h HINTS ${CANOPY_PC_PMIX_INCLUDE_DIRS}
  /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/pmix2/include)
canopy_option_if_found(CANOPY_WITH_PMIX "Find the store through the launcher's PMIx server (mpirun, srun --mpi=pmix)"
  CANOPY_PMIX_LIBRARY CANOPY_PMIX_INCLUDE_DIR)
if(CANOPY_WITH_PMIX AND NOT (CANOPY_PMIX_LIBRARY AND CANOPY_PMIX_INCLUDE_DIR))
  message(FATAL_ERROR "CANOPY_WITH_PMIX is ON but PMIx was not found (Debian: apt-get install libpmix-dev)")
endif()

# Optional: libcurl (Debian: libcurl4-openssl-dev), through which the etcd store talks to etcd's v3 JSON
# gateway (docs/RENDEZVOUS.md, "The etcd store"). ON when found; without it an etcd:// address is an error.
find_package(CURL QUIET)
canopy_option_if_found(CANOPY_WITH_ETCD "Build the Store on etcd v3 (needs libcurl)" CURL_FOUND)
if(CANOPY_WITH_ETCD AND NOT CURL_FOUND)
  message(FATAL_ERROR
    "CANOPY_WITH_ETCD is ON but libcurl was not found (Debian: apt-get install libcurl4-openssl-dev)")
endif()

# Optional: CUDA. ON when a CUDA compiler is found (no GPU is needed to build).
include(CheckLanguage)
check_language(CUDA)
canopy_option_if_found(CANOPY_WITH_CUDA "Build CUDA gradient staging" CMAKE_CUDA_COMPILER)

# Optional: libtorch (Debian: libtorch-dev), for examples/torch_trainer and its test, and for canopy_torch
# (below). Off under sanitizers: libtorch itself is not instrumented, and its process-lifetime allocations
# would read as leaks. CANOPY_NO_TORCH=1 in the environment leaves it out, as in scripts/install-deps.sh.
if(NOT CANOPY_SANITIZE AND NOT "$ENV{CANOPY_NO_TORCH}" STREQUAL "1")
  find_package(Torch QUIET)
endif()
# canopy_torch_option(NAME DOC MISSING): an option, ON by default when MISSING (what is lacking, in words)
# is empty; ON while something is missing is an error naming it. CANOPY_NO_TORCH=1 in the environment turns
# it OFF even where a cache holds ON: asked for in this configure, it wins. Until someone sets the option by
# hand it follows what each configure finds, so a build configured before libtorch was installed (the
# README's first command) builds the PyTorch parts once the second command has installed it.
function(canopy_torch_option name doc missing)
  if("$ENV{CANOPY_NO_TORCH}" STREQUAL "1")
    set(${name} OFF CACHE BOOL "${doc}" FORCE)
  endif()
  if(missing)
    set(_found OFF)
  else()
    set(_found ON)
  endif()
  # A cached value equal to the one the last configure found is that configure's, not a person's.
  if(NOT DEFINED CACHE{${name}} OR "$CACHE{${name}}" STREQUAL "$CACHE{_${name}_FOUND}")
    set(${name} ${_found} CACHE BOOL "${doc}" FORCE)
  endif()
  set(_${name}_FOUND ${_found} CACHE INTERNAL "What the last configure found for ${name}")
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
message(STATUS "canopy: verbs=${CANOPY_WITH_VERBS} pmix=${CANOPY_WITH_PMIX} etcd=${CANOPY_WITH_ETCD} "
               "cuda=${CANOPY_WITH_CUDA} torch=${CANOPY_WITH_TORCH} "
               "pytorch=${CANOPY_WITH_PYTORCH} sanitize='${CANOPY_SANITIZE}'")
