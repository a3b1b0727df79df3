#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/ops/zeros.h>

#include "physical_device.h"
#include "placement/job.h"
#include "stopwatch.h"
#include "transfer.h"

namespace placement {

namespace {

// Two sizes give latency (the small copy) and bandwidth (the difference): 4 KiB and 8 MiB, a few
// milliseconds per pair even over PCIe, and large enough that a GPU link is past its ramp.
constexpr int64_t kSmallFloats = 1 << 10;
constexpr int64_t kLargeFloats = 2 << 20;
constexpr int kRepeats = 5;

// Median seconds of a copy of `source` to `target` by the job's own copy path (the migration's).
double copy_seconds(const at::Tensor& source, c10::Device target) {
  detail::copy_all({{source, target}});  // first use: copy streams, communicators, pinned staging
  std::vector<double> times;
  for (int i = 0; i < kRepeats; ++i) {
    const auto started = detail::Clock::now();
    detail::copy_all({{source, target}});
    times.push_back(detail::seconds_since(started));
  }
  std::nth_element(times.begin(), times.begin() + kRepeats / 2, times.end());
  return times[kRepeats / 2];
}

std::pair<double, double> probe(c10::Device from, c10::Device to) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(from);
  const at::Tensor small = at::zeros({kSmallFloats}, options),
                   large = at::zeros({kLargeFloats}, options);
  const double latency = copy_seconds(small, to);
  const double large_s = copy_seconds(large, to);
  // A copy no slower than the small one (noise on a fast link) still moved the bytes: bound it.
  const double bandwidth =
      static_cast<double>(large.nbytes() - small.nbytes()) / std::max(large_s - latency, 1e-7);
  return {bandwidth, latency};
}

}  // namespace

void measure_links(DeviceSet& devices) {
  const size_t n = devices.size();
  devices.bandwidth.assign(n, std::vector<double>(n, 0.0));
  devices.latency.assign(n, std::vector<double>(n, 0.0));
  // Logical devices of one physical device share its figures: measured once per physical pair.
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> measured;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const c10::Device from = detail::physical(devices.devices[i]),
                        to = detail::physical(devices.devices[j]);
      const auto key = std::make_pair(from.str(), to.str());
      auto it = measured.find(key);
      if (it == measured.end()) {
        try {
          it = measured.emplace(key, probe(from, to)).first;
        } catch (const std::exception& e) {
          std::string why = e.what();
          if (const auto cut = why.find('\n'); cut != std::string::npos)
            why.resize(cut);  // LibTorch's backtrace
          throw std::runtime_error("cannot measure the link " + devices.devices[i].name() + " -> " +
                                   devices.devices[j].name() + ": " + why);
        }
      }
      devices.bandwidth[i][j] = it->second.first;
      devices.latency[i][j] = it->second.second;
    }
  // The diagonal is ignored; keep it valid for readers that check every entry.
  for (size_t i = 0; i < n; ++i) {
    double fastest = 0.0;
    for (size_t j = 0; j < n; ++j) fastest = std::max(fastest, devices.bandwidth[i][j]);
    devices.bandwidth[i][i] = fastest > 0 ? fastest : 1e12;
  }
}

}  // namespace placement
