# records.cmake: RecordBatch v2 validation and iteration, CRC-32C, the four codecs, the end-transaction
# marker (gr_records) and their tests. Included from protocol/CMakeLists.txt.
add_library(gr_records STATIC
  ${CMAKE_CURRENT_LIST_DIR}/crc32c.c
  ${CMAKE_CURRENT_LIST_DIR}/compress.c
  ${CMAKE_CURRENT_LIST_DIR}/record_batch.c
  ${CMAKE_CURRENT_LIST_DIR}/txn_marker.c)
target_link_libraries(gr_records gr_common PkgConfig::ZSTD PkgConfig::LZ4 PkgConfig::ZLIB ${SNAPPY_LIB}
                      Threads::Threads)

gregor_test(test_crc32c ${CMAKE_CURRENT_LIST_DIR}/tests/test_crc32c.c LIBS gr_records)
gregor_test(test_compress ${CMAKE_CURRENT_LIST_DIR}/tests/test_compress.c LIBS gr_records)
gregor_test(test_record_batch ${CMAKE_CURRENT_LIST_DIR}/tests/test_record_batch.c LIBS gr_records)
gregor_test(test_txn_marker ${CMAKE_CURRENT_LIST_DIR}/tests/test_txn_marker.c LIBS gr_records)
