// placement._placement: the C++ job API (placement/job.h) for Python training loops. The Python
// package (placement/__init__.py) wraps it: it traces an nn.Module, adapts torch.optim optimizers
// and gives errors their Python types. Built with the pybind11 that the torch wheel ships and its
// ABI flags, so that a torch.jit.ScriptModule crosses as the torch::jit::Module it holds.

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/jit/python/module_python.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <nlohmann/json.hpp>

#include "placement/capture.h"
#include "placement/job.h"
#include "placement/job_outcome.h"
#include "placement/serialization.h"

namespace py = pybind11;

namespace {

using placement::Job;
using placement::JobOptions;

// A Python exception raised in a callback (the loss function, the optimizer) while Job::step runs
// without the GIL. It crosses the C++ code with the Python message (a failing step's report to
// placementd carries it) and is raised again, as it was, in Python. KeyboardInterrupt and
// SystemExit (BaseExceptions that are no Exception) cross as StepInterrupted: the step ends at
// once. torch.OutOfMemoryError and torch.AcceleratorError cross as LibTorch's own types, so a
// loss that runs out of a device's memory under a placementd placement is retried like a failing
// forward; any other error is the user's when the outputs are where the job's own placement puts
// them (placement::LossFunction).
class PythonError {
 public:
  // Made with the GIL held: the message is formatted then, not where the GIL is released.
  explicit PythonError(py::error_already_set e)
      : message_(e.what()), error_(std::make_shared<py::error_already_set>(std::move(e))) {}
  virtual ~PythonError() = default;
  void restore() const { error_->restore(); }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
  std::shared_ptr<py::error_already_set> error_;
};

class PythonCallbackError : public std::runtime_error, public PythonError {
 public:
  explicit PythonCallbackError(py::error_already_set e)
      : std::runtime_error(""), PythonError(std::move(e)) {}
  const char* what() const noexcept override { return message().c_str(); }
};

class PythonInterrupt : public placement::StepInterrupted, public PythonError {
 public:
  explicit PythonInterrupt(py::error_already_set e)
      : placement::StepInterrupted(""), PythonError(std::move(e)) {}
  const char* what() const noexcept override { return message().c_str(); }
};

// A device's failure raised in Python (torch.OutOfMemoryError, torch.AcceleratorError) as
// LibTorch's own type, c10::OutOfMemoryError or c10::AcceleratorError: the placement's, not the
// user's. `code` is what the base type takes before the message (the accelerator's error code).
template <typename Base, typename... Code>
class PythonDeviceError final : public Base, public PythonError {
 public:
  PythonDeviceError(py::error_already_set&& e, const std::string& message, Code... code)
      : Base({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, code..., message),
        PythonError(std::move(e)) {}
  const char* what() const noexcept override { return message().c_str(); }
};

// torch's exception class `name`, looked up once (with the GIL held); never released, as the
// interpreter may be gone when statics are destroyed.
py::handle torch_exception(const char* name) {
  return py::object(py::module_::import("torch").attr(name)).release();
}

template <typename F>
auto with_gil(F&& f) {
  py::gil_scoped_acquire gil;
  try {
    return f();
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_Exception)) throw PythonInterrupt(std::move(e));
    static const py::handle out_of_memory = torch_exception("OutOfMemoryError");
    static const py::handle accelerator = torch_exception("AcceleratorError");
    const std::string message = e.what();
    if (e.matches(out_of_memory))
      throw PythonDeviceError<c10::OutOfMemoryError>(std::move(e), message);
    if (e.matches(accelerator))
      throw PythonDeviceError<c10::AcceleratorError, int32_t>(std::move(e), message, 0);
    throw PythonCallbackError(std::move(e));
  }
}

// A Python object that C++ code without the GIL may copy around and drop: released under the GIL.
struct HeldObject {
  explicit HeldObject(py::object o) : object(std::move(o)) {}
  ~HeldObject() {
    py::gil_scoped_acquire gil;
    object = py::object();
  }
  py::object object;
};

// torch.optim's optimizers through their Python API, and what the package's _TorchOptim knows of
// torch.optim's layout (state filed under the parameter) for the rest.
class PythonOptimizer final : public placement::StepOptimizer {
 public:
  PythonOptimizer(py::object optimizer, py::object adapter)
      : optimizer_(std::move(optimizer)), adapter_(std::move(adapter)) {}
  void step() override {
    with_gil([&] { optimizer_.attr("step")(); });
  }
  void zero_grad() override {
    with_gil([&] { optimizer_.attr("zero_grad")(); });
  }
  bool steps_parameters_apart() const override {
    return with_gil(
        [&] { return adapter_.attr("steps_parameters_apart")(optimizer_).cast<bool>(); });
  }
  void step_parameters(const std::vector<at::Tensor>& parameters) override {
    with_gil([&] { adapter_.attr("step_parameters")(optimizer_, parameters); });
  }
  uint64_t move_state(const std::vector<at::Tensor>& parameters,
                      const std::vector<c10::Device>& devices) override {
    StagedState staged = *stage_state(parameters, devices);
    staged.install();
    return staged.bytes;
  }
  std::optional<StagedState> stage_state(const std::vector<at::Tensor>& parameters,
                                         const std::vector<c10::Device>& devices) override {
    return with_gil([&] {
      py::list names;
      for (const c10::Device& d : devices) names.append(d.str());
      const py::tuple staged = adapter_.attr("stage_state")(optimizer_, parameters, names);
      auto copies = std::make_shared<HeldObject>(staged[0]);
      StagedState out;
      out.bytes = staged[1].cast<uint64_t>();
      // Stored with PyDict_SetItem, which runs no Python code: a Ctrl-C cannot stop the install
      // half way, as it could a Python loop (it is raised at the job's next Python call).
      out.install = [copies] {
        py::gil_scoped_acquire gil;
        for (const py::handle entry : copies->object) {
          const py::tuple t = py::reinterpret_borrow<py::tuple>(entry);
          if (PyDict_SetItem(t[0].ptr(), t[1].ptr(), t[2].ptr()) != 0)
            throw py::error_already_set();
        }
      };
      return out;
    });
  }
  // Host copies of the state and what restores it.
  std::optional<SavedState> save_state(const std::vector<at::Tensor>& parameters) override {
    return with_gil([&] {
      const py::tuple saved = adapter_.attr("save_state")(optimizer_, parameters);
      auto restore = std::make_shared<HeldObject>(saved[0]);
      SavedState out;
      out.bytes = saved[1].cast<uint64_t>();
      out.restore = [restore] { with_gil([&] { restore->object(); }); };
      return std::optional<SavedState>(std::move(out));
    });
  }
  // By torch.optim's class and the group's options.
  std::optional<uint64_t> expected_state_bytes(const at::Tensor& parameter) override {
    return with_gil([&] {
      const py::object bytes = adapter_.attr("expected_state_bytes")(optimizer_, parameter);
      return bytes.is_none() ? std::nullopt : std::optional<uint64_t>(bytes.cast<uint64_t>());
    });
  }
  // torch.optim files each parameter's state under the parameter: its tensors.
  std::vector<std::vector<at::Tensor>> state_tensors(
      const std::vector<at::Tensor>& parameters) override {
    return with_gil([&] {
      std::vector<std::vector<at::Tensor>> out(parameters.size());
      const py::object state = optimizer_.attr("state");
      for (size_t i = 0; i < parameters.size(); ++i) {
        const py::object entry = state.attr("get")(py::cast(parameters[i]));
        if (!py::isinstance<py::dict>(entry)) continue;
        for (const auto& item : py::reinterpret_borrow<py::dict>(entry))
          if (THPVariable_Check(item.second.ptr()))
            out[i].push_back(THPVariable_Unpack(item.second.ptr()));
      }
      return out;
    });
  }

 private:
  py::object optimizer_;
  py::object adapter_;
};

// The index of device `name` among the job's devices (as JobOptions takes them: empty, two
// logical CPU devices).
int device_index(const std::vector<std::string>& devices, const std::string& name,
                 const std::string& what) {
  const std::vector<std::string> chosen =
      devices.empty() ? std::vector<std::string>{"cpu:0", "cpu:1"} : devices;
  std::string wanted;
  try {
    wanted = placement::parse_device_name(name).name();
  } catch (const std::invalid_argument& e) {
    throw py::value_error(what + ": " + e.what());
  }
  for (size_t i = 0; i < chosen.size(); ++i)
    if (placement::parse_device_name(chosen[i]).name() == wanted) return static_cast<int>(i);
  throw py::value_error(what + ": '" + name + "' is not one of the job's devices");
}

// Residence rules from Python: {module prefix: (device, "persist" | "stream")} for parameters and
// {module prefix: ("keep" | "recompute" | "offload", device or "")} for activations.
placement::ResidenceRules residence_rules(
    const std::vector<std::string>& devices,
    const std::map<std::string, std::pair<std::string, std::string>>& parameters,
    const std::map<std::string, std::pair<std::string, std::string>>& activations) {
  placement::ResidenceRules rules;
  for (const auto& [prefix, rule] : parameters) {
    const std::string what = "residence parameters['" + prefix + "']";
    placement::ParameterResidence r;
    r.home = device_index(devices, rule.first, what);
    if (rule.second == "stream")
      r.fetch = placement::Fetch::kStream;
    else if (rule.second != "persist")
      throw py::value_error(what + ": fetch is 'persist' or 'stream', not '" + rule.second + "'");
    rules.parameters[prefix] = r;
  }
  for (const auto& [prefix, rule] : activations) {
    const std::string what = "residence activations['" + prefix + "']";
    placement::ActivationResidence r;
    if (rule.first == "offload") {
      r.policy = placement::ActivationPolicy::kOffload;
      r.device = device_index(devices, rule.second, what);
    } else if (rule.first == "recompute") {
      r.policy = placement::ActivationPolicy::kRecompute;
    } else if (rule.first != "keep") {
      throw py::value_error(what + ": 'keep', 'recompute' or ('offload', device), not '" +
                            rule.first + "'");
    }
    if (r.policy != placement::ActivationPolicy::kOffload && !rule.second.empty())
      throw py::value_error(what + ": only an offload names a device");
    rules.activations[prefix] = r;
  }
  return rules;
}

// The model a job runs: a placement Model (the export front end's, built in Python) or a
// ScriptModule (the TorchScript front end's).
placement::Model model_of(const py::object& module) {
  if (py::isinstance<placement::Model>(module)) return module.cast<placement::Model>();
  std::optional<torch::jit::Module> m = torch::jit::as_module(module);
  if (!m) throw py::type_error("expected a placement Model or a torch.jit.ScriptModule");
  return placement::Model::from_torchscript(*m);
}

std::vector<at::Tensor> tensors(const py::sequence& values, const char* what) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < values.size(); ++i) {
    py::object v = values[i];
    if (!THPVariable_Check(v.ptr()))
      throw py::type_error(std::string(what) + "[" + std::to_string(i) + "] is a " +
                           std::string(py::str(py::type::handle_of(v).attr("__name__"))) +
                           ", not a torch.Tensor");
    out.push_back(THPVariable_Unpack(v.ptr()));
  }
  return out;
}

py::object outputs_to_python(const std::vector<c10::IValue>& outputs) {
  if (outputs.size() == 1) return torch::jit::toPyObject(outputs[0]);
  py::tuple out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) out[i] = torch::jit::toPyObject(outputs[i]);
  return out;
}

placement::CudaCollectives parse_cuda_collectives(const std::string& name) {
  if (name == "auto") return placement::CudaCollectives::kAuto;
  if (name == "nccl") return placement::CudaCollectives::kNccl;
  if (name == "gloo") return placement::CudaCollectives::kGloo;
  throw py::value_error("cuda_collectives is 'auto', 'nccl' or 'gloo', not '" + name + "'");
}

py::dict stats_dict(const placement::JobStats& s) {
  py::dict d;
  d["steps"] = s.steps;
  d["swaps"] = s.swaps;
  d["migrated_bytes"] = s.migrated_bytes;
  d["migration_seconds"] = s.migration_seconds;
  d["retried_steps"] = s.retried_steps;
  d["guarded_updates"] = s.guarded_updates;
  d["undone_updates"] = s.undone_updates;
  d["guard_seconds"] = s.guard_seconds;
  d["overlapped_updates"] = s.overlapped_updates;
  d["overlapped_update_seconds"] = s.overlapped_update_seconds;
  d["failed_swaps"] = s.failed_swaps;
  d["profiled_steps"] = s.profiled_steps;
  d["profiles_sent"] = s.profiles_sent;
  d["placement_id"] = s.placement_id;
  d["reason"] = s.reason;
  d["state"] = s.state;
  d["last_step_s"] = s.last_step_s;
  d["rank"] = s.rank;
  d["world_size"] = s.world_size;
  d["replica_group"] = s.replica_group;
  d["allreduce_seconds"] = s.allreduce_seconds;
  d["peak_bytes"] = s.peak_bytes;
  d["pinned_limit_bytes"] = s.pinned_limit_bytes;
  d["pinned_bytes"] = s.pinned_bytes;
  d["pinned_peak_bytes"] = s.pinned_peak_bytes;
  d["pinned_refusals"] = s.pinned_refusals;
  py::dict collectives;
  for (const auto& [device, route] : s.collectives) collectives[py::str(device)] = route;
  d["collectives"] = collectives;
  return d;
}

py::dict status_dict(const placement::JobChannel::Status& s) {
  py::dict d;
  d["connected"] = s.connected;
  d["session"] = s.session;
  d["attaches"] = s.attaches;
  d["attempts"] = s.attempts;
  d["reports_sent"] = s.reports_sent;
  d["reports_dropped"] = s.reports_dropped;
  d["profiles_sent"] = s.profiles_sent;
  d["last_error"] = s.last_error;
  d["notices"] = s.notices;
  if (s.detached) {
    py::dict detached;
    detached["best_step_time_s"] = s.detached->best_step_time_s
                                       ? py::cast(*s.detached->best_step_time_s)
                                       : py::object(py::none());
    detached["persisted"] = s.detached->persisted;
    d["detached"] = detached;
  } else {
    d["detached"] = py::none();
  }
  return d;
}

}  // namespace

PYBIND11_MODULE(_placement, m) {
  m.doc() = "placementd's job API (C++), for the placement package";
  m.attr("__version__") = PLACEMENT_VERSION;
  py::register_exception<placement::CaptureError>(m, "CaptureError", PyExc_ValueError);

  py::class_<placement::Model>(m, "Model")
      .def_static(
          "from_export",
          [](const py::bytes& program, const std::map<std::string, at::Tensor>& tensors,
             const std::string& origin) {
            const std::string json = program;
            py::gil_scoped_release release;
            return placement::Model::from_exported_json(json, tensors, origin);
          },
          py::arg("program"), py::arg("tensors"), py::arg("origin"),
          "The op program of a serialized ExportedProgram (torch._export.serde.serialize's "
          "exported_program "
          "bytes) over these tensors (its parameters, buffers and constants by name: the module's "
          "own).")
      .def_property_readonly("frontend", &placement::Model::frontend)
      .def_property_readonly("num_inputs", &placement::Model::num_inputs);

  // The job's options by name, as JobOptions holds them: the package's Job fills them from its
  // keyword arguments (docs/python.md), so a new option is one field here and one line there.
  py::class_<JobOptions>(m, "JobOptions")
      .def(py::init<>())
      .def_readwrite("devices", &JobOptions::devices)
      .def_readwrite("socket_path", &JobOptions::socket_path)
      .def_readwrite("expected_steps", &JobOptions::expected_steps)
      .def_readwrite("memory_bytes", &JobOptions::memory_bytes)
      .def_readwrite("use_daemon", &JobOptions::use_daemon)
      .def_readwrite("start_device_of_op", &JobOptions::start_device_of_op)
      .def_readwrite("memory_limit_bytes", &JobOptions::memory_limit_bytes)
      .def_readwrite("profile_graph_file", &JobOptions::profile_graph_file)
      .def_readwrite("profile_steps", &JobOptions::profile_steps)
      .def_readwrite("reconnect_interval_ms", &JobOptions::reconnect_interval_ms)
      .def_readwrite("guarded_updates", &JobOptions::guarded_updates)
      .def_readwrite("overlap_updates", &JobOptions::overlap_updates)
      .def_readwrite("host_pinned_bytes", &JobOptions::host_pinned_bytes)
      .def_property(
          "replica_timeout_ms", [](const JobOptions& o) { return o.replicas.timeout_ms; },
          [](JobOptions& o, int ms) { o.replicas.timeout_ms = ms; })
      .def_property(
          "cuda_collectives",
          [](const JobOptions& o) -> std::string {
            switch (o.replicas.cuda_collectives) {
              case placement::CudaCollectives::kNccl:
                return "nccl";
              case placement::CudaCollectives::kGloo:
                return "gloo";
              case placement::CudaCollectives::kAuto:
                break;
            }
            return "auto";
          },
          [](JobOptions& o, const std::string& name) {
            o.replicas.cuda_collectives = parse_cuda_collectives(name);
          })
      // By the devices already set: a rule names one of them.
      .def(
          "set_residence_rules",
          [](JobOptions& o,
             const std::map<std::string, std::pair<std::string, std::string>>& parameters,
             const std::map<std::string, std::pair<std::string, std::string>>& activations) {
            o.start_residence_rules = residence_rules(o.devices, parameters, activations);
          },
          py::arg("parameters"), py::arg("activations"));

  py::class_<Job>(m, "Job")
      .def(py::init([](const std::string& name, const py::object& module,
                       const py::sequence& example_inputs, JobOptions options) {
             const placement::Model model = model_of(module);
             const std::vector<at::Tensor> inputs = tensors(example_inputs, "example_inputs");
             py::gil_scoped_release
                 release;  // capture and the first contact with placementd take a while
             return std::make_unique<Job>(name, model, inputs, std::move(options));
           }),
           py::arg("name"), py::arg("module"), py::arg("example_inputs"), py::arg("options"))
      .def("parameters", &Job::parameters)
      .def(
          "step",
          [](Job& job, const py::sequence& inputs, const py::object& loss,
             const py::object& optimizer, const py::object& adapter) {
            std::vector<c10::IValue> values;
            for (const at::Tensor& t : tensors(inputs, "inputs")) values.emplace_back(t);
            PythonOptimizer adapted(optimizer, adapter);
            placement::LossFunction loss_fn = [&loss](const std::vector<c10::IValue>& outputs) {
              return with_gil([&] {
                py::object value = loss(outputs_to_python(outputs));
                if (!THPVariable_Check(value.ptr()))
                  throw py::type_error(
                      "the loss function returned a " +
                      std::string(py::str(py::type::handle_of(value).attr("__name__"))) +
                      ", not a torch.Tensor");
                return THPVariable_Unpack(value.ptr());
              });
            };
            try {
              py::gil_scoped_release release;
              return job.step(values, loss_fn, adapted);
            } catch (const PythonError& e) {
              e.restore();
              throw py::error_already_set();
            }
          },
          py::arg("inputs"), py::arg("loss"), py::arg("optimizer"), py::arg("adapter"))
      .def("placement", [](const Job& job) { return job.placement().device_of_op; })
      .def("device_names",
           [](const Job& job) {
             std::vector<std::string> out;
             for (const placement::Device& d : job.devices().devices) out.push_back(d.name());
             return out;
           })
      .def("graph_json", [](const Job& job) { return placement::to_json(job.graph()).dump(); })
      .def("placement_json",
           [](const Job& job) { return placement::to_json(job.placement(), job.devices()).dump(); })
      .def("residence_activity",
           [](Job& job) {
             const placement::ResidenceActivity a = job.module().residence_activity();
             py::dict d;
             d["proxies"] = a.proxies;
             d["streamed"] = a.streamed;
             d["parameter_fetches"] = a.parameter_fetches;
             d["parameter_prefetches"] = a.parameter_prefetches;
             d["parameter_bytes_fetched"] = a.parameter_bytes_fetched;
             d["gradient_bytes_sent_home"] = a.gradient_bytes_sent_home;
             d["activations_evicted"] = a.activations_evicted;
             d["activation_bytes_evicted"] = a.activation_bytes_evicted;
             d["recompute_kept"] = a.recompute_kept;
             return d;
           })
      .def("stats", [](const Job& job) { return stats_dict(job.stats()); })
      .def("daemon", [](const Job& job) { return status_dict(job.daemon()); })
      .def("placementd_view",
           [](const Job& job) {
             placement::messages::JobInfo info;
             {
               py::gil_scoped_release release;
               info = job.placementd_view();
             }
             return info.to_json().dump();
           })
      .def("detach", [](Job& job) {
        placement::JobChannel::Status s;
        {
          py::gil_scoped_release release;
          s = job.detach();
        }
        return status_dict(s);
      });

  m.def("parameters_digest", &placement::parameters_digest, py::arg("tensors"));
  m.def(
      "describe_outcome",
      [](const std::string& job_json) {
        return placement::describe_outcome(
            placement::messages::JobSummary::from_json(nlohmann::json::parse(job_json)));
      },
      py::arg("job_json"),
      "(label, value) lines of what placementd did for a job, from its job_show reply's JSON.");
  m.def(
      "capture_json",
      [](const py::object& module, const py::sequence& example_inputs, const std::string& name) {
        const placement::Model model = model_of(module);
        const std::vector<at::Tensor> inputs = tensors(example_inputs, "example_inputs");
        py::gil_scoped_release release;
        return placement::to_json(placement::capture(model, inputs, name)).dump();
      },
      py::arg("module"), py::arg("example_inputs"), py::arg("name"));
}
