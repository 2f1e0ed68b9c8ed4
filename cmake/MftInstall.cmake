# cmake/MftInstall.cmake — install rules and package files: libmft.so (with
# SOVERSION) and libmft.a, the public headers under include/mft/, the exported
# targets mft::mft (shared) and mft::mft_static, mftConfig.cmake +
# mftConfigVersion.cmake for find_package(mft), and mft.pc for pkg-config.
# Included last by the top-level CMakeLists.txt, after every target exists.
include(CMakePackageConfigHelpers)

set(MFT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/mft"
  CACHE STRING "Where mftConfig.cmake is installed (relative to the prefix)")
mark_as_advanced(MFT_INSTALL_CMAKEDIR)

# Note [Exporting the static library]
# mft_shared and mft_static link PRIVATE to mft_build_flags, the project's
# INTERFACE target of warnings and sanitizer flags. For a shared library a
# PRIVATE dependency stays out of the exported interface, but for a static one
# CMake records it as $<LINK_ONLY:...> in INTERFACE_LINK_LIBRARIES (an archive's
# private link dependencies are its consumers' business), and install(EXPORT)
# then refuses to export mft_static ("requires target mft_build_flags that is
# not in any export set"). Those flags describe how *we* build, not what a
# consumer needs, so instead of exporting an internal target, MftLibrary.cmake
# links it as $<BUILD_INTERFACE:mft_build_flags>: unchanged inside this build
# tree, and stripped from the installed mftTargets.cmake (where it leaves a
# harmless empty $<LINK_ONLY:>). The layer object libraries (mft_layer_*) need
# nothing: they are consumed through $<TARGET_OBJECTS:...>, never linked, so
# they are not part of the export.
# The archive's other private link dependencies stay in its exported interface
# on purpose: $<LINK_ONLY:OpenMP::OpenMP_C> (hence find_dependency(OpenMP) in
# mftConfig.cmake), $<LINK_ONLY:ZLIB::ZLIB> (hence find_dependency(ZLIB)) and
# $<LINK_ONLY:m>.
# (Consequence: an installed MFT_SANITIZE=ON libmft.a does not carry the
# -fsanitize link flags; a consumer of such a build must add them itself.)

install(TARGETS mft_shared mft_static
  EXPORT mftTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# (The include directory is already in both targets' INTERFACE_INCLUDE_DIRECTORIES
# as $<INSTALL_INTERFACE:include>, so no INCLUDES DESTINATION here.)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mft
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT mftTargets
  NAMESPACE mft::
  FILE mftTargets.cmake
  DESTINATION ${MFT_INSTALL_CMAKEDIR})

# ---- mftConfig.cmake / mftConfigVersion.cmake
# MFT_OPENMP is substituted into the config so that it calls
# find_dependency(OpenMP) exactly when libmft.a needs OpenMP::OpenMP_C.
set(MFT_CONFIG_WITH_OPENMP ${MFT_OPENMP})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/mftConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mftConfig.cmake
  INSTALL_DESTINATION ${MFT_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a minor release may break the API, so only the same major.minor matches.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/mftConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/mftConfig.cmake
  ${PROJECT_BINARY_DIR}/mftConfigVersion.cmake
  DESTINATION ${MFT_INSTALL_CMAKEDIR})

# ---- mft.pc
# Two stages, because the prefix is only known for sure at install time
# (`cmake --install build --prefix DIR` overrides CMAKE_INSTALL_PREFIX): at
# configure time everything but the prefix is filled in (mft.pc.stage), and an
# install-time step writes mft.pc with the prefix actually installed to.
# libdir/includedir are written relative to ${prefix} when the install dirs are
# relative, so `pkg-config --define-prefix` can relocate the tree.
foreach(mft_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${mft_dir}}")
    set(MFT_PC_${mft_dir} "${CMAKE_INSTALL_${mft_dir}}")
  else()
    set(MFT_PC_${mft_dir} "\${prefix}/${CMAKE_INSTALL_${mft_dir}}")
  endif()
endforeach()
unset(mft_dir)
# zlib is named in mft.pc.in's Requires.private (pkg-config --static adds -lz).
set(MFT_PC_LIBS_PRIVATE "-lm")
if(MFT_OPENMP)
  # OpenMP_C_FLAGS is what the compiler driver needs to link the OpenMP
  # runtime ("-fopenmp" for GCC and Clang).
  set(MFT_PC_LIBS_PRIVATE "${OpenMP_C_FLAGS} ${MFT_PC_LIBS_PRIVATE}")
endif()
set(MFT_PC_PREFIX "@MFT_PC_PREFIX@") # kept as a placeholder for the install step
configure_file(${PROJECT_SOURCE_DIR}/cmake/mft.pc.in ${PROJECT_BINARY_DIR}/mft.pc.stage @ONLY)
install(CODE "
  set(MFT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/mft.pc.stage\" \"${PROJECT_BINARY_DIR}/mft.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/mft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
