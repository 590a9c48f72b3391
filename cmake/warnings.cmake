# Warnings for every ninfer target; applied through ninfer_target_defaults().
function(ninfer_target_defaults target)
    target_compile_options(${target} PRIVATE
        $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter
                                  -Werror=implicit-fallthrough>
        $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${NINFER_WERROR}>>:-Werror>
        $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Werror=implicit-fallthrough --expt-relaxed-constexpr>
        $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${NINFER_WERROR}>>:-Werror=all-warnings>)
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
endfunction()
