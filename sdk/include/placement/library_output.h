#pragma once
// For plugins that call C libraries which print their complaints on stdout (METIS's "***Cannot
// bisect a graph with 0 vertices!"): stdout is placementctl's output, its JSON included, and the
// daemon's journal, where a library's unannounced lines do not belong.

#include <functional>
#include <string>

namespace placement {

/// Runs `call` with the process's stdout (fd 1) sent to an anonymous memory file, and returns what
/// was written there (its first KiB); stdout is the process's again afterwards, also when `call`
/// throws (which it rethrows). stdout belongs to the whole process: the lock that makes these
/// calls one at a time lives here, in libplacement, so every plugin shares it, and what another
/// thread prints meanwhile is captured too (the daemon prints nothing there). Where stdout cannot
/// be moved (no fd 1, no memory file), `call` runs as it is.
std::string capture_stdout(const std::function<void()>& call);

}  // namespace placement
