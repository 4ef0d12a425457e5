# cmake/install.cmake - `make install` (PREFIX, DESTDIR): the four shared
# libraries with their SONAMEs, the public headers, the vramkit CLI and its
# man page, a pkg-config file per library and a CMake package
# (find_package(vramkit) gives vramkit::core, vramkit::observe,
# vramkit::engine and vramkit::service), and the service's default models
# when they were made (scripts/models.sh) into share/vramkit/models.
set(VRAM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vramkit)

install(TARGETS vramkit-core vramkit-observe vramkit-engine vramkit-service EXPORT vramkitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS vramkit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/vramkit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
file(GLOB VRAM_PUBLIC_HEADERS CONFIGURE_DEPENDS include/vramkit/*.h)
install(FILES ${VRAM_PUBLIC_HEADERS} ${VRAM_GEN_DIR}/include/vramkit/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vramkit)
install(FILES ${CMAKE_BINARY_DIR}/vramkit.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_SOURCE_DIR}/build/models/blazeface_back.onnx
        ${CMAKE_SOURCE_DIR}/build/models/blazeface_front.onnx
        ${CMAKE_SOURCE_DIR}/build/models/LICENSE.blazeface
        DESTINATION ${CMAKE_INSTALL_DATADIR}/vramkit/models OPTIONAL)

install(EXPORT vramkitTargets NAMESPACE vramkit:: DESTINATION ${VRAM_CMAKE_DIR})
include(CMakePackageConfigHelpers)
configure_package_config_file(cmake/vramkitConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/vramkitConfig.cmake
                              INSTALL_DESTINATION ${VRAM_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/vramkitConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vramkitConfig.cmake
        ${CMAKE_CURRENT_BINARY_DIR}/vramkitConfigVersion.cmake DESTINATION ${VRAM_CMAKE_DIR})

# pkg-config: vramkit-core, vramkit-observe (Requires vramkit-core),
# vramkit-engine (the same) and vramkit-service (Requires the three). Only the shared libraries are installed and
# the public headers include no header of another package, so the files
# list no private dependencies. The prefix is found from the file's own place
# (${pcfiledir}), so an installed tree can move, or sit under DESTDIR, and
# still be found with PKG_CONFIG_PATH.
file(RELATIVE_PATH VRAM_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" VRAM_PC_TO_PREFIX "${VRAM_PC_TO_PREFIX}")
foreach(lib core observe engine service)
  configure_file(cmake/vramkit-${lib}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/vramkit-${lib}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vramkit-${lib}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
