# cmake/report.cmake - the page `vramkit report` writes, included by
# src/observe/CMakeLists.txt (the library it is embedded in). uPlot comes from npm, pinned by web/package-lock.json:
# scripts/web_deps.sh installs it into web/node_modules (ignored) when the
# build is configured. cmake/report_page.cmake then puts uPlot's and web/'s
# CSS and JavaScript into web/report.html, and cmake/embed.cmake makes the
# page a C array in the library (vram__report_page). Where npm or the
# registry cannot be reached, the library is built without the page:
# `vramkit report` says so and how to fix it, and cli/test_report is disabled.
# -DVRAM_REPORT_WEB=OFF builds without the page (and without npm) on purpose.
option(VRAM_REPORT_WEB "embed the report page (its npm packages are installed at configure time)" ON)
set(VRAM_WEB_DIR ${CMAKE_SOURCE_DIR}/web)
set(VRAM_UPLOT_DIR ${VRAM_WEB_DIR}/node_modules/uplot)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${VRAM_WEB_DIR}/package-lock.json)
if(VRAM_REPORT_WEB)
  execute_process(COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/web_deps.sh
                  RESULT_VARIABLE vram_web_rc ERROR_VARIABLE vram_web_err OUTPUT_QUIET)
else()
  set(vram_web_rc 1)
  set(vram_web_err "built with -DVRAM_REPORT_WEB=OFF")
endif()
if(vram_web_rc EQUAL 0 AND EXISTS ${VRAM_UPLOT_DIR}/dist/uPlot.iife.min.js)
  set(VRAM_REPORT_PAGE ON)
  set(vram_uplot ${VRAM_UPLOT_DIR})
  set(vram_page_deps ${VRAM_UPLOT_DIR}/dist/uPlot.iife.min.js ${VRAM_UPLOT_DIR}/dist/uPlot.min.css
      ${VRAM_UPLOT_DIR}/package.json)
  set(vram_page_reason "")
else()
  set(VRAM_REPORT_PAGE OFF)
  set(vram_uplot "")
  set(vram_page_deps)
  # The last line npm or the script printed is the reason.
  string(STRIP "${vram_web_err}" vram_web_err)
  string(REGEX REPLACE ".*\n" "" vram_page_reason "${vram_web_err}")
  if(vram_page_reason STREQUAL "")
    set(vram_page_reason "scripts/web_deps.sh failed")
  endif()
  message(WARNING "vramkit report: ${vram_page_reason}; the library is built without the report page")
endif()
message(STATUS "vramkit: report page ${VRAM_REPORT_PAGE}")

add_custom_command(
  OUTPUT ${VRAM_GEN_DIR}/report_page.html
  COMMAND ${CMAKE_COMMAND} -DWEB=${VRAM_WEB_DIR} -DUPLOT=${vram_uplot}
          -DREASON=${vram_page_reason} -DOUT=${VRAM_GEN_DIR}/report_page.html
          -P ${CMAKE_SOURCE_DIR}/cmake/report_page.cmake
  DEPENDS ${VRAM_WEB_DIR}/report.html ${VRAM_WEB_DIR}/report.js ${VRAM_WEB_DIR}/report.css
          ${CMAKE_SOURCE_DIR}/cmake/report_page.cmake ${vram_page_deps}
  COMMENT "assembling the report page from web/"
  VERBATIM)
add_custom_command(
  OUTPUT ${VRAM_GEN_DIR}/report_page.c
  COMMAND ${CMAKE_COMMAND} -DIN=${VRAM_GEN_DIR}/report_page.html -DOUT=${VRAM_GEN_DIR}/report_page.c
          -DNAME=vram__report_page -P ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
  DEPENDS ${VRAM_GEN_DIR}/report_page.html ${CMAKE_SOURCE_DIR}/cmake/embed.cmake
  COMMENT "embedding the report page"
  VERBATIM)
set(VRAM_REPORT_PAGE ${VRAM_REPORT_PAGE} PARENT_SCOPE)
