#include "seq2seq_network.h"

#include <stdexcept>
#include <tuple>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include "policy_network.h"

namespace placement::plugins {

namespace {

using torch::indexing::Slice;

class Seq2SeqNetwork : public PolicyNetwork {
 public:
  Seq2SeqNetwork(int64_t width, int64_t hidden, int64_t embedding, int64_t devices,
                 AttentionPosition attention)
      : hidden_(hidden),
        devices_(devices),
        before_(attention == AttentionPosition::kBefore),
        project_(register_module("project", torch::nn::Linear(width, hidden))),
        encoder_(register_module(
            "encoder",
            torch::nn::LSTM(
                torch::nn::LSTMOptions(hidden, hidden / 2).bidirectional(true).batch_first(true)))),
        device_embedding_(
            register_module("device_embedding", torch::nn::Embedding(devices + 1, embedding))),
        decoder_(register_module(
            "decoder", torch::nn::LSTMCell(hidden + embedding + (before_ ? hidden : 0), hidden))),
        attention_keys_(register_module(
            "attention_keys",
            torch::nn::Linear(torch::nn::LinearOptions(hidden, hidden).bias(false)))),
        attention_query_(register_module("attention_query", torch::nn::Linear(hidden, hidden))),
        attention_score_(register_module(
            "attention_score", torch::nn::Linear(torch::nn::LinearOptions(hidden, 1).bias(false)))),
        out_(register_module("out", torch::nn::Linear(before_ ? hidden : 2 * hidden, devices))) {
    if (hidden % 2 != 0)
      throw std::invalid_argument("seq2seq: hidden must be even (two encoder directions)");
  }

  torch::Tensor logits(const PolicyInputs& inputs, const std::vector<Action>& actions) override {
    if (actions.empty()) throw std::logic_error("seq2seq: logits need the actions to condition on");
    const int64_t S = static_cast<int64_t>(actions.size());
    const int64_t G = inputs.features.size(0);
    std::vector<int64_t> flat;
    flat.reserve(static_cast<size_t>(S * G));
    for (const Action& a : actions) flat.insert(flat.end(), a.begin(), a.end());
    const torch::Tensor chosen = torch::tensor(flat, torch::kInt64).view({S, G});
    Decoder d = start(inputs, S);
    std::vector<torch::Tensor> steps;
    steps.reserve(static_cast<size_t>(G));
    for (int64_t i = 0; i < G; ++i) {
      steps.push_back(step(d, i));
      d.previous = chosen.index({Slice(), i});
    }
    return torch::stack(steps, 1);
  }

  Action sample(const PolicyInputs& inputs, const Chooser& choose) override {
    const int64_t G = inputs.features.size(0);
    Decoder d = start(inputs, 1);
    Action action;
    action.reserve(static_cast<size_t>(G));
    for (int64_t i = 0; i < G; ++i) {
      const torch::Tensor row = step(d, i)[0].to(torch::kFloat32).contiguous();
      const int c = choose(row.data_ptr<float>(), i);
      action.push_back(c);
      d.previous = torch::full({1}, c, torch::kInt64);
    }
    return action;
  }

 private:
  struct Decoder {
    torch::Tensor encoded;   // [S, G, H]
    torch::Tensor keys;      // [S, G, H]
    torch::Tensor h, c;      // [S, H]
    torch::Tensor previous;  // [S] device chosen for the previous group (devices_ = start)
  };

  Decoder start(const PolicyInputs& inputs, int64_t S) {
    const torch::Tensor x = project_(inputs.features).unsqueeze(0);   // [1, G, H]
    const torch::Tensor encoded = std::get<0>(encoder_->forward(x));  // [1, G, H]
    Decoder d;
    d.encoded = encoded.expand({S, encoded.size(1), hidden_});
    d.keys = attention_keys_(encoded).expand({S, encoded.size(1), hidden_});
    d.h = torch::zeros({S, hidden_});
    d.c = torch::zeros({S, hidden_});
    d.previous = torch::full({S}, devices_, torch::kInt64);
    return d;
  }

  // Content-based attention: score_j = vᵀ tanh(W_k e_j + W_q q), context = Σ softmax(score)_j e_j.
  torch::Tensor attend(const Decoder& d, const torch::Tensor& query) {
    const torch::Tensor scores =
        attention_score_(torch::tanh(d.keys + attention_query_(query).unsqueeze(1))).squeeze(-1);
    return torch::softmax(scores, 1).unsqueeze(1).bmm(d.encoded).squeeze(1);
  }

  // Logits [S, D] for group i; advances the decoder state.
  torch::Tensor step(Decoder& d, int64_t i) {
    std::vector<torch::Tensor> input = {d.encoded.index({Slice(), i}),
                                        device_embedding_(d.previous)};
    if (before_) input.push_back(attend(d, d.h));
    std::tie(d.h, d.c) = decoder_->forward(torch::cat(input, 1), std::make_tuple(d.h, d.c));
    if (before_) return out_(d.h);
    return out_(torch::cat({d.h, attend(d, d.h)}, 1));
  }

  int64_t hidden_, devices_;
  bool before_;
  torch::nn::Linear project_;
  torch::nn::LSTM encoder_;
  torch::nn::Embedding device_embedding_;
  torch::nn::LSTMCell decoder_;
  torch::nn::Linear attention_keys_, attention_query_, attention_score_, out_;
};

}  // namespace

NetworkFactory seq2seq_network(int64_t hidden, int64_t device_embedding,
                               AttentionPosition attention) {
  return [=](int64_t width, int64_t, int64_t devices) {
    return std::make_shared<Seq2SeqNetwork>(width, hidden, device_embedding, devices, attention);
  };
}

}  // namespace placement::plugins
