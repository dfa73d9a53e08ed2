# Optional: canopy_torch, the torch.distributed backend (python/). ON when a Python that imports torch,
# libtorch's CMake package, pybind11 and Python's headers are all found (Debian: python3-torch,
# libtorch-dev, pybind11-dev, python3-dev); otherwise OFF with one message saying what is missing.
# CANOPY_NO_TORCH=1 in the environment (as for scripts/install-deps.sh) leaves it out.
#
# The interpreter: CANOPY_PYTHON if given, else the first of /usr/bin/python3 and the python3 on PATH that
# imports torch (the python3 first on PATH may be another interpreter, such as pyenv's, without Debian's
# dist-packages).
set(CANOPY_PYTHON "" CACHE FILEPATH "The Python that canopy_torch is built for (one that imports torch)")

set(_canopy_pytorch_missing "")
if(DEFINED ENV{CANOPY_NO_TORCH} AND "$ENV{CANOPY_NO_TORCH}" STREQUAL "1")
  set(_canopy_pytorch_missing "CANOPY_NO_TORCH=1")
elseif(CANOPY_SANITIZE)
  set(_canopy_pytorch_missing "a sanitizer build (libtorch and Python are not instrumented)")
elseif(NOT Torch_FOUND)
  set(_canopy_pytorch_missing "libtorch's CMake package was not found (libtorch-dev)")
endif()

# What the build needs to know from the interpreter, in one run (importing torch takes a second or two):
# pybind11's ABI tags as torch was built with them (modules share pybind11's types only when they match),
# and where the package goes under an install prefix (Debian's python3 reads <prefix>/lib/python3.X/
# dist-packages for /usr and /usr/local, not site-packages).
set(_canopy_python_probe [=[
import os, sys, sysconfig, torch
scheme = sysconfig.get_default_scheme()
site = os.path.relpath(sysconfig.get_path("platlib"), sys.prefix)
if scheme == "posix_local" and site.startswith("local" + os.sep):
    site = site[len("local" + os.sep):]
print(";".join([torch.__version__, torch._C._PYBIND11_COMPILER_TYPE, torch._C._PYBIND11_STDLIB,
                torch._C._PYBIND11_BUILD_ABI, site]))
]=])
if(NOT _canopy_pytorch_missing)
  set(_canopy_candidates ${CANOPY_PYTHON})
  if(NOT CANOPY_PYTHON)
    find_program(_canopy_path_python3 python3)
    set(_canopy_candidates /usr/bin/python3 ${_canopy_path_python3})
  endif()
  set(_canopy_torch_python "")
  foreach(_candidate IN LISTS _canopy_candidates)
    if(NOT EXISTS "${_candidate}")
      continue()
    endif()
    execute_process(COMMAND "${_candidate}" -c "${_canopy_python_probe}" RESULT_VARIABLE _rc
                    OUTPUT_VARIABLE _out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 120)
    if(_rc EQUAL 0)
      set(_canopy_torch_python "${_candidate}")
      list(GET _out 0 CANOPY_TORCH_VERSION)
      list(GET _out 1 CANOPY_PYBIND11_COMPILER_TYPE)
      list(GET _out 2 CANOPY_PYBIND11_STDLIB)
      list(GET _out 3 CANOPY_PYBIND11_BUILD_ABI)
      list(GET _out 4 _canopy_site_dir)
      break()
    endif()
  endforeach()
  if(NOT _canopy_torch_python)
    string(REPLACE ";" ", " _tried "${_canopy_candidates}")
    set(_canopy_pytorch_missing "no Python that imports torch (tried ${_tried}; python3-torch)")
  endif()
endif()

if(NOT _canopy_pytorch_missing)
  set(Python3_EXECUTABLE "${_canopy_torch_python}")
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(NOT Python3_Development.Module_FOUND)
    set(_canopy_pytorch_missing "Python's headers for ${_canopy_torch_python} were not found (python3-dev)")
  endif()
endif()
if(NOT _canopy_pytorch_missing)
  find_package(pybind11 CONFIG QUIET)
  find_library(CANOPY_TORCH_PYTHON_LIBRARY torch_python HINTS "${TORCH_INSTALL_PREFIX}/lib")
  if(NOT pybind11_FOUND)
    set(_canopy_pytorch_missing "pybind11 was not found (pybind11-dev)")
  elseif(NOT CANOPY_TORCH_PYTHON_LIBRARY)
    set(_canopy_pytorch_missing "libtorch_python was not found (libtorch-dev)")
  endif()
endif()

canopy_torch_option(CANOPY_WITH_PYTORCH "Build canopy_torch, the torch.distributed backend, and its tests"
                    "${_canopy_pytorch_missing}")
if(CANOPY_WITH_PYTORCH)
  # Cached for tests/install/check_install.sh, which imports the installed package with it.
  set(CANOPY_PYTHON_EXECUTABLE "${_canopy_torch_python}" CACHE INTERNAL "The Python canopy_torch is built for")
  set(CANOPY_PYTHON_INSTALL_DIR "${_canopy_site_dir}" CACHE PATH
      "Where cmake --install puts canopy_torch, relative to the prefix")
  message(STATUS "canopy: building canopy_torch for ${CANOPY_PYTHON_EXECUTABLE} (torch ${CANOPY_TORCH_VERSION}); "
                 "installed to <prefix>/${CANOPY_PYTHON_INSTALL_DIR}")
elseif(_canopy_pytorch_missing)
  message(STATUS "canopy: canopy_torch (the torch.distributed backend) is not built: ${_canopy_pytorch_missing}")
else()
  message(STATUS "canopy: canopy_torch (the torch.distributed backend) is not built: CANOPY_WITH_PYTORCH=OFF")
endif()
