#pragma once
// What placementd did for a job, in words a user can check against their own clock: the gain the
// job realized (its time against the start placement's for the same batches), what the steps off
// the best placement cost, what it runs now and whether exploration finished. The best-vs-start
// ratio alone says what the best gains each step, not what the job got: the same
// lines go into `placementctl jobs show`, the examples' summaries and the Python SDK's
// Job.summary().

#include <string>
#include <utility>
#include <vector>

#include "placement/inspection.h"

namespace placement {

/// (label, value) lines, in the order a reader needs them; empty for a follower replica (rank 0's
/// job has them).
std::vector<std::pair<std::string, std::string>> describe_outcome(const messages::JobSummary& job);

}  // namespace placement
