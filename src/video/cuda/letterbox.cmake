# src/video/cuda/letterbox.cmake - the NV12 letterbox kernel in
# libvramkit-service (included by src/pipeline/CMakeLists.txt after it
# globs the sources): with the CUDA toolkit, src/video/cuda/letterbox_nv12.cu
# compiled by nvcc into a fatbin (SASS for the chosen architectures and PTX
# for the newest, as the engine's kernels) embedded as a C array
# (cmake/embed.cmake) and the launch code that loads it with the driver API;
# without it, the function that says there is no CUDA.
if(VRAM_HAVE_CUDA)
  set(vram_lbk_launch ${CMAKE_SOURCE_DIR}/src/video/cuda/letterbox_cuda.c)
  list(APPEND VRAM_SERVICE_SOURCES ${vram_lbk_launch} ${VRAM_GEN_DIR}/lbk_image.c)
  # cuda.h for the driver table; the library links no CUDA library.
  set_source_files_properties(${vram_lbk_launch} PROPERTIES
                              INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
  set(vram_lbk_gencode)
  foreach(arch ${CMAKE_CUDA_ARCHITECTURES})
    string(REGEX REPLACE "-.*" "" arch "${arch}")
    list(APPEND vram_lbk_gencode -gencode arch=compute_${arch},code=sm_${arch})
    set(vram_lbk_ptx_arch ${arch})
  endforeach()
  list(APPEND vram_lbk_gencode
       -gencode arch=compute_${vram_lbk_ptx_arch},code=compute_${vram_lbk_ptx_arch})
  add_custom_command(
    OUTPUT ${VRAM_GEN_DIR}/lbk_image.fatbin
    COMMAND ${CMAKE_CUDA_COMPILER} --fatbin -O3 -std=c++17 ${vram_lbk_gencode} -Werror all-warnings
            -I ${CMAKE_SOURCE_DIR}/src -o ${VRAM_GEN_DIR}/lbk_image.fatbin
            ${CMAKE_SOURCE_DIR}/src/video/cuda/letterbox_nv12.cu
    DEPENDS ${CMAKE_SOURCE_DIR}/src/video/cuda/letterbox_nv12.cu
            ${CMAKE_SOURCE_DIR}/src/video/nv12_sample.h ${CMAKE_SOURCE_DIR}/src/video/yuv_rgb.h
    COMMENT "nvcc --fatbin: src/video/cuda/letterbox_nv12.cu"
    VERBATIM)
  add_custom_command(
    OUTPUT ${VRAM_GEN_DIR}/lbk_image.c
    COMMAND ${CMAKE_COMMAND} -DIN=${VRAM_GEN_DIR}/lbk_image.fatbin -DOUT=${VRAM_GEN_DIR}/lbk_image.c
            -DNAME=vram__lbk_image -P ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${VRAM_GEN_DIR}/lbk_image.fatbin ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "embedding the letterbox kernel"
    VERBATIM)
else()
  list(APPEND VRAM_SERVICE_SOURCES ${CMAKE_SOURCE_DIR}/src/video/nogpu/letterbox_cuda_none.c)
endif()
