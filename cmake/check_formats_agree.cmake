# cmake/check_formats_agree.cmake — examples/fashion_mnist trains to the same
# loss and accuracy in every memory format at the same seed: one epoch on a
# subset with batch norm in NCHW, NHWC and the blocked nChw16c / nChw8c
# (docs/spec.md §7). Float rounding may differ between kernels that sum in
# another order, so the metrics must agree within 0.01 in the mean training
# loss and 1 point of test accuracy. Run as
#   cmake -DEXE=... -DDIR=... -P check_formats_agree.cmake
set(common --limit 512 --test-limit 300 --batchnorm --epochs 1 --quiet)
# loss * 10^4 and accuracy * 10^2 of the epoch-1 row of a metrics file
function(run fmt loss_var acc_var)
  set(file ${DIR}/formats_${fmt}.tsv)
  file(REMOVE ${file})
  execute_process(COMMAND ${EXE} ${common} --format ${fmt} --metrics ${file}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "--format ${fmt}: exit ${rc}\n${out}\n${err}")
  endif()
  file(STRINGS ${file} lines REGEX "^1\t")
  string(REPLACE "\t" ";" cols "${lines}")
  list(GET cols 1 loss)
  list(GET cols 2 acc)
  string(REGEX MATCH "^([0-9]+)\\.([0-9][0-9][0-9][0-9])" m "${loss}")
  math(EXPR l "${CMAKE_MATCH_1} * 10000 + 1${CMAKE_MATCH_2} - 10000")
  string(REGEX MATCH "^([0-9]+)\\.([0-9][0-9])" m "${acc}")
  math(EXPR a "${CMAKE_MATCH_1} * 100 + 1${CMAKE_MATCH_2} - 100")
  set(${loss_var} ${l} PARENT_SCOPE)
  set(${acc_var} ${a} PARENT_SCOPE)
  message(STATUS "--format ${fmt}: loss ${loss} test_acc ${acc}")
endfunction()
run(nchw l0 a0)
foreach(fmt nhwc nchw16c nchw8c)
  run(${fmt} l a)
  math(EXPR dl "${l} - ${l0}")
  math(EXPR da "${a} - ${a0}")
  if(dl GREATER 100 OR dl LESS -100 OR da GREATER 100 OR da LESS -100)
    message(FATAL_ERROR "--format ${fmt} (loss ${l}e-4, acc ${a}e-2) differs from nchw "
                        "(loss ${l0}e-4, acc ${a0}e-2) by more than float rounding")
  endif()
endforeach()
