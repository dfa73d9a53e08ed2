// The same data-parallel loop as mlp_trainer.cpp, with libtorch for the model, autograd and optimizer:
// what a PyTorch C++ user writes. Built when CMake finds libtorch (find_package(Torch)); run it as
//
//   canopy-run --nproc 4 ./torch_trainer --steps 100 --checkpoint-dir /tmp/ckpt
//
// How the gradients reach the synchronizer: every parameter's .grad is a buffer the synchronizer knows,
// and a hook on the parameter (it fires when autograd has computed that parameter's gradient, during
// backward) adds the incoming gradient into the buffer itself, marks it ready, and hands autograd zeros
// to accumulate instead, so the bucket can leave while backward goes on without the gradient being added
// twice. Hence grads are zeroed with .zero_() and never set to None (optimizer.zero_grad() would).
#include <fmt/format.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

#include "canopy/checkpoint.hpp"
#include "canopy/gradsync.hpp"

namespace {

struct Net : torch::nn::Module {
  Net(int inputs, int hidden, int outputs)
      : fc1(register_module("fc1", torch::nn::Linear(inputs, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, outputs))) {}
  torch::Tensor forward(torch::Tensor x) { return fc3(torch::relu(fc2(torch::relu(fc1(x))))); }
  torch::nn::Linear fc1, fc2, fc3;
};

canopy::TensorView view_of(const torch::Tensor& t) {
  return {t.data_ptr(), static_cast<std::size_t>(t.numel()), canopy::DataType::Float32,
          t.is_cuda() ? canopy::Device::CUDA : canopy::Device::CPU};
}

// The synthetic data set as a function of the global sample index, like mlp/synthetic_data.
std::pair<torch::Tensor, torch::Tensor> make_batch(std::int64_t first, int count, int inputs, int outputs) {
  torch::manual_seed(static_cast<std::uint64_t>(first) * 7919 + 17);
  torch::Tensor x = torch::rand({count, inputs}) * 2 - 1;
  torch::Tensor y = torch::sin(x.sum(1, true).repeat({1, outputs}));
  return {x, y};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 50, batch = 16, accumulate = 1, inputs = 16, hidden = 256, outputs = 4, checkpoint_every = 10;
  double learning_rate = 0.05;
  std::string checkpoint_dir;
  CLI::App app{"Data-parallel training with libtorch and Canopy's GradientSynchronizer"};
  app.add_option("--steps", steps);
  app.add_option("--batch", batch, "samples per rank per micro-step");
  app.add_option("--accumulate", accumulate, "micro-steps per optimizer step");
  app.add_option("--hidden", hidden);
  app.add_option("--lr", learning_rate);
  app.add_option("--checkpoint-dir", checkpoint_dir);
  app.add_option("--checkpoint-every", checkpoint_every);
  CLI11_PARSE(app, argc, argv);
  try {
    canopy::TrainingJob job = canopy::join_training_job();
    canopy::Communicator& comm = job.comm;
    const int rank = comm.rank(), world = comm.size();
    torch::manual_seed(1000 + rank);  // different on purpose: broadcast_parameters makes them rank 0's
    auto net = std::make_shared<Net>(inputs, hidden, outputs);

    canopy::GradientSynchronizer sync(comm);
    std::vector<torch::Tensor> params;
    for (auto& item : net->named_parameters()) {
      torch::Tensor p = item.value();
      p.mutable_grad() = torch::zeros_like(p);
      std::size_t index = sync.add(item.key(), view_of(p.grad()), view_of(p));
      // Captures the buffer, not the parameter: a parameter holding a hook that holds it would never be
      // freed.
      p.register_hook([&sync, buffer = p.grad(), index](torch::Tensor incoming) mutable {
        buffer.add_(incoming);
        sync.mark_ready(index);
        return torch::zeros_like(incoming);
      });
      params.push_back(p);
    }
    std::unique_ptr<canopy::Checkpointer> checkpointer;
    int start = 0;
    if (!checkpoint_dir.empty()) {
      checkpointer = std::make_unique<canopy::Checkpointer>(job.store, rank,
                                                            canopy::CheckpointOptions{checkpoint_dir, 2, {}});
      if (auto latest = checkpointer->load_latest()) {
        std::istringstream in(latest->data);
        torch::serialize::InputArchive archive;
        archive.load_from(in);
        net->load(archive);
        start = static_cast<int>(latest->step);
        if (comm.local_rank() == 0)
          fmt::print("attempt {}: resuming from step {}\n", job.restart_count, start);
      }
    }
    sync.broadcast_parameters();
    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(learning_rate));

    for (int step = start; step < steps; ++step) {
      double loss_sum = 0;
      for (int micro = 0; micro < accumulate; ++micro) {
        sync.set_sync(micro == accumulate - 1);
        std::int64_t first =
            (static_cast<std::int64_t>(step) * accumulate + micro) * world * batch + rank * batch;
        auto [x, y] = make_batch(first, batch, inputs, outputs);
        torch::Tensor loss = torch::mse_loss(net->forward(x), y) / accumulate;
        loss.backward();  // hooks fire layer by layer, last layer first; buckets leave meanwhile
        sync.finish();    // every .grad now holds the average over ranks
        loss_sum += loss.item<double>();
      }
      optimizer.step();
      for (torch::Tensor& p : params) p.grad().zero_();  // not zero_grad(): the buffers must stay
      if (comm.local_rank() == 0 && (step + 1) % 10 == 0)
        fmt::print("step {}: local loss {:.5f}\n", step + 1, loss_sum);
      if (checkpointer && (step + 1) % checkpoint_every == 0) {
        std::ostringstream out;
        if (rank == 0) {
          torch::serialize::OutputArchive archive;
          net->save(archive);
          archive.save_to(out);
        }
        checkpointer->save(static_cast<std::uint64_t>(step + 1), out.str());
      }
    }
    comm.barrier();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_trainer: %s\n", e.what());
    return 1;
  }
}
