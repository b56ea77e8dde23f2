# Turns a backend's .sql files into a C++ header of named string constants, so SQL lives in .sql files (reviewable,
# runnable with psql/sqlite3) and still ships inside the binary.
#
# A .sql file holds one or more statements, each introduced by a line `-- name: CamelCaseName`. Everything up to the
# next such line (comments included) is that statement's text. The header defines, in namespace NAMESPACE,
#   inline constexpr std::string_view kCamelCaseName = R"octopsql(...)octopsql";
#
# Use: octop_embed_sql(TARGET tgt NAMESPACE octop::store::sqlite::sql HEADER sqlite_queries.h SOURCES a.sql b.sql)

set(OCTOP_EMBED_SQL_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/EmbedSqlScript.cmake")

function(octop_embed_sql)
  cmake_parse_arguments(ARG "" "TARGET;NAMESPACE;HEADER" "SOURCES" ${ARGN})
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/generated")
  set(out "${out_dir}/${ARG_HEADER}")
  set(abs_sources "")
  foreach(src IN LISTS ARG_SOURCES)
    get_filename_component(abs "${src}" ABSOLUTE)
    list(APPEND abs_sources "${abs}")
  endforeach()
  string(REPLACE ";" "|" joined "${abs_sources}")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} "-DOUT=${out}" "-DNAMESPACE=${ARG_NAMESPACE}" "-DSOURCES=${joined}"
            -P "${OCTOP_EMBED_SQL_SCRIPT}"
    DEPENDS ${abs_sources} "${OCTOP_EMBED_SQL_SCRIPT}"
    COMMENT "Embedding SQL into ${ARG_HEADER}"
    VERBATIM)
  target_sources(${ARG_TARGET} PRIVATE "${out}")
  target_include_directories(${ARG_TARGET} PRIVATE "${out_dir}")
endfunction()
