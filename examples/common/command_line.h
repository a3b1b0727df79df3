#pragma once
// The command-line conventions every example and benchmark shares, so that each behaves alike
// (tests/scripts/help_test.sh checks them on every program):
//   - `--help` / `-h` prints the usage (every option and positional argument with its default) on
//     stdout and exits 0 before any work is done;
//   - an unknown option or a bad value is one line on stderr naming it, and exit status 2;
//   - an exception that escapes the program's work is `<program>: <message>` and exit status 1;
//   - a fatal signal (a crash) writes `<program>: killed by <signal>` and the stack to stderr
//     (crash_report.h) before the process dies of it.

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "crash_report.h"
#include "placement/devices.h"

namespace examples::command_line {

/// The exit status of a command line that does not parse (2, as getopt-based tools use).
constexpr int kUsageError = 2;

namespace detail {
// LibTorch's errors (c10::Error) append the C++ backtrace of where they were raised to the message;
// the user needs the message.
inline std::string without_backtrace(std::string text) {
  if (const auto at = text.find("\nException raised from "); at != std::string::npos)
    text.resize(at);
  return text;
}

// CLI11 validators see the option's text before it is converted; a non-number is reported here so
// the message says what is wrong rather than "not in range".
inline bool to_number(const std::string& text, double* value) {
  return CLI::detail::lexical_cast(text, *value);
}
}  // namespace detail

/// Parses `argv` into `app`'s options, then runs `body` (a callable returning the exit status) and
/// returns what the process should exit with. `app` must be constructed with the program's name
/// (`CLI::App{description, name}`): every message starts with it, whatever path ran the binary.
template <typename Body>
int run(CLI::App& app, int argc, char** argv, Body&& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a ParseError with status 0 too; app.exit prints the usage for it on stdout.
    if (e.get_exit_code() == 0) return app.exit(e);
    // CLI11 checks for missing required options before it rejects unknown arguments; an unknown one
    // (often a misspelt required option) is the mistake to name, not its consequence.
    const std::vector<std::string> unknown = app.remaining();
    const std::string message =
        unknown.empty() ? e.what()
                        : (unknown.size() == 1 ? "unknown argument " : "unknown arguments ") +
                              CLI::detail::join(unknown, " ");
    std::fprintf(stderr, "%s: %s; run with --help for usage\n", app.get_name().c_str(),
                 message.c_str());
    return kUsageError;
  }
  crash_report::install(app.get_name().c_str());
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(),
                 detail::without_backtrace(e.what()).c_str());
  } catch (...) {
    // Not a std::exception (nothing of ours throws one): still a message and a status, not abort().
    std::fprintf(stderr, "%s: stopped by an exception that is not a std::exception\n",
                 app.get_name().c_str());
  }
  return 1;
}

/// Accepts a number of at least `min` (counts: steps, repeats, ops); "--steps: 0 is less than 1".
inline CLI::Validator at_least(long long min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        double value = 0;
        if (!detail::to_number(text, &value)) return "'" + text + "' is not a number";
        return value >= static_cast<double>(min) ? ""
                                                 : text + " is less than " + std::to_string(min);
      },
      "");
}

/// Accepts a number greater than 0 (sizes in GiB, ...).
inline CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!detail::to_number(text, &value)) return "'" + text + "' is not a number";
        return value > 0 ? "" : text + " is not greater than 0";
      },
      "");
}

/// Accepts what placement::parse_device_name accepts: cpu, cpu:N, cuda:N.
inline CLI::Validator device_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          placement::parse_device_name(text);
          return "";
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      "");
}

}  // namespace examples::command_line
