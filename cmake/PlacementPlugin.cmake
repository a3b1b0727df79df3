# placement_add_plugin(KIND NAME SOURCES ... [LIBRARIES ...])
#
# Builds every plugin the same way: the plugin's code once as an object library
# (placement_<kind>_<name>_obj, which unit tests link directly), a MODULE library with hidden
# visibility and a version script that exports only the Boost.DLL aliases, the install rule, and a
# ctest that loads the built .so through the daemon's registry.
function(placement_add_plugin KIND NAME)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT KIND MATCHES "^(grouper|placer|algorithm)$")
    message(FATAL_ERROR "placement_add_plugin: unknown kind '${KIND}'")
  endif()
  set(obj placement_${KIND}_${NAME}_obj)
  set(mod placement_${KIND}_${NAME})
  list(FILTER ARG_SOURCES EXCLUDE REGEX "plugin\\.cpp$")
  add_library(${obj} OBJECT ${ARG_SOURCES})
  target_link_libraries(${obj} PUBLIC placement ${ARG_LIBRARIES})
  target_include_directories(${obj} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  set_target_properties(${obj} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)

  add_library(${mod} MODULE plugin.cpp $<TARGET_OBJECTS:${obj}>)
  target_link_libraries(${mod} PRIVATE ${obj})
  set_target_properties(${mod} PROPERTIES
    PREFIX "" OUTPUT_NAME "${NAME}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${PLACEMENT_BUILD_PLUGIN_DIR}/${KIND}s"
    INSTALL_RPATH "$ORIGIN/../../..")
  if("placement_plugins_torch" IN_LIST ARG_LIBRARIES)
    set_property(TARGET ${mod} APPEND PROPERTY INSTALL_RPATH "${PLACEMENT_TORCH_RPATH}")
  endif()
  target_link_options(${mod} PRIVATE "-Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/plugin.map")
  # A sanitized plugin calls a runtime that only the program loading it links.
  if(NOT PLACEMENT_SANITIZERS)
    target_link_options(${mod} PRIVATE "-Wl,--no-undefined")
  endif()
  set_property(GLOBAL APPEND PROPERTY PLACEMENT_PLUGIN_TARGETS ${mod})
  install(TARGETS ${mod} LIBRARY DESTINATION ${PLACEMENT_PLUGIN_INSTALL_DIR}/${KIND}s)
  if(PLACEMENT_BUILD_TESTS)
    add_test(NAME plugin_load.${KIND}.${NAME}
             COMMAND placement_plugin_check ${KIND} ${NAME} $<TARGET_FILE:${mod}>)
  endif()
endfunction()
