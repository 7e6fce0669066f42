# Warnings are errors in our own code only; third-party headers come in as SYSTEM includes.
# The flow-sensitive warnings g++ 12 computes after inlining (-Wrestrict, -Wnull-dereference,
# -Warray-bounds, -Wstringop-*, -Wmaybe-uninitialized, -Wmismatched-new-delete) have false
# positives inside libstdc++ and Boost.Asio once optimised (measured: -Wrestrict in std::string
# at -O3; -Wmismatched-new-delete on Boost 1.74's awaitable frames, whose operator new and delete
# are both the frame's own, at the sanitized build's -O1), and system headers do not shield them;
# ASan checks the real pairs of new and delete at run time. Optimised builds (every build type
# but Debug; the default is RelWithDebInfo) print them without failing; every other warning
# stays an error.
set(_cloud_optimised "$<CONFIG:Release,RelWithDebInfo,MinSizeRel>")
function(cloud_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough -Werror
    $<${_cloud_optimised}:-Wno-error=restrict;-Wno-error=null-dereference;-Wno-error=array-bounds;-Wno-error=stringop-overflow;-Wno-error=stringop-overread;-Wno-error=maybe-uninitialized;-Wno-error=mismatched-new-delete>)
endfunction()
