#pragma once
// What the benchmarks read of a daemon process from /proc, and the percentile they print.

#include <sys/types.h>

#include <string>
#include <vector>

namespace placement::testing {

/// A "Vm…:" line of /proc/PID/status in MiB ("VmRSS:" now, "VmHWM:" the peak); -1 if unreadable.
double status_mib(pid_t pid, const std::string& key);
/// CPU time the process has used, user and system, in seconds (/proc/PID/stat).
double cpu_seconds(pid_t pid);
/// The p-quantile (0..1) of `values`, nearest rank below; 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace placement::testing
