# cmake/MftLibrary.cmake — the library: one object library per layer
# (docs/architecture.md), linked together into mft_shared (libmft.so) and
# mft_static (libmft.a). mft::mft is the shared one; mft::mft_static the
# static one.
#
# Note [Layers]
# Lowest first; each layer's private include path holds the folders of its
# own layer and the layers below it, never above, so including a private
# header of a higher layer does not compile:
#   tensor           the core: storage, tensor, layout, views and copies
#                    without autograd, iterator, dtype, status, allocation,
#                    parallel_for, hash, describe, events, format rules
#   autograd_record  the tape and the recording ops do (autograd/tape.c)
#   ops              the operators, one folder per family (ops/<family>/)
#   autograd_engine  the backward walk, gradcheck, the DOT picture
#   data, io, profile   three independent services side by side: IDX and
#                    batching (the only zlib user); checkpoints; the profiler
#   nn               layers, losses, optimisers, models, and model
#                    checkpoints (nn/state.c, which writes and reads through
#                    io's checkpoint files)
# nn sits above data, io and profile so that a model can be saved with one
# call (mft_module_save) without io knowing what a module is; the three
# services never call nn nor each other. The layering test (tests/layers/,
# CTest) also reads every object's symbol table and fails on a call from a
# layer to a higher one (or between data, io and profile), naming both files
# and the symbol, and greps the sources for includes of a higher layer's
# private headers, naming the line.
#
# zlib (Debian zlib1g-dev) reads the gzip-compressed IDX datasets
# (data/idx.c): a PRIVATE dependency of both libraries; libmft.a's consumers
# still link it ($<LINK_ONLY:ZLIB::ZLIB> in the exported interface, hence
# find_dependency(ZLIB) in mftConfig.cmake and Requires.private: zlib in mft.pc).
find_package(ZLIB REQUIRED)

# lowest first: the layering test (tests/CMakeLists.txt) takes the order from here
set(MFT_LAYERS tensor autograd_record ops autograd_engine data io profile nn)

# mft_add_layer(NAME SOURCES globs... SEES folders...): the object library
# mft_layer_NAME from the globbed sources, privately including the folders
# listed (its own and those of the layers below).
function(mft_add_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;SEES" ${ARGN})
  set(files)
  foreach(g ${L_SOURCES})
    file(GLOB_RECURSE found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${g})
    list(APPEND files ${found})
  endforeach()
  set(dirs)
  foreach(d ${L_SEES})
    list(APPEND dirs ${PROJECT_SOURCE_DIR}/${d})
  endforeach()
  add_library(mft_layer_${name} OBJECT ${files})
  set_target_properties(mft_layer_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden)
  target_include_directories(mft_layer_${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    PRIVATE ${dirs} ${XXHASH_INCLUDE_DIR})
  target_link_libraries(mft_layer_${name} PRIVATE mft_build_flags)
  if(MFT_OPENMP)
    target_link_libraries(mft_layer_${name} PRIVATE OpenMP::OpenMP_C)
    target_compile_definitions(mft_layer_${name} PRIVATE MFT_HAVE_OPENMP=1)
  endif()
endfunction()

mft_add_layer(tensor SOURCES tensor/*.c SEES tensor)
mft_add_layer(autograd_record SOURCES autograd/tape.c SEES tensor autograd)
mft_add_layer(ops SOURCES ops/*.c SEES tensor autograd ops)
mft_add_layer(autograd_engine SOURCES autograd/backward.c autograd/gradcheck.c autograd/dot.c
  SEES tensor autograd ops)
mft_add_layer(data SOURCES data/*.c SEES tensor data)
target_link_libraries(mft_layer_data PRIVATE ZLIB::ZLIB)
mft_add_layer(io SOURCES io/*.c SEES tensor io)
mft_add_layer(profile SOURCES profile/*.c SEES tensor profile)
mft_add_layer(nn SOURCES nn/*.c SEES tensor autograd ops data io profile nn)

# every autograd/*.c belongs to one of the two autograd layers
file(GLOB MFT_AUTOGRAD_SOURCES ${PROJECT_SOURCE_DIR}/autograd/*.c)
list(LENGTH MFT_AUTOGRAD_SOURCES n_autograd)
if(NOT n_autograd EQUAL 4)
  message(FATAL_ERROR "autograd/ has ${n_autograd} .c files; list each in autograd_record or "
    "autograd_engine (cmake/MftLibrary.cmake)")
endif()

set(MFT_LAYER_OBJECTS)
foreach(l ${MFT_LAYERS})
  list(APPEND MFT_LAYER_OBJECTS $<TARGET_OBJECTS:mft_layer_${l}>)
endforeach()

foreach(kind shared static)
  string(TOUPPER ${kind} KIND)
  add_library(mft_${kind} ${KIND} ${MFT_LAYER_OBJECTS})
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
