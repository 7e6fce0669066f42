# CLOUD_SANITIZE=ON builds everything (host, plugins, tests) with ASan+UBSan, so the
# integration tests exercise the instrumented plugins through the real host.
option(CLOUD_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(CLOUD_SANITIZE)
  set(_cloud_san -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  # -O1 -g1: the sanitized build is the one CI compiles on 2 cores; Asio/Beast coroutine code at
  # -O2 -g takes minutes per file, and -O1 is what the sanitizers' own docs recommend.
  add_compile_options(${_cloud_san} -O1 -g1)
  add_link_options(${_cloud_san})
endif()
