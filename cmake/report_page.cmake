# cmake/report_page.cmake - assemble the page `vramkit report` writes:
#   cmake -DWEB=web -DUPLOT=web/node_modules/uplot -DOUT=page.html -P report_page.cmake
# puts uPlot's and web/'s CSS and JavaScript into web/report.html in place of
# their comments and uPlot's version in place of @UPLOT_VERSION@, leaving the
# one data placeholder the library fills. With UPLOT empty the page is one
# line, VRAM_REPORT_PAGE_UNAVAILABLE:<REASON>, which the library reports.
if(NOT UPLOT)
  file(WRITE ${OUT} "VRAM_REPORT_PAGE_UNAVAILABLE:${REASON}")
  return()
endif()
file(READ ${WEB}/report.html page)
file(READ ${WEB}/report.js js)
file(READ ${WEB}/report.css css)
file(READ ${UPLOT}/dist/uPlot.iife.min.js uplot_js)
file(READ ${UPLOT}/dist/uPlot.min.css uplot_css)
file(READ ${UPLOT}/package.json uplot_pkg)
string(JSON uplot_version GET "${uplot_pkg}" version)

# What is inlined must not end its <script> or <style> early, nor hold the
# data placeholder.
foreach(part js uplot_js css uplot_css)
  string(TOLOWER "${${part}}" low)
  if(part MATCHES "css")
    set(closing "</style")
  else()
    set(closing "</script")
  endif()
  string(FIND "${low}" "${closing}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "report page: ${part} contains ${closing}, which would end it early")
  endif()
  string(FIND "${${part}}" "@VRAM_REPORT_DATA@" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "report page: ${part} contains the data placeholder")
  endif()
endforeach()

string(REPLACE "/*@UPLOT_CSS@*/" "${uplot_css}" page "${page}")
string(REPLACE "/*@REPORT_CSS@*/" "${css}" page "${page}")
string(REPLACE "/*@UPLOT_JS@*/" "${uplot_js}" page "${page}")
string(REPLACE "/*@REPORT_JS@*/" "${js}" page "${page}")
string(REPLACE "@UPLOT_VERSION@" "${uplot_version}" page "${page}")
string(REGEX MATCHALL "@VRAM_REPORT_DATA@" found "${page}")
list(LENGTH found n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "report page: web/report.html must hold the data placeholder once, not ${n} times")
endif()
file(WRITE ${OUT} "${page}")
