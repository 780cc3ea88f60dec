# Strict warnings for the project's own targets. analysis/ is held to -Werror so the
# accounting core stays clean; other folders warn without failing the build.
function(gpuacct_strict_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion
                                           -Wnon-virtual-dtor -Wpedantic)
  if(ARGN STREQUAL "WERROR")
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
