#include "placement/job_outcome.h"

#include <cstdio>

namespace placement {

namespace {

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char text[256];
  std::snprintf(text, sizeof(text), pattern, args...);
  return text;
}

// "18.70 ms", "21.4 s".
std::string duration(double seconds) {
  return seconds < 1.0 ? format("%.2f ms", seconds * 1e3) : format("%.1f s", seconds);
}

std::string realized(const messages::JobSummary& j) {
  if (!j.realized_speedup) return "not measured yet (the start placement's step time is not)";
  std::string out = format("%.2fx", *j.realized_speedup);
  if (j.realized_speedup_interval)
    out += format(" (95%%: %.2fx to %.2fx)", (*j.realized_speedup_interval)[0],
                  (*j.realized_speedup_interval)[1]);
  const double at_start = *j.realized_speedup * j.job_s;
  return out + ": its " + std::to_string(j.steps - j.failed_steps) + " batches took " +
         duration(j.job_s) + ", " + duration(at_start) + " at the start's mean step time";
}

std::string beyond_best(const messages::JobSummary& j) {
  if (!j.beyond_best_s) return "not measured yet";
  if (*j.beyond_best_s <= 0) return "none: the steps off the best were not slower on the whole";
  return duration(*j.beyond_best_s) +
         format(" (%.1f%% of the job's time): what the steps off the best placement took beyond ",
                j.job_s > 0 ? 100.0 * *j.beyond_best_s / j.job_s : 0.0) +
         "its step time";
}

std::string in_force(const messages::JobSummary& j) {
  const std::string id = std::to_string(j.current_placement);
  if (j.on_best) return id + ", the best known";
  if (!j.best_step_time_s) return id + " (none measured yet)";
  return id + ", not the best known (" + std::to_string(j.best_placement) + ")";
}

std::string exploration(const messages::JobSummary& j) {
  const std::string steps = std::to_string(j.exploration_steps) + " steps on candidates";
  if (j.exploration_finished) return "finished after " + steps + "; the best runs for good";
  const bool detached = j.state == messages::JobState::kDetached;
  std::string out = detached ? "unfinished when the job detached (" + steps + ")"
                             : "running (" + steps + " so far)";
  if (j.paused) out += ", paused until the job's own time pays for more";
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> describe_outcome(const messages::JobSummary& j) {
  if (j.replica && j.replica->follower()) return {};
  std::vector<std::pair<std::string, std::string>> lines;
  lines.emplace_back("realized speed-up", realized(j));
  lines.emplace_back("best vs start",
                     j.speedup ? format("%.2fx a step on the best known placement", *j.speedup)
                               : std::string("not measured yet"));
  lines.emplace_back("time off the best", beyond_best(j));
  lines.emplace_back("placement in force", in_force(j));
  lines.emplace_back("exploration", exploration(j));
  return lines;
}

}  // namespace placement
