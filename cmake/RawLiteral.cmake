# raw_literal(PATH DELIM INDENT OUT_VAR): the file's text as C++ raw string
# literals, one per 8 KiB piece (compilers bound one literal's length), each on
# its own line after INDENT; "" for an empty file. Fails when the text contains
# the delimiter. Shared by EmbedText.cmake and EmbedAssets.cmake.
function(raw_literal path delim indent out_var)
  file(READ "${path}" text)
  string(FIND "${text}" ")${delim}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw string delimiter )${delim}\"")
  endif()
  string(LENGTH "${text}" n)
  set(out "")
  set(offset 0)
  while(offset LESS n)
    string(SUBSTRING "${text}" ${offset} 8192 piece)
    string(APPEND out "${indent}R\"${delim}(${piece})${delim}\"\n")
    math(EXPR offset "${offset} + 8192")
  endwhile()
  if(n EQUAL 0)
    string(APPEND out "${indent}\"\"\n")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
