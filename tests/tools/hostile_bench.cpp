// Issue #41's hostile-client figures: one real placementd with its default limits, --victims jobs
// training and exploring (a pushed directive names the step report that caused it, so each
// report -> directive latency is exact), and, one at a time, each hostile client of the issue run
// as another user (uid 65534 when this runs as root). Windows of --seconds alternate, quiet then
// hostile, for every client and --rounds times, so each hostile client is compared with the quiet
// windows beside it on the same machine at the same time. Prints, per client: the daemon's peak
// and final RSS in its windows, and the victims' report -> directive p50 / p99 against the quiet
// windows', with a 95% bootstrap interval of the p99 ratio.
//
// --check (CI runs it, short) fails when the daemon dies, a victim gets no directive in some
// window (starved), or the daemon's peak RSS passes its stated ceiling (idle + max_buffered_bytes
// + 256 MiB); never on a time.
//
//   hostile_bench [--victims N] [--seconds S] [--rounds R] [--clients A,B]
//                 [--daemon-key KEY=VALUE ...] [--check]
//   hostile_bench --play CLIENT --socket PATH   (one hostile client, until SIGTERM)

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "../../examples/common/command_line.h"
#include "attach_flow.h"
#include "daemon_process.h"
#include "placement/client.h"
#include "placement/messages.h"
#include "placement/protocol.h"
#include "process_stats.h"
#include "raw_connection.h"
#include "stop_signals.h"
#include "test_graphs.h"

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using placement::protocol::MessageType;
using placement::testing::percentile;
using placement::testing::RawConnection;
using placement::testing::status_mib;
namespace msg = placement::messages;

namespace {

constexpr uint32_t kMiB = 1u << 20;

// ---------------------------------------------------------------------------------------------
// The hostile clients (issue #41, items 6 to 10 and a job's own reports), each a loop until
// SIGTERM.

std::atomic<bool> stopping{false};

// Sends a frame header saying `length` bytes of `type`, then `sent` bytes of zeros (all of them
// when sent == length); a daemon that refuses the frame at its header closes the connection, and
// the rest goes nowhere.
void send_frame_of(RawConnection& c, uint16_t version, uint16_t type, uint32_t length,
                   uint32_t sent) {
  const auto head = placement::protocol::encode_header({version, type, length, 1});
  c.send({head.begin(), head.end()});
  const std::vector<uint8_t> chunk(kMiB, 0);
  for (uint32_t done = 0; done < sent && !stopping;) {
    const uint32_t n = std::min<uint32_t>(kMiB, sent - done);
    c.send({chunk.begin(), chunk.begin() + n});
    done += n;
  }
}

msg::Attach attach_of(const std::string& name, size_t devices) {
  msg::Attach a;
  a.job = name;
  a.devices = placement::testing::devices(static_cast<int>(devices), placement::DeviceKind::kCpu);
  return a;
}

void idle_until_stopped() {
  while (!stopping) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

struct Hostile {
  std::string name;
  std::string what;  // as the table prints it
  std::function<void(const std::string& socket)> play;
};

std::vector<Hostile> hostile_clients() {
  return {
      {"unknown-frames", "8 connections send a 60 MiB frame of an unknown type, then idle",
       [](const std::string& socket) {
         std::vector<std::unique_ptr<RawConnection>> held;
         for (int i = 0; i < 8 && !stopping; ++i) {
           held.push_back(std::make_unique<RawConnection>(socket));
           held.back()->hello();
           send_frame_of(*held.back(), held.back()->version(), 0x7e7e, 60 * kMiB, 60 * kMiB);
         }
         idle_until_stopped();
       }},
      {"status-60mib", "a 60 MiB status frame, again each time the daemon closes",
       [](const std::string& socket) {
         while (!stopping) {
           RawConnection c(socket);
           c.hello();
           send_frame_of(c, c.version(), static_cast<uint16_t>(MessageType::kStatus), 60 * kMiB,
                         60 * kMiB);
           c.closed_by_peer(1000);
         }
       }},
      {"attach-2500-devices", "attach requests naming 2 500 devices, back to back",
       [](const std::string& socket) {
         const json body = attach_of("hostile", 2500).to_json();
         while (!stopping) {
           RawConnection c(socket);
           c.hello();
           c.send_frame(MessageType::kAttach, body);
           c.read_frame(2000);
         }
       }},
      {"partial-graphs", "7 attached jobs each hold a 63 MiB graph upload, 62 MiB of it sent",
       [](const std::string& socket) {
         std::vector<std::unique_ptr<RawConnection>> held;
         for (int i = 0; i < 7 && !stopping; ++i) {
           held.push_back(std::make_unique<RawConnection>(socket));
           RawConnection& c = *held.back();
           c.hello();
           c.send_frame(MessageType::kAttach,
                        attach_of("holder-" + std::to_string(i), 2).to_json());
           c.read_frame(5000);
           send_frame_of(c, c.version(), static_cast<uint16_t>(MessageType::kGraphUpload),
                         63 * kMiB, 62 * kMiB);
         }
         idle_until_stopped();
       }},
      {"empty-maps",
       "4 attached jobs send graph uploads and profile reports of 8 MiB of empty maps, back to "
       "back",
       [](const std::string& socket) {
         // One byte each, each a map the decoder would build: 1.4 GiB decoded per frame (issue
         // #69), unless the frame is weighed first.
         std::vector<uint8_t> payload = {0x9a, 0x00, 0x80, 0x00, 0x00};
         payload.insert(payload.end(), 8 * kMiB, 0xa0);
         std::vector<std::unique_ptr<RawConnection>> jobs;
         for (int i = 0; i < 4 && !stopping; ++i) {
           jobs.push_back(std::make_unique<RawConnection>(socket));
           jobs.back()->hello();
           jobs.back()->send_frame(MessageType::kAttach,
                                   attach_of("maps-" + std::to_string(i), 2).to_json());
           jobs.back()->read_frame(5000);
         }
         for (uint32_t n = 0; !stopping; ++n)
           for (auto& c : jobs) {
             const auto type = n % 2 ? MessageType::kProfileReport : MessageType::kGraphUpload;
             const auto head =
                 placement::protocol::encode_header({c->version(), static_cast<uint16_t>(type),
                                                     static_cast<uint32_t>(payload.size()), n + 1});
             c->send({head.begin(), head.end()});
             c->send(payload);
             c->read_frame(5000);
           }
       }},
      {"no-hello", "64 connections (the per-uid limit) that never say hello, reopened when closed",
       [](const std::string& socket) {
         std::vector<std::unique_ptr<RawConnection>> held;
         while (!stopping) {
           held.erase(std::remove_if(held.begin(), held.end(),
                                     [](const auto& c) { return c->closed_by_peer(0); }),
                      held.end());
           while (held.size() < 64 && !stopping) {
             try {
               held.push_back(std::make_unique<RawConnection>(socket));
             } catch (const std::exception&) {
               break;  // refused: the per-uid limit holds
             }
           }
           std::this_thread::sleep_for(std::chrono::milliseconds(100));
         }
       }},
      {"report-flood",
       "an attached job sends step reports as fast as it can, half of them with 0 s, inf or an "
       "unknown placement",
       [](const std::string& socket) {
         placement::Client client(placement::ClientOptions{socket, "hostile", 5000});
         const placement::OpGraph graph = placement::testing::chain(20, 1024);
         const placement::DeviceSet devices =
             placement::testing::devices(2, placement::DeviceKind::kCpu);
         const msg::Directive d =
             placement::testing::attach_and_place(client, "flood", graph, devices);
         const double bad[] = {0.0, std::numeric_limits<double>::infinity(), 0.01};
         for (uint64_t step = 0; !stopping; ++step) {
           msg::StepReport r{d.placement_id, step, 0.01, true, ""};
           if (step % 2 == 1) {
             r.step_time_s = bad[(step / 2) % 3];
             if ((step / 2) % 3 == 2) r.placement_id = 1000000 + step;
           }
           // A report the client's own queue drops (the daemon reads slower) is tried no more.
           if (!client.send_oneway(MessageType::kStepReport, r.to_json()))
             std::this_thread::sleep_for(std::chrono::milliseconds(1));
           // Directives pushed meanwhile are read and dropped, as a careless job would.
           while (client.poll_readable(0)) {
             placement::protocol::Header h;
             client.read_frame(&h);
           }
         }
       }},
      {"policy-flood",
       "4 jobs attach with 50 000-op graphs, take their first placement and detach, over and over",
       [](const std::string& socket) {
         // Each attach builds a session over a 50 000-op graph and places it: seconds of a policy
         // thread (issue #69, item 3). Four of them at once would take every policy thread.
         const placement::OpGraph graph = placement::testing::chain(50000, 1024);
         const placement::DeviceSet devices =
             placement::testing::devices(2, placement::DeviceKind::kCpu);
         std::vector<std::thread> jobs;
         for (int i = 0; i < 4; ++i)
           jobs.emplace_back([&, i] {
             for (int n = 0; !stopping; ++n) {
               try {
                 placement::Client client(placement::ClientOptions{socket, "hostile", 60000});
                 placement::testing::attach_and_place(
                     client, "flood-" + std::to_string(i) + "-" + std::to_string(n), graph,
                     devices);
               } catch (const std::exception&) {
                 std::this_thread::sleep_for(std::chrono::milliseconds(100));
               }
             }
           });
         for (std::thread& t : jobs) t.join();
       }},
      {"inspection", "an admin lists every job and shows each one, in a loop",
       [](const std::string& socket) {
         placement::Client client(placement::ClientOptions{socket, "hostile", 5000});
         while (!stopping) {
           const json jobs =
               client.request(MessageType::kListJobs, json::object(), MessageType::kJobList);
           for (const json& j : jobs.at("jobs"))
             client.request(MessageType::kJobShow, {{"id", j.at("id")}}, MessageType::kJobInfo);
         }
       }},
  };
}

int play(const std::string& name, const std::string& socket) {
  const std::vector<Hostile> clients = hostile_clients();
  const auto h = std::find_if(clients.begin(), clients.end(),
                              [&](const Hostile& c) { return c.name == name; });
  if (h == clients.end()) {
    std::cerr << "no hostile client named " << name << "\n";
    return 2;
  }
  sigset_t set = placement::testing::block_stop_signals();
  std::thread waiter([&] {
    int signo = 0;
    sigwait(&set, &signo);
    stopping = true;
  });
  std::cout << "ready" << std::endl;
  try {
    h->play(socket);
  } catch (const std::exception& e) {
    // A hostile client the daemon cut off has done what it could.
    if (!stopping) std::cerr << name << ": " << e.what() << "\n";
  }
  idle_until_stopped();
  waiter.join();
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The victims: jobs stepping every --step-ms, applying the daemon's pushes between steps.

struct Sample {
  Clock::time_point reported;
  double latency_ms;
};

struct Victim {
  std::vector<Sample> samples;
  std::string problem;
};

void run_victim(const placement::testing::DaemonProcess& daemon, int index, double step_ms,
                const std::atomic<bool>& done, std::atomic<int>* attached, Victim* out) {
  const placement::OpGraph graph = placement::testing::unrolled_stack(200 + 4 * index);
  // Room for any placement: the memory model rejects none, and exploration never runs dry.
  const placement::DeviceSet devices =
      placement::testing::devices(2, placement::DeviceKind::kCpu, uint64_t{64} << 30);
  placement::Client client = daemon.client(60000);
  msg::Directive directive = placement::testing::attach_and_place(
      client, "victim-" + std::to_string(index), graph, devices, 100000000);
  attached->fetch_add(1);
  std::vector<Clock::time_point> sent;
  auto step_end = Clock::now();
  for (uint64_t step = 0; !done; ++step) {
    step_end += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(step_ms));
    for (auto now = Clock::now(); now < step_end; now = Clock::now()) {
      const int wait_ms =
          static_cast<int>(std::chrono::duration<double, std::milli>(step_end - now).count()) + 1;
      if (!client.poll_readable(wait_ms)) continue;
      placement::protocol::Header header;
      const json body = client.read_frame(&header);
      const auto arrived = Clock::now();
      if (header.type != static_cast<uint16_t>(MessageType::kPlacementDirective)) continue;
      directive = msg::Directive::from_json(body, graph, devices);
      if (!directive.after_step || *directive.after_step >= sent.size()) {
        out->problem = "a pushed directive names no step the job reported";
        continue;
      }
      const Clock::time_point reported = sent[*directive.after_step];
      out->samples.push_back(
          {reported, std::chrono::duration<double, std::milli>(arrived - reported).count()});
    }
    // Every placement takes the same time: this job measures the daemon, not its placements.
    const msg::StepReport m{directive.placement_id, step, step_ms / 1000.0, true, ""};
    sent.push_back(Clock::now());
    client.send_oneway(MessageType::kStepReport, m.to_json());
  }
  client.request(MessageType::kDetach, json::object(), MessageType::kDetached);
}

// ---------------------------------------------------------------------------------------------

struct Window {
  std::string client;  // "" for a quiet window
  Clock::time_point from, to;
  double peak_mib = 0, end_mib = 0;
};

// A 95% bootstrap interval of percentile(a, p) / percentile(b, p).
std::pair<double, double> ratio_interval(const std::vector<double>& a, const std::vector<double>& b,
                                         double p) {
  std::mt19937_64 rng(41);
  std::vector<double> ratios;
  std::vector<double> ra(a.size()), rb(b.size());
  for (int i = 0; i < 1000; ++i) {
    std::uniform_int_distribution<size_t> ia(0, a.size() - 1), ib(0, b.size() - 1);
    for (double& x : ra) x = a[ia(rng)];
    for (double& x : rb) x = b[ib(rng)];
    ratios.push_back(percentile(ra, p) / percentile(rb, p));
  }
  return {percentile(ratios, 0.025), percentile(ratios, 0.975)};
}

int run(int victims, double step_ms, double seconds, int rounds, const std::string& only,
        const std::vector<std::string>& daemon_keys, bool check) {
  // Short screenings and trials, and a budget that never ends exploration: directives keep coming.
  placement::testing::DaemonOptions options = placement::testing::fast_exploration(100000, 1.0);
  options.log_level = "warn";
  // Random search keeps sampling placements the victims have not run: where every placement takes
  // the same time, a learning policy soon proposes only what it measured and settles.
  options.extra.replace(options.extra.find("[policy]\n"), 9,
                        "[policy]\nalgorithm = \"random_search\"\n");
  options.frame_timeout_ms = 0;  // the daemon's default
  for (const std::string& key : daemon_keys) options.daemon_keys += key + "\n";
  placement::testing::DaemonProcess daemon(options);
  daemon.start();
  // Root runs the hostile clients as another user (setpriv, util-linux); anyone else as itself.
  const bool as_root = ::geteuid() == 0 && ::access("/usr/bin/setpriv", X_OK) == 0;
  const double idle_mib = status_mib(daemon.pid, "VmRSS:");
  const double ceiling_mib = idle_mib + 512 + 256;  // max_buffered_bytes's default, and slack
  std::printf(
      "%d victim jobs (unrolled 200-op graphs, two CPUs, %.0f ms steps) on one placementd with "
      "its default limits; each hostile client runs as %s in windows of %.1f s, between quiet "
      "ones, %d rounds; %u cores\n\n",
      victims, step_ms,
      as_root ? "uid 65534" : "this uid (no setpriv as root: no other uid to run it as)", seconds,
      rounds, std::thread::hardware_concurrency());

  std::atomic<bool> done{false};
  std::atomic<int> attached{0};
  std::vector<Victim> results(static_cast<size_t>(victims));
  std::vector<std::thread> threads;
  for (int v = 0; v < victims; ++v)
    threads.emplace_back([&, v] {
      try {
        run_victim(daemon, v, step_ms, done, &attached, &results[static_cast<size_t>(v)]);
      } catch (const std::exception& e) {
        results[static_cast<size_t>(v)].problem = std::string("the job failed: ") + e.what();
      }
    });
  // Whatever ends the run early, the victims stop and are joined first.
  struct JoinVictims {
    std::atomic<bool>& done;
    std::vector<std::thread>& threads;
    ~JoinVictims() {
      done = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } join_victims{done, threads};
  while (attached.load() < victims) {
    for (const Victim& v : results)
      if (!v.problem.empty()) throw std::runtime_error("a victim did not attach: " + v.problem);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // past the sessions' first candidates

  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<Window> windows;
  auto window = [&](const std::string& client) {
    std::unique_ptr<placement::testing::Child> player;
    if (!client.empty()) {
      std::vector<std::string> argv = {self, "--play", client, "--socket", daemon.socket};
      // The admin's inspection runs as this uid; every other client as a user of its own.
      if (as_root && client != "inspection")
        argv.insert(argv.begin(),
                    {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
      player = std::make_unique<placement::testing::Child>(argv);
      if (!player->wait_for_output("ready"))
        throw std::runtime_error(client + " did not start: " + player->err());
    }
    Window w{client, Clock::now(), {}, 0, 0};
    const auto until = w.from + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(seconds));
    while (Clock::now() < until) {
      w.peak_mib = std::max(w.peak_mib, status_mib(daemon.pid, "VmRSS:"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    w.to = Clock::now();
    w.end_mib = status_mib(daemon.pid, "VmRSS:");
    if (player) {
      player->signal(SIGTERM);
      player->wait(20000);
    }
    windows.push_back(w);
  };
  std::vector<Hostile> clients = hostile_clients();
  if (!only.empty()) {
    clients.erase(std::remove_if(clients.begin(), clients.end(),
                                 [&](const Hostile& h) {
                                   return ("," + only + ",").find("," + h.name + ",") ==
                                          std::string::npos;
                                 }),
                  clients.end());
    if (clients.empty()) throw std::invalid_argument("--clients names no hostile client");
  }
  for (int r = 0; r < rounds; ++r)
    for (const Hostile& h : clients) {
      window("");
      window(h.name);
    }
  window("");
  done = true;
  for (auto& t : threads) t.join();
  const double peak_mib = status_mib(daemon.pid, "VmHWM:");

  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (ok) return;
    std::printf("CHECK FAILED: %s\n", what.c_str());
    ++failures;
  };
  // Each sample belongs to the window its report was sent in.
  auto latencies = [&](const Window& w, int victim) {
    std::vector<double> out;
    for (int v = 0; v < victims; ++v)
      if (victim < 0 || v == victim)
        for (const Sample& s : results[static_cast<size_t>(v)].samples)
          if (s.reported >= w.from && s.reported < w.to) out.push_back(s.latency_ms);
    return out;
  };
  for (int v = 0; v < victims; ++v) {
    expect(results[static_cast<size_t>(v)].problem.empty(),
           "victim " + std::to_string(v) + ": " + results[static_cast<size_t>(v)].problem);
    for (const Window& w : windows)
      expect(!latencies(w, v).empty(), "victim " + std::to_string(v) + " got no directive in a " +
                                           (w.client.empty() ? "quiet" : w.client) + " window");
  }
  expect(daemon.alive(), "the daemon died");
  expect(peak_mib <= ceiling_mib, "the daemon's peak RSS " + std::to_string(peak_mib) +
                                      " MiB passed its ceiling " + std::to_string(ceiling_mib));

  std::printf("%-22s %-18s %-30s %s\n", "client", "RSS peak / end", "report -> directive",
              "p99 against the quiet windows beside it");
  std::printf("%-22s %-18s %-30s %s\n", "", "(MiB)", "p50 / p99 / max ms (n)",
              "(ratio, 95% bootstrap interval)");
  for (const Hostile& h : clients) {
    std::vector<double> hostile, quiet;
    double peak = 0, end = 0;
    for (size_t i = 0; i < windows.size(); ++i) {
      if (windows[i].client != h.name) continue;
      const auto in = latencies(windows[i], -1);
      hostile.insert(hostile.end(), in.begin(), in.end());
      peak = std::max(peak, windows[i].peak_mib);
      end = std::max(end, windows[i].end_mib);
      for (size_t q : {i - 1, i + 1}) {
        const auto around = latencies(windows[q], -1);
        quiet.insert(quiet.end(), around.begin(), around.end());
      }
    }
    if (hostile.empty() || quiet.empty()) continue;
    const auto [low, high] = ratio_interval(hostile, quiet, 0.99);
    std::printf(
        "%-22s %5.0f / %-10.0f %5.1f / %5.1f / %6.1f (%zu)    %.2f (%.2f to %.2f; quiet %.1f ms)\n",
        h.name.c_str(), peak, end, percentile(hostile, 0.5), percentile(hostile, 0.99),
        percentile(hostile, 1.0), hostile.size(),
        percentile(hostile, 0.99) / percentile(quiet, 0.99), low, high, percentile(quiet, 0.99));
  }
  std::vector<double> all_quiet;
  for (const Window& w : windows)
    if (w.client.empty()) {
      const auto in = latencies(w, -1);
      all_quiet.insert(all_quiet.end(), in.begin(), in.end());
    }
  std::printf("%-22s %5s   %-10s %5.1f / %5.1f / %6.1f (%zu)\n", "(quiet windows)", "", "",
              percentile(all_quiet, 0.5), percentile(all_quiet, 0.99), percentile(all_quiet, 1.0),
              all_quiet.size());
  std::printf("\ndaemon RSS idle %.0f MiB, peak over the run %.0f MiB (ceiling %.0f)\n", idle_mib,
              peak_mib, ceiling_mib);
  for (const Hostile& h : clients) std::printf("  %-22s %s\n", h.name.c_str(), h.what.c_str());
  return check && failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cl = examples::command_line;
  CLI::App app{"Hostile clients against one real placementd beside training jobs (issue #41).",
               "hostile_bench"};
  int victims = 4, rounds = 3;
  double step_ms = 20, seconds = 4;
  bool check = false;
  std::string play_client, socket, only;
  std::vector<std::string> daemon_keys;
  app.add_option("--victims", victims, "jobs training beside the hostile clients")
      ->check(cl::at_least(1))
      ->capture_default_str();
  app.add_option("--step-ms", step_ms, "a victim's step time")
      ->check(CLI::Range(1.0, 1000.0))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "each window's length")
      ->check(CLI::Range(0.5, 600.0))
      ->capture_default_str();
  app.add_option("--rounds", rounds, "times each hostile client runs")
      ->check(cl::at_least(1))
      ->capture_default_str();
  app.add_option("--clients", only, "only these hostile clients (comma-separated names)");
  app.add_option("--daemon-key", daemon_keys,
                 "a line for the daemon's [daemon] section, e.g. policy_threads_per_uid=2 "
                 "(repeatable): the same run against another setting");
  app.add_flag("--check", check, "exit 1 when a functional check fails (never on a time)");
  app.add_option("--play", play_client, "run one hostile client until SIGTERM (the bench's child)");
  app.add_option("--socket", socket, "the daemon's socket, with --play");
  return cl::run(app, argc, argv, [&] {
    if (!play_client.empty()) return play(play_client, socket);
    return run(victims, step_ms, seconds, rounds, only, daemon_keys, check);
  });
}
