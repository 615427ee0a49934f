# Writes OUT, a C++ file defining `extern const char SYMBOL[]` with the
# contents of the text file IN (NUL-terminated), for the CUDA attention PTX.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by EmbedText.cmake.\n"
  "extern const char ${SYMBOL}[];\n"
  "const char ${SYMBOL}[] = {\n${bytes}0};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
