include(CMakePackageConfigHelpers)

get_property(_canopy_libs GLOBAL PROPERTY CANOPY_INSTALLED_LIBRARIES)
install(TARGETS ${_canopy_libs} canopy EXPORT canopyTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/canopy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT canopyTargets NAMESPACE canopy:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)

configure_package_config_file(cmake/canopyConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/canopyConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/canopyConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/canopyConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/canopyConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)

# pkg-config: the layer libraries in link order (higher layers first).
list(REVERSE _canopy_libs)
list(TRANSFORM _canopy_libs PREPEND "-l" OUTPUT_VARIABLE _canopy_pc_libs)
# Static libraries bring their own dependencies along: the CUDA runtime when built with it, and the dynamic
# loader, through which libcurl, libpmix and libibverbs load when first used (common/shared_library.hpp).
if(CMAKE_DL_LIBS)
  list(APPEND _canopy_pc_libs -l${CMAKE_DL_LIBS})
endif()
if(CANOPY_WITH_CUDA AND CUDA_cudart_LIBRARY)
  list(APPEND _canopy_pc_libs ${CUDA_cudart_LIBRARY})
endif()
string(JOIN " " CANOPY_PC_LIBS ${_canopy_pc_libs})
file(RELATIVE_PATH CANOPY_PC_PREFIX_FROM_PCDIR "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(cmake/canopy.pc.in ${CMAKE_CURRENT_BINARY_DIR}/canopy.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/canopy.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
