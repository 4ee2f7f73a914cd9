# golden.cmake: the golden-frame test, the extra malformed-input tests and the libFuzzer target of the
# protocol codec. Included from protocol/CMakeLists.txt after records.cmake (needs gr_protocol_test and
# gr_records). The golden frames are read at run time from protocol/tests/golden/, whose path is compiled
# in (ctest runs in the build directory); a path given as argv[1] overrides it.

gregor_test(test_golden ${CMAKE_CURRENT_LIST_DIR}/test_golden.c LIBS gr_protocol_test gr_records)
target_compile_definitions(test_golden PRIVATE GR_GOLDEN_DIR="${CMAKE_CURRENT_LIST_DIR}/golden")

gregor_test(test_malformed2 ${CMAKE_CURRENT_LIST_DIR}/test_malformed2.c LIBS gr_protocol_test gr_records)

# The fuzz corpus without libFuzzer (any compiler): make_seeds writes the generated seeds, fuzz_replay runs
# fuzz_protocol.c's target over them, the golden frames and deterministic mutants (scripts/sanitize-check.sh
# runs both in the sanitizer build).
set(GR_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
add_executable(fuzz_make_seeds ${GR_FUZZ_DIR}/make_seeds.c)
target_link_libraries(fuzz_make_seeds gr_protocol_test gr_records)
add_executable(fuzz_replay ${GR_FUZZ_DIR}/replay.c ${GR_FUZZ_DIR}/fuzz_protocol.c)
target_link_libraries(fuzz_replay gr_protocol gr_records)
set_target_properties(fuzz_make_seeds fuzz_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)

# libFuzzer target (protocol/fuzz/run.sh configures a clang build with GREGOR_FUZZ=ON and
# GREGOR_SANITIZE=ON, and CMAKE_C_FLAGS=-fsanitize=fuzzer-no-link so the libraries carry coverage
# instrumentation).
if(GREGOR_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GREGOR_FUZZ needs clang (libFuzzer): configure with CC=clang")
  endif()
  add_executable(fuzz_protocol ${GR_FUZZ_DIR}/fuzz_protocol.c)
  target_compile_options(fuzz_protocol PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_protocol PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_protocol gr_protocol gr_records)
  set_target_properties(fuzz_protocol PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
endif()
