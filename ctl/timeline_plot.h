#pragma once
// `placementctl jobs show ID --plot F.svg`: a job's step time over its steps, each stretch coloured
// by whether it ran the placement in force or explored, the best-known step time as a line that
// moves only where a trial decided, and each trial's verdict marked at the step it was reached.

#include <string>

#include "placement/inspection.h"

namespace placementctl {

/// Writes the plot of `job` atomically; throws std::runtime_error naming the file if it cannot.
/// Elements carry classes a reader (or a test) can find: "stretch in-force", "stretch exploring",
/// "stretch merged", "best-known", "start", "verdict faster", "verdict not-faster", "verdict
/// unclear".
void write_timeline_svg(const std::string& path, const placement::messages::JobInfo& job);

}  // namespace placementctl
