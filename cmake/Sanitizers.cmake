# CLOUD_SANITIZE=ON builds everything (host, plugins, tests) with ASan+UBSan, so the
# integration tests exercise the instrumented plugins through the real host.
option(CLOUD_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(CLOUD_SANITIZE)
  set(_cloud_san -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${_cloud_san})
  add_link_options(${_cloud_san})
endif()
