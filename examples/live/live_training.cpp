#include "live_training.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include <torch/optim/adam.h>
#include <CLI/CLI.hpp>

#include "command_line.h"
#include "placement/capture.h"
#include "placement/inspection.h"
#include "placement/job.h"
#include "placement/job_outcome.h"

namespace examples {

namespace {

// "encoder.0/aten::lstm" → "encoder.0": the model part an op belongs to (two scope levels).
std::string part_of(const std::string& op_name) {
  const size_t slash = op_name.find('/');
  if (slash == std::string::npos) return "(top level)";
  std::string scope = op_name.substr(0, slash);
  const size_t first = scope.find('.');
  if (first != std::string::npos) {
    const size_t second = scope.find('.', first + 1);
    if (second != std::string::npos) scope.resize(second);
  }
  return scope.empty() ? "(top level)" : scope;
}

std::string ms(const std::optional<double>& seconds) {
  if (!seconds) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f ms", *seconds * 1e3);
  return text;
}

// The daemon's view of this job (placementctl jobs show), or nullopt when it is not reachable.
std::optional<placement::messages::JobSummary> daemon_view(const placement::Job& job) {
  try {
    return job.placementd_view().job;
  } catch (const std::exception& e) {
    std::cerr << "(placementd not reachable for the summary: " << e.what() << ")\n";
    return std::nullopt;
  }
}

// `no_view`: what the summary says of placementd when it has no view of the job.
void print_summary(const placement::Job& job,
                   const std::optional<placement::messages::JobSummary>& view, double wall_s,
                   const char* no_view) {
  const placement::JobStats stats = job.stats();
  std::printf("\n== summary\n");
  std::printf("%-34s %llu in %.1f s\n", "steps", static_cast<unsigned long long>(stats.steps),
              wall_s);
  for (const std::string& notice : job.daemon().notices)
    std::printf("%-34s %s\n", "placementd said at attach", notice.c_str());
  if (view) {
    std::printf("%-34s %s\n", "placementd state", placement::messages::to_string(view->state));
    std::printf("%-34s %s\n", "start placement step time", ms(view->start_step_time_s).c_str());
    std::printf("%-34s %s\n", "best placement step time", ms(view->best_step_time_s).c_str());
    std::printf(
        "%-34s %llu (+%llu rejected by the memory model, %llu repeats scored without running)\n",
        "candidates tried", static_cast<unsigned long long>(view->candidates_tried),
        static_cast<unsigned long long>(view->rejected),
        static_cast<unsigned long long>(view->repeats_scored));
    std::printf("%-34s %llu\n", "steps spent exploring",
                static_cast<unsigned long long>(view->exploration_steps));
    if (view->steps_to_within_2pct && view->seconds_to_within_2pct)
      std::printf("%-34s step %llu, %.1f s after attach\n", "within 2% of the best found by",
                  static_cast<unsigned long long>(*view->steps_to_within_2pct),
                  *view->seconds_to_within_2pct);
    for (const auto& [label, value] : placement::describe_outcome(*view))
      std::printf("%-34s %s\n", label.c_str(), value.c_str());
  } else {
    std::printf("%-34s %s\n", "placementd", no_view);
  }
  std::printf("%-34s %llu (%.1f MB moved in %.1f ms), %llu failed swaps, %llu steps retried\n",
              "placement swaps", static_cast<unsigned long long>(stats.swaps),
              stats.migrated_bytes / 1e6, stats.migration_seconds * 1e3,
              static_cast<unsigned long long>(stats.failed_swaps),
              static_cast<unsigned long long>(stats.retried_steps));
  if (!view)
    std::printf("%-34s %llu (%s, %s)\n", "placement in force",
                static_cast<unsigned long long>(stats.placement_id), stats.reason.c_str(),
                stats.state.c_str());
  std::printf("where it puts each part of the model:\n");
  std::map<std::string, std::map<std::string, int>> parts;
  const placement::Placement& p = job.placement();
  for (size_t i = 0; i < job.graph().ops.size(); ++i)
    ++parts[part_of(job.graph().ops[i].name)][job.devices().devices[p.device_of_op[i]].name()];
  for (const auto& [part, devices] : parts) {
    std::printf("  %-24s", part.c_str());
    for (const auto& [device, ops] : devices) std::printf(" %s: %d ops", device.c_str(), ops);
    std::printf("\n");
  }
  // Replicas: what carried each device's gradients between the ranks (NCCL, or Gloo and why).
  for (const auto& [device, route] : stats.collectives)
    std::printf("%-34s %s\n", ("gradients on " + device).c_str(), route.c_str());
}

// Trains `m` as `o` says; what loading or training throws reaches live_main, which reports it.
int run_live(const LiveOptions& o, const ExampleModel& m) {
  // A .pt2 (torch.export.save) or a TorchScript file: placement::Model tells them apart.
  const placement::Model model = placement::Model::load(o.model);
  placement::JobOptions options;
  options.socket_path = o.socket;
  options.devices = o.devices;
  options.memory_bytes = static_cast<uint64_t>(o.memory_gib * static_cast<double>(1ull << 30));
  options.expected_steps = static_cast<uint64_t>(o.steps);
  options.use_daemon = o.use_daemon;
  options.profile_graph_file = o.profiles_file;
  options.replicas.timeout_ms = o.replica_timeout_ms;
  if (o.start == "interleaved") {
    const size_t ops = placement::capture(model, m.example_inputs).ops.size();
    const int devices = static_cast<int>(o.devices.empty() ? 2 : o.devices.size());
    for (size_t i = 0; i < ops; ++i)
      options.start_device_of_op.push_back(static_cast<int>(i % devices));
  }
  if (!o.home_parameters.empty()) {
    const size_t colon = o.home_parameters.rfind(':');
    const bool stream = colon != std::string::npos && o.home_parameters.substr(colon) == ":stream";
    const std::string device = stream ? o.home_parameters.substr(0, colon) : o.home_parameters;
    const std::vector<std::string> names =
        o.devices.empty() ? std::vector<std::string>{"cpu:0", "cpu:1"} : o.devices;
    const auto canonical = [](const std::string& name) {
      return placement::parse_device_name(name).name();
    };
    const auto at = std::find_if(names.begin(), names.end(), [&](const std::string& name) {
      return canonical(name) == canonical(device);
    });
    if (at == names.end())
      throw std::invalid_argument("--home-parameters: " + device + " is not one of the devices");
    options.start_residence_rules.parameters[""] = {
        static_cast<int>(at - names.begin()),
        stream ? placement::Fetch::kStream : placement::Fetch::kPersist};
  }
  const auto started = std::chrono::steady_clock::now();
  auto job = placement::attach(o.job, model, m.example_inputs, options);
  const auto status = job->daemon();
  // Data-parallel replicas (torchrun's environment): rank r of n trains on batches r, n + r, ...;
  // only rank 0 talks to placementd, whose directives hold for every rank.
  const placement::JobStats first = job->stats();
  const bool talks = o.use_daemon && first.rank == 0;
  std::printf("job '%s': %zu ops on %zu devices; placementd %s\n", o.job.c_str(),
              job->graph().ops.size(), job->devices().size(),
              !o.use_daemon ? "not used"
              : !talks      ? "of rank 0, which places every rank"
              : status.connected
                  ? ("session " + std::to_string(status.session)).c_str()
                  : ("not reachable (" + status.last_error + "); training anyway").c_str());
  if (first.world_size > 1)
    std::printf("replica: rank %d of %d in group %s\n", first.rank, first.world_size,
                first.replica_group.c_str());
  std::fflush(stdout);
  torch::optim::Adam optimizer(job->parameters(), torch::optim::AdamOptions(o.learning_rate));
  FILE* losses = o.losses_file.empty() ? nullptr : std::fopen(o.losses_file.c_str(), "w");
  if (!o.losses_file.empty() && !losses) throw std::runtime_error("cannot write " + o.losses_file);
  FILE* placements =
      o.placements_file.empty() ? nullptr : std::fopen(o.placements_file.c_str(), "w");
  if (!o.placements_file.empty() && !placements)
    throw std::runtime_error("cannot write " + o.placements_file);
  double window_s = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    const Batch batch = m.batch(step * first.world_size + first.rank);
    const at::Tensor loss = job->step(
        batch.inputs,
        [&](const std::vector<c10::IValue>& out) {
          return m.loss(out.at(0).toTensor(), batch.target);
        },
        optimizer);
    const double value = loss.item<double>();
    if (losses) std::fprintf(losses, "%a\n", value);
    if (placements)
      std::fprintf(placements, "%llu\n",
                   static_cast<unsigned long long>(job->stats().placement_id));
    window_s += job->stats().last_step_s;
    if ((step + 1) % o.log_every == 0 || step + 1 == o.steps) {
      const placement::JobStats s = job->stats();
      const auto d = job->daemon();
      std::printf("step %6lld  loss %.4f  %7.2f ms/step  placement %llu (%s, %s)%s\n",
                  static_cast<long long>(step + 1), value, 1e3 * window_s / o.log_every,
                  static_cast<unsigned long long>(s.placement_id), s.reason.c_str(),
                  s.state.c_str(), talks && !d.connected ? "  [placementd away]" : "");
      std::fflush(stdout);
      window_s = 0;
    }
  }
  if (losses) std::fclose(losses);
  if (placements) std::fclose(placements);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::optional<placement::messages::JobSummary> view;
  if (talks && job->daemon().connected) view = daemon_view(*job);
  print_summary(*job, view, wall_s,
                !o.use_daemon ? "not used"
                : talks       ? "not reachable: trained on the placement in force"
                              : "rank 0's session");
  // Replicas compare it: every rank's parameters, bit for bit.
  std::printf("parameters digest: %s\n", placement::parameters_digest(job->parameters()).c_str());
  const auto final_status = job->detach();
  if (talks) {
    std::string answer = "no answer";
    if (const auto& d = final_status.detached) {
      char best[64] = "none";
      if (d->best_step_time_s)
        std::snprintf(best, sizeof(best), "%.6f s/step", *d->best_step_time_s);
      answer = std::string("best ") + best + (d->persisted ? ", persisted" : ", not persisted");
    }
    std::printf("detached: %s (attached %llu time%s)\n", answer.c_str(),
                static_cast<unsigned long long>(final_status.attaches),
                final_status.attaches == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace

int live_main(int argc, char** argv, const ExampleProgram& program) {
  CLI::App app{program.description, program.name};
  LiveOptions o;
  o.job = program.job;
  app.add_option("--model", o.model,
                 ".pt2 (tests/models/export_models.py) or TorchScript file (make_models.py)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--steps", o.steps, "training steps")
      ->capture_default_str()
      ->check(command_line::at_least(1));
  app.add_option("--job", o.job, "job name")->capture_default_str();
  app.add_option("--socket", o.socket,
                 "placementd socket (default: $PLACEMENTD_SOCKET or the system default)");
  app.add_option("--devices", o.devices, "devices, comma-separated (default: cpu:0,cpu:1)")
      ->delimiter(',')
      ->check(command_line::device_name());
  app.add_option("--memory-gib", o.memory_gib,
                 "memory per device for placementd's memory model, GiB (default: CPU devices share "
                 "the host's; "
                 "needed for cuda)")
      ->check(command_line::positive());
  app.add_option("--log-every", o.log_every, "print progress every N steps")
      ->capture_default_str()
      ->check(command_line::at_least(1));
  app.add_option("--seed", o.seed, "data and initialisation seed")->capture_default_str();
  app.add_option("--start", o.start,
                 "start placement: every op on the first device, or consecutive ops alternating")
      ->check(CLI::IsMember({"first", "interleaved"}))
      ->capture_default_str();
  app.add_option("--profiles", o.profiles_file,
                 "profiled capture of this model (placementctl capture MODEL --input ... --profile "
                 "cpu -o FILE): "
                 "lets placementd's simulator time placements ([policy] warm_start = "
                 "\"simulator\"); default: none")
      ->check(CLI::ExistingFile);
  app.add_option("--losses", o.losses_file,
                 "write each step's loss (hex float) to this file; default: none");
  app.add_option("--replica-timeout-ms", o.replica_timeout_ms,
                 "with torchrun's environment (WORLD_SIZE > 1): how long a rank waits for the "
                 "others before it "
                 "fails")
      ->capture_default_str()
      ->check(command_line::at_least(1));
  app.add_option(
      "--placements", o.placements_file,
      "write the placement each step ran under (placementd's id) to this file; default: none");
  app.add_option("--lr", o.learning_rate, "Adam learning rate")->capture_default_str();
  app.add_option("--home-parameters", o.home_parameters,
                 "DEVICE or DEVICE:stream: every parameter, its gradient and Adam's state live "
                 "there and its update runs there; ops elsewhere read a copy kept between steps, "
                 "or with :stream fetched for each use (default: where its first op runs)");
  bool no_daemon = false;
  app.add_flag("--no-daemon", no_daemon, "train without placementd (the control run)");
  return command_line::run(app, argc, argv, [&] {
    o.use_daemon = !no_daemon;
    torch::manual_seed(static_cast<int64_t>(o.seed));
    return run_live(o, program.make_model(o));
  });
}

}  // namespace examples
