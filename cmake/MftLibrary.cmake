# cmake/MftLibrary.cmake — the library itself: one object library compiled from
# tensor/, ops/ and autograd/, linked into mft_shared (libmft.so) and mft_static
# (libmft.a). mft::mft is the shared one; mft::mft_static the static one.
# zlib (Debian zlib1g-dev) reads the gzip-compressed IDX datasets
# (tensor/idx.c): a PRIVATE dependency of both libraries; libmft.a's consumers
# still link it ($<LINK_ONLY:ZLIB::ZLIB> in the exported interface, hence
# find_dependency(ZLIB) in mftConfig.cmake and Requires.private: zlib in mft.pc).
find_package(ZLIB REQUIRED)
file(GLOB_RECURSE MFT_SOURCES CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/tensor/*.c
  ${PROJECT_SOURCE_DIR}/autograd/*.c
  ${PROJECT_SOURCE_DIR}/ops/*.c
  ${PROJECT_SOURCE_DIR}/nn/*.c
  ${PROJECT_SOURCE_DIR}/data/*.c
  ${PROJECT_SOURCE_DIR}/io/*.c
  ${PROJECT_SOURCE_DIR}/profile/*.c)

add_library(mft_objects OBJECT ${MFT_SOURCES})
set_target_properties(mft_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
  C_VISIBILITY_PRESET hidden)
target_include_directories(mft_objects
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  PRIVATE ${PROJECT_SOURCE_DIR}/tensor ${PROJECT_SOURCE_DIR}/ops
          ${PROJECT_SOURCE_DIR}/autograd ${PROJECT_SOURCE_DIR}/nn ${PROJECT_SOURCE_DIR}/data
          ${PROJECT_SOURCE_DIR}/io ${PROJECT_SOURCE_DIR}/profile ${XXHASH_INCLUDE_DIR})
target_link_libraries(mft_objects PRIVATE mft_build_flags ZLIB::ZLIB)
if(MFT_OPENMP)
  target_link_libraries(mft_objects PRIVATE OpenMP::OpenMP_C)
  target_compile_definitions(mft_objects PRIVATE MFT_HAVE_OPENMP=1)
endif()

foreach(kind shared static)
  string(TOUPPER ${kind} KIND)
  add_library(mft_${kind} ${KIND} $<TARGET_OBJECTS:mft_objects>)
  set_target_properties(mft_${kind} PROPERTIES OUTPUT_NAME mft)
  target_include_directories(mft_${kind} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(mft_${kind} PRIVATE $<BUILD_INTERFACE:mft_build_flags>)
  if(MFT_OPENMP)
    target_link_libraries(mft_${kind} PRIVATE OpenMP::OpenMP_C)
  endif()
  target_link_libraries(mft_${kind} PRIVATE ZLIB::ZLIB m)
endforeach()
set_target_properties(mft_shared PROPERTIES VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR} EXPORT_NAME mft)
set_target_properties(mft_static PROPERTIES EXPORT_NAME mft_static)
target_compile_definitions(mft_static INTERFACE MFT_STATIC_DEFINE)
add_library(mft::mft ALIAS mft_shared)
add_library(mft::mft_static ALIAS mft_static)
