// placementctl: inspect and steer placementd.

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "placement/client.h"
#include "toml/source_pos.h"

namespace {

// `placementctl capture ...` runs placementctl-capture from the same directory (calibrate:
// placementctl-calibrate), so that only that helper loads LibTorch.
int run_helper(const std::string& command, const std::vector<std::string>& args) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string helper = (self.parent_path() / ("placementctl-" + command)).string();
  if (ec || ::access(helper.c_str(), X_OK) != 0) {
    std::cerr << "placementctl: " << command << " needs " << helper
              << ", which this build does not have (built without LibTorch?)\n";
    return 1;
  }
  std::vector<char*> argv{const_cast<char*>(helper.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(helper.c_str(), argv.data());
  std::cerr << "placementctl: cannot run " << helper << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"placementctl: inspect and steer placementd"};
  app.require_subcommand(1);
  // Global options go before or after the subcommand (`placementctl jobs --json`, as systemctl,
  // kubectl and git take them): a subcommand hands what it does not know to its parent.
  app.fallthrough();
  placementctl::Globals g;
  app.add_option("--socket", g.socket,
                 "placementd socket (default: $PLACEMENTD_SOCKET, then the system default)");
  app.add_flag("--json", g.json, "print JSON instead of tables");
  app.add_option("--timeout-ms", g.timeout_ms, "limit for each request")
      ->check(CLI::PositiveNumber);

  auto* status = app.add_subcommand("status", "daemon status");
  auto* jobs = app.add_subcommand(
      "jobs", "attached and recently finished jobs (your own; all of them for admins)");
  bool all = false;
  jobs->add_flag("--all", all, "every user's jobs (root or the admin group)");
  bool finished = false;
  jobs->add_flag("--finished", finished, "also the last 32 jobs that detached");
  auto* show = jobs->add_subcommand("show", "one job in detail");
  uint64_t job_id = 0;
  show->add_option("ID", job_id, "job id (see `placementctl jobs`)")->required();
  std::string job_plot;
  show->add_option("--plot", job_plot,
                   "write the learning curve (step time per candidate, best so far) as SVG");
  auto* plugins =
      app.add_subcommand("plugins", "loaded plugins with their hyperparameters, and skipped files");
  auto* reload = app.add_subcommand(
      "reload", "reload the daemon's config and plugins (root or the admin group)");
  auto* config = app.add_subcommand("config", "configuration files");
  config->require_subcommand(1);
  auto* check = config->add_subcommand("check", "check a config file and its plugins offline");
  std::string file;
  check->add_option("FILE", file, "config file")->required()->check(CLI::ExistingFile);
  auto* simulate =
      app.add_subcommand("simulate", "predict step time and memory of a placement (offline)");
  std::string graph, topology, placement_file;
  simulate->add_option("--graph", graph, "captured OpGraph JSON")
      ->required()
      ->check(CLI::ExistingFile);
  simulate->add_option("--devices", topology, "device topology TOML")
      ->required()
      ->check(CLI::ExistingFile);
  simulate
      ->add_option("--placement", placement_file,
                   "placement JSON (default: every single-device placement)")
      ->check(CLI::ExistingFile);
  placementd::sim::MathModes math;
  // PyTorch's switches, for the ops the cost model times (no profile for the device's kind).
  auto math_flags = [](CLI::App* command, placementd::sim::MathModes& modes) {
    command->add_flag("--matmul-tf32,!--no-matmul-tf32", modes.matmul_tf32,
                      "the job runs float32 matrix products on TF32 tensor cores "
                      "(torch.backends.cuda.matmul.allow_tf32; PyTorch's default: off)");
    command->add_flag("--conv-tf32,!--no-conv-tf32", modes.conv_tf32,
                      "the job runs float32 convolutions on TF32 tensor cores "
                      "(torch.backends.cudnn.allow_tf32; PyTorch's default: on)");
  };
  math_flags(simulate, math);
  auto replica_flags = [](CLI::App* command, placementctl::ReplicaArgs& r) {
    command
        ->add_option("--replicas", r.replicas,
                     "data-parallel replicas: the placement on N nodes, each step's gradients "
                     "averaged by a ring "
                     "all-reduce over the topology's [[link]] between = [\"node\", \"node\"]")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    command
        ->add_option("--bucket-mib", r.bucket_mib,
                     "--replicas: gradients per all-reduce, per device")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 1e6));
    command->add_flag(
        "--overlap", r.overlap,
        "--replicas: start each bucket's all-reduce during backward, once its gradients are ready "
        "(torch's DistributedDataParallel); default: after backward, as placementd's SDK does");
  };
  placementctl::ReplicaArgs sim_replicas;
  replica_flags(simulate, sim_replicas);
  bool by_kind = false;
  simulate
      ->add_flag("--by-kind", by_kind,
                 "instead: the cost model against the graph's measured profiles, forward and "
                 "backward per op "
                 "kind, on each device with a spec")
      ->excludes("--placement");
  auto* optimize =
      app.add_subcommand("optimize", "learn a placement against the simulator (offline)");
  placementctl::OptimizeArgs opt;
  math_flags(optimize, opt.math);
  replica_flags(optimize, opt.replicas);
  optimize->add_option("--graph", opt.graph, "captured OpGraph JSON")
      ->required()
      ->check(CLI::ExistingFile);
  optimize->add_option("--devices", opt.topology, "device topology TOML")
      ->required()
      ->check(CLI::ExistingFile);
  optimize->add_option("--grouper", opt.grouper, "grouper plugin")->capture_default_str();
  optimize->add_option("--placer", opt.placer, "placer plugin")->capture_default_str();
  optimize->add_option("--algorithm", opt.algorithm, "algorithm plugin")->capture_default_str();
  optimize
      ->add_option("--max-groups", opt.max_groups,
                   "the most groups the placer is given ([policy] max_groups)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  optimize->add_option("--budget", opt.budget, "candidates to evaluate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  optimize->add_option("--seed", opt.seed, "random seed (same seed, same result)")
      ->capture_default_str();
  optimize->add_option("--noise", opt.noise, "relative std. dev. of the simulated measurement")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  optimize->add_option("--imitate", opt.imitate,
                       "warm start: the policy first learns this baseline placer's placement (e.g. "
                       "list_scheduling), "
                       "or 'simulator': the best placement a search of a planning model finds");
  optimize
      ->add_option("--search-evaluations", opt.search_evaluations,
                   "--imitate simulator: placements the search simulates")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  optimize
      ->add_option(
          "--search-ensemble", opt.search_ensemble,
          "--imitate simulator: copies of the planning model, each off by a log-normal 0.2, that "
          "the search also times placements on (it minimises their mean; 0: the model alone)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  optimize
      ->add_option(
          "--model-error", opt.model_error,
          "log-normal error of the planning model's op times and bandwidths, which the warm "
          "start and the baseline placers plan on (their placements and the candidates are timed "
          "on the exact simulator)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 2.0));
  optimize
      ->add_option(
          "--selection", opt.selection,
          "how the policy's best is chosen among noisy measurements: 'model' (each measurement "
          "corrected by the planning model as far as the measurements show it is right) or "
          "'measured' (the lowest measurement)")
      ->capture_default_str()
      ->check(CLI::IsMember(placementd::offline::selection_names()));
  optimize
      ->add_option("--imitation-steps", opt.imitation_steps,
                   "supervised steps of the warm start at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  optimize->add_option("--set", opt.settings, "plugin hyperparameter KIND.KEY=VALUE (repeatable)");
  optimize->add_option("--plugin-dir", opt.plugin_dirs,
                       "plugin directory (repeatable; default: the installed plugins)");
  optimize->add_option("--out", opt.out, "write the best placement to this JSON file");
  optimize->add_option("--plot", opt.plot, "write the learning curve to this SVG file");
  optimize->add_flag("--json", g.json, "print one JSON object instead of tables");
  optimize->add_option("--progress", opt.progress, "progress bar on stderr")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  auto* capture = app.add_subcommand(
      "capture", "capture a model (.pt2 or TorchScript) as an OpGraph (runs placementctl-capture)");
  capture->prefix_command();  // everything after `capture` goes to the helper as it is
  capture->fallthrough(false);
  capture->set_help_flag();  // --help too
  auto* calibrate = app.add_subcommand(
      "calibrate", "measure this CPU for the cost model (runs placementctl-calibrate)");
  calibrate->prefix_command();
  calibrate->fallthrough(false);
  calibrate->set_help_flag();
  CLI11_PARSE(app, argc, argv);

  if (*capture) return run_helper("capture", capture->remaining());
  if (*calibrate) return run_helper("calibrate", calibrate->remaining());
  spdlog::set_level(spdlog::level::err);  // plugin scanning in `config check` logs through spdlog
  try {
    if (*status) return placementctl::status(g);
    if (*show) return placementctl::job_show(g, job_id, job_plot);
    if (*jobs) return placementctl::jobs(g, all, finished);
    if (*plugins) return placementctl::plugins(g);
    if (*reload) return placementctl::reload(g);
    if (*check) return placementctl::config_check(g, file);
    if (*simulate)
      return by_kind
                 ? placementctl::compare_costs(g, graph, topology, math)
                 : placementctl::simulate(g, graph, topology, placement_file, math, sim_replicas);
    if (*optimize) return placementctl::optimize(g, opt);
  } catch (const placementd::ConfigInvalid& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const placement::ServerError& e) {
    std::cerr << "placementctl: placementd refused: " << e.what() << "\n";
    return 2;
  } catch (const placement::ConnectionError& e) {
    std::cerr << "placementctl: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "placementctl: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
