# ctest: libgpuacct.so exports exactly InitializeInjection, InitializeInjectionNvtx2, the
# gpuacct_* C API and the NCCL profiler-plugin tables ncclProfiler_v1..v5 (nm -D --defined-only).
execute_process(COMMAND nm -D --defined-only ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(expected InitializeInjection InitializeInjectionNvtx2 gpuacct_api_version gpuacct_is_active
    gpuacct_step_begin gpuacct_step_end gpuacct_step_mark gpuacct_data_push gpuacct_data_pop
    gpuacct_range_push gpuacct_range_pop gpuacct_set_step_flops gpuacct_set_step_work gpuacct_flush
    gpuacct_python_status
    ncclProfiler_v5 ncclProfiler_v4 ncclProfiler_v3 ncclProfiler_v2 ncclProfiler_v1)
set(found "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]+ ([A-Za-z]) (.+)$")
    set(type ${CMAKE_MATCH_1})
    set(sym ${CMAKE_MATCH_2})
    # Version-script nodes (e.g. a "VERS" absolute symbol) are not code or data exports.
    if(type STREQUAL "A")
      continue()
    endif()
    list(APPEND found ${sym})
  endif()
endforeach()
foreach(sym IN LISTS found)
  list(FIND expected ${sym} i)
  if(i LESS 0)
    message(FATAL_ERROR "unexpected export: ${sym}\nall exports:\n${out}")
  endif()
endforeach()
foreach(sym IN LISTS expected)
  list(FIND found ${sym} i)
  if(i LESS 0)
    message(FATAL_ERROR "missing export: ${sym}\nall exports:\n${out}")
  endif()
endforeach()
message(STATUS "libgpuacct.so exports exactly the ${CMAKE_LIST_LENGTH} expected symbols")
