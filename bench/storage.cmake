# storage.cmake: the segment store benchmark (not a test). include() it from the top-level CMakeLists.txt;
# run: build/bin/storage_bench [dir] [MiB per run]. See bench/storage_bench.c.
add_executable(storage_bench ${CMAKE_CURRENT_LIST_DIR}/storage_bench.c)
target_link_libraries(storage_bench gr_storage gr_records Threads::Threads)
