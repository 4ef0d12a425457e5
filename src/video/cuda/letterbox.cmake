# src/video/cuda/letterbox.cmake - the NV12 letterbox kernel in
# libvramkit-service (included by src/pipeline/CMakeLists.txt after it
# globs the sources): with the CUDA toolkit, src/video/cuda/letterbox_nv12.cu
# embedded as a fatbin (cmake/fatbin.cmake) and the launch code that loads
# it with the driver API;
# without it, the function that says there is no CUDA.
if(VRAM_HAVE_CUDA)
  set(vram_lbk_launch ${CMAKE_SOURCE_DIR}/src/video/cuda/letterbox_cuda.c)
  list(APPEND VRAM_SERVICE_SOURCES ${vram_lbk_launch} ${VRAM_GEN_DIR}/lbk_image.c)
  # cuda.h for the driver table; the library links no CUDA library.
  set_source_files_properties(${vram_lbk_launch} PROPERTIES
                              INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
  vram_embed_fatbin(OUT_C ${VRAM_GEN_DIR}/lbk_image.c SYMBOL vram__lbk_image
                    SOURCE ${CMAKE_SOURCE_DIR}/src/video/cuda/letterbox_nv12.cu
                    INCLUDES ${CMAKE_SOURCE_DIR}/src
                    DEPENDS ${CMAKE_SOURCE_DIR}/src/video/nv12_sample.h
                            ${CMAKE_SOURCE_DIR}/src/video/yuv_rgb.h
                    COMMENT "src/video/cuda/letterbox_nv12.cu")
else()
  list(APPEND VRAM_SERVICE_SOURCES ${CMAKE_SOURCE_DIR}/src/video/nogpu/letterbox_cuda_none.c)
endif()
