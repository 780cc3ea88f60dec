# ctest json_only_through_json_text: no source of gpuacct serialises nlohmann::json with .dump(
# itself, or parses text with json::parse( itself; every writer calls dump_json
# (analysis/model/json_text.h), which never throws on bytes that are not UTF-8, and every reader
# parse_json, which never throws and is the one instantiation of nlohmann's parser (each
# instantiation cost seconds of compile time).  Tests and their helper files (*_test*.cc/h) may.
# Usage: cmake -DROOT=<source dir> -P check_json_text.cmake
set(bad "")
foreach(dir analysis inject cupti_hooks cli bench)
  file(GLOB_RECURSE files "${ROOT}/${dir}/*.cc" "${ROOT}/${dir}/*.h" "${ROOT}/${dir}/*.cpp")
  foreach(f IN LISTS files)
    if(f MATCHES "_test(_[a-z_]+)?\\.(cc|cpp|h)$" OR f MATCHES "/analysis/model/json_text\\.(cc|h)$")
      continue()
    endif()
    file(STRINGS "${f}" lines REGEX "\\.dump\\(|json::parse\\(")
    foreach(line IN LISTS lines)
      file(RELATIVE_PATH rel "${ROOT}" "${f}")
      list(APPEND bad "${rel}: ${line}")
    endforeach()
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " text "${bad}")
  message(FATAL_ERROR "nlohmann::json::dump() or ::parse() outside dump_json / parse_json "
                      "(analysis/model/json_text.h):\n  ${text}")
endif()
message(STATUS "every JSON serialisation goes through dump_json, every parse through parse_json")
