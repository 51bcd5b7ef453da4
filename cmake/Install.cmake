# `cmake --install build --prefix P`: the `dtrain` binary (P/bin), one static
# library per layer (P/lib), every header under src/ at its relative path below
# P/include/dtrain, and the CMake package (P/lib/cmake/dtrain) that exports the
# layers as dtrain::core ... dtrain::federated and all of them as dtrain::dtrain.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DTRAIN_LAYERS core tensor autograd nn optim data comm parallel runtime federated calibrate api plan cli)

# dtrain::dtrain: one name for every layer. (The target is dtrain_all here:
# `dtrain` is the executable's name.)
add_library(dtrain_all INTERFACE)
add_library(dtrain::dtrain ALIAS dtrain_all)
set_target_properties(dtrain_all PROPERTIES EXPORT_NAME dtrain)
foreach(layer ${DTRAIN_LAYERS})
  set_target_properties(dtrain_${layer} PROPERTIES EXPORT_NAME ${layer})
  target_link_libraries(dtrain_all INTERFACE dtrain_${layer})
  list(APPEND DTRAIN_LAYER_TARGETS dtrain_${layer})
endforeach()

install(TARGETS dtrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${DTRAIN_LAYER_TARGETS} dtrain_all EXPORT dtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtrain
        FILES_MATCHING PATTERN "*.h")

set(DTRAIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtrain)
install(EXPORT dtrainTargets NAMESPACE dtrain:: DESTINATION ${DTRAIN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dtrainConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dtrainConfig.cmake INSTALL_DESTINATION ${DTRAIN_CMAKE_DIR})
# 0.x: a minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtrainConfig.cmake ${PROJECT_BINARY_DIR}/dtrainConfigVersion.cmake
        DESTINATION ${DTRAIN_CMAKE_DIR})
