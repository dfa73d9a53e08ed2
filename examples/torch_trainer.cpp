// The data-parallel loop of mlp_trainer.cpp with libtorch for the model, autograd and optimizer: what a
// PyTorch C++ user writes. Built when CMake finds libtorch (Debian: libtorch-dev); run it under canopy-run:
//
//   canopy-run --nproc 4 ./torch_trainer --steps 100 --checkpoint-dir /tmp/ckpt
//
// Gradients reach the synchronizer through hooks on the parameters (examples/torch/gradient_hooks.hpp),
// so buckets are all-reduced while backward goes on. Gradient accumulation: --accumulate K communicates on
// the last of every K micro-steps only. Checkpoints are written by global rank 0 (whichever process that
// is after a restart) and every rank resumes from the newest; progress goes to the terminal from local
// rank 0 of each host.
#include <fmt/format.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "canopy/checkpoint.hpp"
#include "canopy/gradsync.hpp"
#include "examples/mlp/synthetic_data.hpp"
#include "examples/torch/gradient_hooks.hpp"

namespace {

struct Settings {
  int steps = 50;
  int batch = 16;      // samples per rank per micro-step
  int accumulate = 1;  // micro-steps per optimizer step
  int inputs = 16, hidden = 256, outputs = 4;
  double learning_rate = 0.2;
  std::string checkpoint_dir;
  int checkpoint_every = 10;
  int keep = 2;
  std::string out;  // global rank 0 writes the final parameters (float32) here
  bool check_replicas = false;
  // Caps far below DDP's 25 MiB / 1 MiB: the model is 0.3 MiB, and in one bucket nothing would overlap.
  double bucket_kib = 64;
  double first_bucket_kib = 16;
  double in_place_kib = 1024;  // GradSyncOptions::in_place_bytes
  int fail_at_step = -1;       // first attempt only: this rank kills itself after the step (restart tests)
  int fail_rank = 0;
  int log_every = 10;
  int threads = 1;
};

struct Net : torch::nn::Module {
  Net(int inputs, int hidden, int outputs)
      : fc1(register_module("fc1", torch::nn::Linear(inputs, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, outputs))) {}
  torch::Tensor forward(torch::Tensor x) { return fc3(torch::relu(fc2(torch::relu(fc1(x))))); }
  torch::nn::Linear fc1, fc2, fc3;
};

// Samples [first, first + count) of the synthetic data set that mlp_trainer uses: a pure function of the
// global sample index, so that runs with any number of ranks see the same samples.
std::pair<torch::Tensor, torch::Tensor> make_batch(std::uint64_t first, int count, const Settings& s) {
  mlp::Batch batch = mlp::make_batch(mlp::DataKind::Random, 1, first, count, s.inputs, s.outputs);
  auto as_tensor = [count](std::vector<double>& values, int width) {
    return torch::from_blob(values.data(), {count, width}, torch::kFloat64).to(torch::kFloat32);
  };
  return {as_tensor(batch.x, s.inputs), as_tensor(batch.y, s.outputs)};
}

// A fixed batch nobody trains on: global rank 0 reports the loss on it before and after training.
double held_out_loss(Net& net, const Settings& s) {
  torch::NoGradGuard no_grad;
  auto [x, y] = make_batch(std::uint64_t{1} << 40, 256, s);
  return torch::mse_loss(net.forward(x), y).item<double>();
}

// Every replica must hold the same parameters after every step; a difference is a synchronisation bug.
void check_replicas(canopy::Communicator& comm, Net& net, int step) {
  std::int64_t mine =
      static_cast<std::int64_t>(std::hash<std::string>{}(torch_example::flat_parameters(net)));
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather(std::span<const std::int64_t>(&mine, 1), std::span(all));
  for (int r = 0; r < comm.size(); ++r)
    if (all[static_cast<std::size_t>(r)] != all[0])
      throw std::runtime_error(
          fmt::format("after step {}: rank {}'s parameters differ from rank 0's", step, r));
}

std::string serialize(Net& net) {
  torch::serialize::OutputArchive archive;
  net.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void deserialize(Net& net, const std::string& bytes) {
  std::istringstream in(bytes);
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  net.load(archive);
}

int train(const Settings& s) {
  // One intra-op thread per rank, as torchrun sets OMP_NUM_THREADS=1: the ranks already share the cores.
  torch::set_num_threads(s.threads);
  canopy::TrainingJob job = canopy::join_training_job();
  canopy::Communicator& comm = job.comm;
  const int rank = comm.rank(), world = comm.size();
  const bool terminal = comm.local_rank() == 0;  // progress: once per host
  const bool once_per_job = rank == 0;           // evaluation, final parameters: once per job

  torch::manual_seed(1000 + static_cast<std::uint64_t>(rank));  // different on purpose: see below
  Net net(s.inputs, s.hidden, s.outputs);
  int start_step = 0;
  std::unique_ptr<canopy::Checkpointer> checkpointer;
  if (!s.checkpoint_dir.empty()) {
    checkpointer = std::make_unique<canopy::Checkpointer>(
        job.store, rank, canopy::CheckpointOptions{s.checkpoint_dir, s.keep, {}});
    if (auto latest = checkpointer->load_latest()) {
      torch::NoGradGuard no_grad;  // loading writes into parameters that require gradients
      deserialize(net, latest->data);
      start_step = static_cast<int>(latest->step);
      if (terminal)
        fmt::print("attempt {}: resuming from {} (step {})\n", job.restart_count, latest->path, start_step);
    }
  }
  // The synchronizer holds the parameters' and gradients' memory, so it comes after the checkpoint is
  // loaded (Module::load gives parameters new storage), as DDP wraps a model after loading it.
  canopy::GradSyncOptions options;
  options.bucket_bytes = static_cast<std::size_t>(s.bucket_kib * 1024);
  options.first_bucket_bytes = static_cast<std::size_t>(s.first_bucket_kib * 1024);
  options.in_place_bytes = static_cast<std::size_t>(s.in_place_kib * 1024);
  canopy::GradientSynchronizer sync(comm, options);
  torch_example::Hooks hooks = torch_example::attach(net, sync);
  // Every rank drew its own initial weights, and after a resume every rank read the file: rank 0's copy
  // is the one that counts.
  sync.broadcast_parameters();
  if (once_per_job)
    fmt::print("rank 0 of {}: {} parameters in {} buckets, attempt {}, held-out loss {:.6f}\n", world,
               net.parameters().size(), sync.buckets().size(), job.restart_count, held_out_loss(net, s));

  torch::optim::SGD optimizer(net.parameters(), torch::optim::SGDOptions(s.learning_rate));
  const std::uint64_t per_step = static_cast<std::uint64_t>(world) * static_cast<std::uint64_t>(s.batch) *
                                 static_cast<std::uint64_t>(s.accumulate);
  for (int step = start_step; step < s.steps; ++step) {
    double loss_sum = 0;
    for (int micro = 0; micro < s.accumulate; ++micro) {
      sync.set_sync(micro == s.accumulate - 1);  // only the last micro-step communicates
      std::uint64_t first =
          static_cast<std::uint64_t>(step) * per_step +
          static_cast<std::uint64_t>(micro * world + rank) * static_cast<std::uint64_t>(s.batch);
      auto [x, y] = make_batch(first, s.batch, s);
      torch::Tensor loss = torch::mse_loss(net.forward(x), y) / s.accumulate;
      loss.backward();  // hooks fire layer by layer, last layer first; buckets leave meanwhile
      sync.finish();    // on the last micro-step every .grad now holds the average over ranks
      loss_sum += loss.item<double>();
    }
    optimizer.step();
    torch_example::zero_grads(net);
    if (s.check_replicas) check_replicas(comm, net, step + 1);
    if (terminal && ((step + 1) % s.log_every == 0 || step + 1 == s.steps))
      fmt::print("step {}/{}: local loss {:.6f}\n", step + 1, s.steps, loss_sum);
    if (checkpointer && (step + 1) % s.checkpoint_every == 0)
      checkpointer->save(static_cast<std::uint64_t>(step + 1), once_per_job ? serialize(net) : std::string());
    if (step + 1 == s.fail_at_step && rank == s.fail_rank && job.restart_count == 0) {
      fmt::print("rank {}: failing on purpose after step {}\n", rank, step + 1);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
  }

  if (once_per_job) {
    canopy::GradSyncStats stats = sync.stats();
    fmt::print("done: held-out loss {:.6f}; synced steps {}, skipped micro-steps {}, bucket all-reduces {}\n",
               held_out_loss(net, s), stats.synced_steps, stats.skipped_steps, stats.bucket_all_reduces);
    if (!s.out.empty()) {
      std::ofstream file(s.out, std::ios::binary | std::ios::trunc);
      file << torch_example::flat_parameters(net);
      if (!file) throw std::runtime_error("cannot write " + s.out);
    }
  }
  comm.barrier();  // nobody tears the store down while another rank still uses it
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"Data-parallel training with libtorch and Canopy's GradientSynchronizer"};
  app.add_option("--steps", s.steps, "optimizer steps in total");
  app.add_option("--batch", s.batch, "samples per rank per micro-step");
  app.add_option("--accumulate", s.accumulate, "micro-steps per optimizer step (gradient accumulation)");
  app.add_option("--hidden", s.hidden, "width of the two hidden layers");
  app.add_option("--lr", s.learning_rate, "SGD learning rate");
  app.add_option("--checkpoint-dir", s.checkpoint_dir,
                 "save here every --checkpoint-every steps, resume from here");
  app.add_option("--checkpoint-every", s.checkpoint_every);
  app.add_option("--keep", s.keep, "checkpoints kept");
  app.add_option("--out", s.out, "global rank 0 writes the final parameters (float32) here");
  app.add_flag("--check-replicas", s.check_replicas, "compare every rank's parameters after every step");
  app.add_option("--bucket-kib", s.bucket_kib, "bucket cap in KiB");
  app.add_option("--first-bucket-kib", s.first_bucket_kib, "first bucket cap in KiB");
  app.add_option("--in-place-kib", s.in_place_kib,
                 "gradients of at least this many KiB are all-reduced in place");
  app.add_option("--fail-at-step", s.fail_at_step,
                 "on the first attempt, --fail-rank kills itself after this step");
  app.add_option("--fail-rank", s.fail_rank);
  app.add_option("--log-every", s.log_every);
  app.add_option("--threads", s.threads, "libtorch intra-op threads per rank");
  CLI11_PARSE(app, argc, argv);
  if (s.accumulate < 1 || s.batch < 1 || s.steps < 0 || s.checkpoint_every < 1 || s.threads < 1) {
    std::fprintf(stderr,
                 "torch_trainer: --accumulate, --batch, --checkpoint-every and --threads must be positive\n");
    return 2;
  }
  try {
    return train(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_trainer: %s\n", e.what());
    return 1;
  }
}
