# cmake/MftOptions.cmake — compiler flags shared by every target of the project:
# warnings (MFT_WERROR), CPU tuning (MFT_NATIVE), sanitizers (MFT_SANITIZE),
# and the discovery of xxHash and OpenMP. Defines the INTERFACE target
# mft_build_flags that every project target links privately.
add_library(mft_build_flags INTERFACE)
target_compile_options(mft_build_flags INTERFACE -Wall -Wextra -Wpedantic -Wshadow
  -Wstrict-prototypes -Wmissing-prototypes)
if(MFT_WERROR)
  target_compile_options(mft_build_flags INTERFACE -Werror)
endif()
include(CheckCCompilerFlag)
# __FILE__ relative to the source tree: call sites recorded with MFT_AT read
# "examples/format_tour.c:96", the same on every machine.
check_c_compiler_flag(-fmacro-prefix-map=a=b MFT_HAS_MACRO_PREFIX_MAP)
if(MFT_HAS_MACRO_PREFIX_MAP)
  target_compile_options(mft_build_flags INTERFACE
    "-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=")
endif()
if(MFT_NATIVE)
  check_c_compiler_flag(-march=native MFT_HAS_MARCH_NATIVE)
  if(MFT_HAS_MARCH_NATIVE)
    target_compile_options(mft_build_flags INTERFACE -march=native)
  endif()
endif()
if(MFT_SANITIZE)
  target_compile_options(mft_build_flags INTERFACE -fsanitize=address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(mft_build_flags INTERFACE -fsanitize=address,undefined)
endif()

# xxHash: Debian's libxxhash-dev, used header-only (XXH_INLINE_ALL) so neither
# the library nor its consumers link libxxhash.
find_path(XXHASH_INCLUDE_DIR xxhash.h)
if(NOT XXHASH_INCLUDE_DIR)
  message(FATAL_ERROR "xxhash.h not found: apt-get install libxxhash-dev")
endif()

if(MFT_OPENMP)
  find_package(OpenMP REQUIRED COMPONENTS C)
endif()
