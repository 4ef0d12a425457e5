# cmake/fatbin.cmake - vram_embed_fatbin: a CUDA source compiled by nvcc
# into a fatbin (SASS for each of CMAKE_CUDA_ARCHITECTURES and PTX for the
# newest, so that later GPUs run it too) and embedded as a C array
# (cmake/embed.cmake) that the library loads with cuModuleLoadData: no
# library links the CUDA runtime.
#
#   vram_embed_fatbin(OUT_C <generated .c> SYMBOL <array name> SOURCE <.cu>
#                     [INCLUDES dir ...] [DEPENDS file ...] [COMMENT text])
function(vram_embed_fatbin)
  cmake_parse_arguments(F "" "OUT_C;SYMBOL;SOURCE;COMMENT" "INCLUDES;DEPENDS" ${ARGN})
  set(gencode)
  foreach(arch ${CMAKE_CUDA_ARCHITECTURES})
    string(REGEX REPLACE "-.*" "" arch "${arch}")
    list(APPEND gencode -gencode arch=compute_${arch},code=sm_${arch})
    set(ptx_arch ${arch})
  endforeach()
  list(APPEND gencode -gencode arch=compute_${ptx_arch},code=compute_${ptx_arch})
  set(includes)
  foreach(dir ${F_INCLUDES})
    list(APPEND includes -I ${dir})
  endforeach()
  string(REGEX REPLACE "\\.c$" ".fatbin" fatbin "${F_OUT_C}")
  add_custom_command(
    OUTPUT ${fatbin}
    COMMAND ${CMAKE_CUDA_COMPILER} --fatbin -O3 -std=c++17 ${gencode} -Werror all-warnings
            ${includes} -o ${fatbin} ${F_SOURCE}
    DEPENDS ${F_SOURCE} ${F_DEPENDS}
    COMMENT "nvcc --fatbin: ${F_COMMENT}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${F_OUT_C}
    COMMAND ${CMAKE_COMMAND} -DIN=${fatbin} -DOUT=${F_OUT_C} -DNAME=${F_SYMBOL}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${fatbin} ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "embedding ${F_COMMENT}"
    VERBATIM)
endfunction()
