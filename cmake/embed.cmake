# cmake/embed.cmake - write a binary file as a C array:
#   cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
# defines `const unsigned char NAME[]` and `const size_t NAME_size`.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN} by cmake/embed.cmake */\n#include <stddef.h>\n"
     "extern const unsigned char ${NAME}[];\nextern const size_t ${NAME}_size;\n"
     "__attribute__((aligned(16))) const unsigned char ${NAME}[] = {\n${body}0};\n"
     "const size_t ${NAME}_size = ${bytes};\n")
