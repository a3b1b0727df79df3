#include "gpu_step_clock.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <c10/core/impl/VirtualGuardImpl.h>

namespace placement::detail {

namespace {

// Events that can time: c10's default ones cannot (cudaEventDisableTiming).
std::vector<c10::Event> record_on(const std::vector<c10::Device>& gpus) {
  std::vector<c10::Event> events;
  events.reserve(gpus.size());
  for (const c10::Device& gpu : gpus) {
    const c10::impl::VirtualGuardImpl impl(gpu.type());
    events.emplace_back(gpu.type(), c10::EventFlag::BACKEND_DEFAULT);
    events.back().record(impl.getStream(gpu));
  }
  return events;
}

}  // namespace

GpuStepClock::GpuStepClock(std::vector<c10::Device> gpus) : gpus_(std::move(gpus)) {}

void GpuStepClock::start() {
  running_ = Measurement{};
  running_.starts = record_on(gpus_);
}

void GpuStepClock::begin_excluded() {
  if (running_.excluded.size() % 2 == 1) running_.excluded.pop_back();  // one left open
  running_.excluded.push_back(record_on(gpus_));
}

void GpuStepClock::end_excluded() {
  if (running_.excluded.size() % 2 == 1) running_.excluded.push_back(record_on(gpus_));
}

GpuStepClock::Measurement GpuStepClock::end() {
  if (running_.starts.size() != gpus_.size())
    throw std::logic_error("GpuStepClock::end: the step was not started");
  running_.ends = record_on(gpus_);
  if (running_.excluded.size() % 2 == 1) running_.excluded.pop_back();
  return std::exchange(running_, Measurement{});
}

double GpuStepClock::Measurement::seconds() {
  double longest_ms = 0.0;
  for (size_t i = 0; i < ends.size() && i < starts.size(); ++i) {
    ends[i].synchronize();
    double own_ms = starts[i].elapsedTime(ends[i]);
    for (size_t m = 0; m + 1 < excluded.size(); m += 2)
      own_ms -= excluded[m].at(i).elapsedTime(excluded[m + 1].at(i));
    longest_ms = std::max(longest_ms, own_ms);
  }
  return longest_ms / 1000.0;
}

}  // namespace placement::detail
