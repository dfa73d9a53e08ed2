# What makes a fresh build cheaper on a small machine (docs/BUILDING.md has the measurements).

# canopy_option_if_found(NAME DOC VARIABLE...): an option, ON by default when every VARIABLE is true (a
# path or program that was found), else OFF.
function(canopy_option_if_found name doc)
  set(found ON)
  foreach(variable IN LISTS ARGN)
    if(NOT ${variable})
      set(found OFF)
    endif()
  endforeach()
  option(${name} "${doc}" ${found})
endfunction()
#
# Unity builds for the libraries and programs: each batch of up to 8 sources parses the headers they share
# (fmt, CLI11, nlohmann-json, libtorch) once. The test directory turns them off again (tests/CMakeLists.txt):
# a batch of GoogleTest files optimizes slower than its files one by one. CANOPY_UNITY_BUILD=OFF compiles
# one file a unit, as CI's fuzzing stage does, which so checks that every source compiles on its own.
option(CANOPY_UNITY_BUILD "Compile the libraries and programs in unity batches" ON)
if(CANOPY_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
  # GCC takes a source included by a batch for a header, where a class using a type of an anonymous
  # namespace would be a real problem; in a source file it is not.
  add_compile_options($<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-subobject-linkage>)
endif()

# ccache, where installed, for every compiler (it pays from the second build of a configuration on; CI
# keeps its cache between runs). CANOPY_CCACHE=OFF, or a launcher of one's own, leaves it out.
find_program(CANOPY_CCACHE_PROGRAM ccache)
canopy_option_if_found(CANOPY_CCACHE "Compile through ccache" CANOPY_CCACHE_PROGRAM)
if(CANOPY_CCACHE AND CANOPY_CCACHE_PROGRAM)
  foreach(_canopy_language CXX CUDA)
    if(NOT CMAKE_${_canopy_language}_COMPILER_LAUNCHER)
      set(CMAKE_${_canopy_language}_COMPILER_LAUNCHER ${CANOPY_CCACHE_PROGRAM})
    endif()
  endforeach()
endif()
