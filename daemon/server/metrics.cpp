#include "server/metrics.h"

#include <unistd.h>

#include <sstream>

#include <prometheus/text_serializer.h>

#include "server/service_context.h"
#include "server/version.h"

namespace placementd {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;
namespace messages = placement::messages;

MetricFamily family(const char* name, const char* help, MetricType type) {
  return {name, help, type, {}};
}

void add(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

// `labels` and more.
Labels with(Labels labels, std::initializer_list<ClientMetric::Label> more) {
  labels.insert(labels.end(), more);
  return labels;
}

void add_jobs(const ServiceContext& ctx, std::vector<MetricFamily>& out) {
  MetricFamily info =
      family("placementd_job_info",
             "An attached job: its uid and policy, and a replica's rank and group (value 1)",
             MetricType::Gauge);
  MetricFamily state =
      family("placementd_job_state", "1 for the job's state, 0 for the others", MetricType::Gauge);
  MetricFamily step =
      family("placementd_job_step_time_seconds",
             "Median step time of the start placement, the best one found, and the one in force",
             MetricType::Gauge);
  MetricFamily low = family(
      "placementd_job_step_time_low_seconds",
      "Lower end of the 95% confidence interval of the start's and the best's median step time",
      MetricType::Gauge);
  MetricFamily high = family(
      "placementd_job_step_time_high_seconds",
      "Upper end of the 95% confidence interval of the start's and the best's median step time",
      MetricType::Gauge);
  MetricFamily speedup =
      family("placementd_job_speedup_ratio", "Start over best median step time", MetricType::Gauge);
  MetricFamily realized = family("placementd_job_realized_speedup_ratio",
                                 "The start's median step time times the job's batches, over the "
                                 "time its steps took: what placementd gained it so far",
                                 MetricType::Gauge);
  MetricFamily beyond_best = family(
      "placementd_job_beyond_best_seconds",
      "What the steps off the best placement took beyond its median step time", MetricType::Gauge);
  MetricFamily candidates =
      family("placementd_job_candidates", "Placements the job has run", MetricType::Gauge);
  MetricFamily max_candidates = family("placementd_job_max_candidates",
                                       "exploration.max_candidates in force", MetricType::Gauge);
  MetricFamily overhead = family("placementd_job_exploration_overhead_ratio",
                                 "What exploration and profiling cost beyond the placement in "
                                 "force's step time, over the time measured (what "
                                 "max_overhead_fraction bounds)",
                                 MetricType::Gauge);
  MetricFamily budget = family("placementd_job_exploration_budget_used_ratio",
                               "Fraction of the exploration budget spent (1: exploiting for good)",
                               MetricType::Gauge);
  MetricFamily steps =
      family("placementd_job_steps_total", "Steps the job reported", MetricType::Counter);
  MetricFamily failed = family("placementd_job_failed_steps_total",
                               "Steps that failed under a candidate", MetricType::Counter);
  MetricFamily exploring = family("placementd_job_exploration_steps_total",
                                  "Steps run under exploration candidates", MetricType::Counter);
  MetricFamily reexplorations =
      family("placementd_job_reexplorations_total",
             "Times a drift in step time started exploring again", MetricType::Counter);
  MetricFamily attached =
      family("placementd_job_attached_seconds", "Time since the job attached", MetricType::Gauge);

  for (const auto& job : ctx.jobs.attached()) {
    const messages::JobSummary s = job->live.summary();
    const Labels id{{"job_id", std::to_string(s.id)}, {"job_name", s.name}};
    Labels about = with(id, {{"uid", std::to_string(s.uid)},
                             {"grouper", s.grouper},
                             {"placer", s.placer},
                             {"algorithm", s.algorithm}});
    // A replica's rank and group, on the info series only: joined on job_id, they match one
    // group's jobs across the nodes' daemons without multiplying every other series.
    if (s.replica)
      about = with(about, {{"replica_rank", std::to_string(s.replica->rank)},
                           {"replica_world_size", std::to_string(s.replica->world_size)},
                           {"replica_group", s.replica->group}});
    add(info, about, 1);
    for (messages::JobState st : messages::all_job_states())
      add(state, with(id, {{"state", to_string(st)}}), st == s.state ? 1 : 0);
    const std::pair<const char*, const std::optional<double>*> times[] = {
        {"start", &s.start_step_time_s},
        {"best", &s.best_step_time_s},
        {"current", &s.current_step_time_s}};
    for (const auto& [which, value] : times)
      if (*value) add(step, with(id, {{"placement", which}}), **value);
    const std::pair<const char*, const std::optional<std::array<double, 2>>*> intervals[] = {
        {"start", &s.start_step_time_interval_s}, {"best", &s.best_step_time_interval_s}};
    for (const auto& [which, value] : intervals)
      if (*value) {
        add(low, with(id, {{"placement", which}}), (**value)[0]);
        add(high, with(id, {{"placement", which}}), (**value)[1]);
      }
    if (s.speedup) add(speedup, id, *s.speedup);
    if (s.realized_speedup) add(realized, id, *s.realized_speedup);
    if (s.beyond_best_s) add(beyond_best, id, *s.beyond_best_s);
    add(candidates, id, static_cast<double>(s.candidates_tried));
    add(max_candidates, id, static_cast<double>(s.max_candidates));
    add(overhead, id, s.exploration_overhead);
    add(budget, id, s.budget_used);
    add(steps, id, static_cast<double>(s.steps));
    add(failed, id, static_cast<double>(s.failed_steps));
    add(exploring, id, static_cast<double>(s.exploration_steps));
    add(reexplorations, id, static_cast<double>(s.reexplorations));
    add(attached, id, s.attached_s);
  }
  for (MetricFamily* f : {&info, &state, &step, &low, &high, &speedup, &realized, &beyond_best,
                          &candidates, &max_candidates, &overhead, &budget, &steps, &failed,
                          &exploring, &reexplorations, &attached})
    out.push_back(std::move(*f));
}

}  // namespace

std::string render_metrics(const ServiceContext& ctx) {
  std::vector<MetricFamily> out;
  MetricFamily build =
      family("placementd_build_info", "The daemon's version and build features (value 1)",
             MetricType::Gauge);
  add(build, {{"version", kVersion}, {"features", kBuildFeatures}}, 1);
  out.push_back(std::move(build));
  MetricFamily uptime =
      family("placementd_uptime_seconds", "Time since the daemon started", MetricType::Gauge);
  add(uptime, {},
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count());
  out.push_back(std::move(uptime));

  const Counters::Snapshot c = ctx.counters.snapshot();
  const std::tuple<const char*, const char*, MetricType, double> daemon[] = {
      {"placementd_connections", "Connections open now", MetricType::Gauge,
       double(c.connections_open)},
      {"placementd_connections_total", "Connections accepted", MetricType::Counter,
       double(c.connections_total)},
      {"placementd_frames_received_total", "Well-framed messages received", MetricType::Counter,
       double(c.frames_received)},
      {"placementd_step_reports_total", "Step reports received", MetricType::Counter,
       double(c.reports_received)},
      {"placementd_protocol_errors_total", "Requests answered with an error, and broken frames",
       MetricType::Counter, double(c.protocol_errors)},
      {"placementd_store_failed_writes_total", "State files that could not be written",
       MetricType::Counter, double(ctx.store.failed_writes())},
      {"placementd_jobs", "Jobs attached now", MetricType::Gauge,
       double(ctx.jobs.attached_count())},
  };
  for (const auto& [name, help, type, value] : daemon) {
    MetricFamily f = family(name, help, type);
    add(f, {}, value);
    out.push_back(std::move(f));
  }
  for (MetricFamily& f : ctx.policy_latency.collect()) out.push_back(std::move(f));
  add_jobs(ctx, out);

  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, out);
  return text.str();
}

}  // namespace placementd
