# ctest json_dump_only_through_dump_json: no source of gpuacct serialises nlohmann::json with
# .dump( itself; every writer calls dump_json (analysis/model/json_text.h), which never throws
# on bytes that are not UTF-8.  Tests may dump (their diagnostics are not outputs).
# Usage: cmake -DROOT=<source dir> -P check_json_dump.cmake
set(bad "")
foreach(dir analysis inject cupti_hooks cli bench)
  file(GLOB_RECURSE files "${ROOT}/${dir}/*.cc" "${ROOT}/${dir}/*.h" "${ROOT}/${dir}/*.cpp")
  foreach(f IN LISTS files)
    if(f MATCHES "_test\\.(cc|cpp)$" OR f MATCHES "/analysis/model/json_text\\.(cc|h)$")
      continue()
    endif()
    file(STRINGS "${f}" lines REGEX "\\.dump\\(")
    foreach(line IN LISTS lines)
      file(RELATIVE_PATH rel "${ROOT}" "${f}")
      list(APPEND bad "${rel}: ${line}")
    endforeach()
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " text "${bad}")
  message(FATAL_ERROR "nlohmann::json::dump() outside dump_json (analysis/model/json_text.h):\n  ${text}")
endif()
message(STATUS "every JSON serialisation goes through dump_json")
