# cmake/check_resume.cmake — exact resumption of examples/fashion_mnist
# through one checkpoint (mft_module_save / mft_module_load, mft/state.h):
# 2 epochs in one run must give the same epoch-2 loss and accuracy as 1 epoch,
# --save, then --load --start-epoch 2 for 1 epoch. Run as
#   cmake -DEXE=... -DDIR=... -P check_resume.cmake
set(common --limit 320 --test-limit 200 --batchnorm --optimizer adam --quiet)
function(run tag)
  execute_process(COMMAND ${EXE} ${common} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${tag}: exit ${rc}\n${out}\n${err}")
  endif()
endfunction()
# the epoch-2 row of a metrics file, without its timing columns
function(epoch2 file var)
  file(STRINGS ${file} lines REGEX "^2\t")
  list(LENGTH lines n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "${file}: no single epoch-2 row")
  endif()
  string(REPLACE "\t" ";" cols "${lines}")
  list(SUBLIST cols 0 3 keep)
  set(${var} "${keep}" PARENT_SCOPE)
endfunction()
file(REMOVE ${DIR}/resume_whole.tsv ${DIR}/resume_part.tsv ${DIR}/resume.ckpt)
run(whole --epochs 2 --metrics ${DIR}/resume_whole.tsv)
run(first --epochs 1 --save ${DIR}/resume.ckpt)
run(rest --load ${DIR}/resume.ckpt --start-epoch 2 --epochs 1 --metrics ${DIR}/resume_part.tsv)
epoch2(${DIR}/resume_whole.tsv whole)
epoch2(${DIR}/resume_part.tsv part)
if(NOT whole STREQUAL part)
  message(FATAL_ERROR "resumed epoch 2 (${part}) differs from the uninterrupted run (${whole})")
endif()
message(STATUS "epoch 2 identical after resuming: ${whole}")
