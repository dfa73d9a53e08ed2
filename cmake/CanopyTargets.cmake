# canopy_configure(target): the warnings, include path and sanitizers every Canopy target shares.
function(canopy_configure target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(CANOPY_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
endfunction()

# canopy_use_asio(target): standalone Asio, privately.
function(canopy_use_asio target)
  target_include_directories(${target} SYSTEM PRIVATE ${CANOPY_ASIO_INCLUDE_DIR})
  target_compile_definitions(${target} PRIVATE ASIO_STANDALONE ASIO_NO_DEPRECATED)
  # GCC 12 warns (-Wtsan) that ThreadSanitizer does not model Asio's std::atomic_thread_fence: a
  # warning about a system header, not about our code, and fatal under -Werror.
  if(CANOPY_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-tsan)
  endif()
endfunction()

# canopy_add_library(name SOURCES...): one static library per layer, installed and exported.
function(canopy_add_library name)
  add_library(${name} STATIC ${ARGN})
  canopy_configure(${name})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} PUBLIC cxx_std_20)
  set_property(GLOBAL APPEND PROPERTY CANOPY_INSTALLED_LIBRARIES ${name})
endfunction()

if(CANOPY_SANITIZE)
  add_compile_options(-fsanitize=${CANOPY_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${CANOPY_SANITIZE})
endif()
