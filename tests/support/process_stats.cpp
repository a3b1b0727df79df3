#include "process_stats.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace placement::testing {

double status_mib(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string k;
  while (in >> k) {
    if (k == key) {
      long kib = 0;
      in >> kib;
      return static_cast<double>(kib) / 1024.0;
    }
    in.ignore(4096, '\n');
  }
  return -1;
}

double cpu_seconds(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return 0;
  char buffer[4096];
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, f);
  std::fclose(f);
  buffer[n] = 0;
  const std::string stat(buffer);
  // The command name may hold spaces and parentheses: fields are counted after its last ')'.
  const char* p = stat.c_str() + stat.rfind(')') + 2;
  unsigned long utime = 0, stime = 0;
  // Fields 14 and 15 (utime, stime), counted from field 3.
  std::sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime);
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * static_cast<double>(values.size() - 1))];
}

}  // namespace placement::testing
