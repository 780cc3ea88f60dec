# Strict warnings for the project's own targets, errors by default on every one of them
# (GPUACCT_WERROR=OFF turns the errors back into warnings, e.g. for a newer compiler whose new
# warnings have not been looked at yet).  Third-party headers come in as SYSTEM includes.
option(GPUACCT_WERROR "Treat warnings as errors in the project's own targets" ON)

function(gpuacct_strict_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion
                                           $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>
                                           -Wpedantic)
  if(GPUACCT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
