// A data-parallel trainer as one writes it with Canopy, with the model's gradient written out by hand
// (examples/torch_trainer.cpp is the same loop with libtorch). Run it under canopy-run:
//
//   canopy-run --nproc 4 ./mlp_trainer --layers 16,64,64,4 --steps 100 --checkpoint-dir /tmp/ckpt
//
// What it shows: gradient hooks that feed the synchronizer while backward goes on, gradient accumulation
// (no-sync micro-steps), rank 0's parameters broadcast at start, checkpoints by global rank 0 and resuming
// from the newest after a restart, progress on the terminal from local rank 0 of each host, and once-per-
// job work (metrics, checkpoints, the final weights) from global rank 0, whichever process that is.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "canopy/checkpoint.hpp"
#include "canopy/gradsync.hpp"
#include "examples/mlp/mlp_model.hpp"
#include "examples/mlp/synthetic_data.hpp"

namespace {

struct Settings {
  std::string layers = "16,64,64,4";
  int steps = 20;
  int batch = 8;       // samples per rank per micro-step
  int accumulate = 1;  // micro-steps per optimizer step
  double learning_rate = 0.0625;
  std::string data = "random";
  std::uint64_t seed = 1;
  bool zero_init = false;
  std::string checkpoint_dir;
  int checkpoint_every = 5;
  int keep = 2;
  std::string out;      // global rank 0 writes the final weights here
  std::string out_dir;  // every rank writes weights.rank<r>.bin here (replica checks)
  std::string metrics;  // global rank 0 appends one JSON line per step
  bool check_replicas = false;
  std::size_t bucket_kib = 25 * 1024;
  std::size_t first_bucket_kib = 1024;
  bool rebuild_buckets = false;
  int fail_at_step = -1;  // first attempt only: this rank kills itself after the step (the restart test)
  int fail_rank = 0;
  int log_every = 10;
};

std::vector<int> parse_widths(const std::string& text) {
  std::vector<int> widths;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) widths.push_back(std::stoi(item));
  if (widths.size() < 2) throw std::invalid_argument("--layers needs at least two widths, e.g. 16,4");
  return widths;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) throw std::runtime_error("cannot write " + path);
}

// Every replica must hold the same weights after every step; a difference is a bug in synchronisation.
void check_replicas(canopy::Communicator& comm, const mlp::Model& model, int step) {
  std::vector<std::int64_t> mine{static_cast<std::int64_t>(model.fingerprint())};
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather(std::span<const std::int64_t>(mine), std::span(all));
  for (int r = 0; r < comm.size(); ++r)
    if (all[static_cast<std::size_t>(r)] != all[0])
      throw std::runtime_error(fmt::format(
          "after step {}: rank {}'s weights differ from rank 0's ({:x} vs {:x})", step, r,
          static_cast<std::uint64_t>(all[static_cast<std::size_t>(r)]), static_cast<std::uint64_t>(all[0])));
}

int train(const Settings& settings) {
  canopy::TrainingJob job = canopy::join_training_job();
  canopy::Communicator& comm = job.comm;
  const int rank = comm.rank(), world = comm.size();
  const bool terminal = comm.local_rank() == 0;  // progress: once per host
  const bool once_per_job = rank == 0;           // metrics, checkpoints, final weights: once per job

  std::vector<int> widths = parse_widths(settings.layers);
  mlp::DataKind kind = settings.data == "integer" ? mlp::DataKind::Integer : mlp::DataKind::Random;
  // Each rank draws its own initial weights on purpose: broadcast_parameters must make them rank 0's.
  mlp::Model model(widths, settings.seed + static_cast<std::uint64_t>(rank), settings.zero_init);

  canopy::GradSyncOptions options;
  options.bucket_bytes = settings.bucket_kib * 1024;
  options.first_bucket_bytes = settings.first_bucket_kib * 1024;
  options.rebuild_buckets = settings.rebuild_buckets;
  canopy::GradientSynchronizer sync(comm, options);
  std::vector<std::size_t> weight_index, bias_index;
  for (std::size_t l = 0; l < model.layers().size(); ++l) {
    mlp::Layer& layer = model.layers()[l];
    weight_index.push_back(sync.add(fmt::format("layer{}.weight", l),
                                    canopy::tensor_view(std::span(layer.weight_grad)),
                                    canopy::tensor_view(std::span(layer.weight))));
    bias_index.push_back(sync.add(fmt::format("layer{}.bias", l),
                                  canopy::tensor_view(std::span(layer.bias_grad)),
                                  canopy::tensor_view(std::span(layer.bias))));
  }

  int start_step = 0;
  std::unique_ptr<canopy::Checkpointer> checkpointer;
  if (!settings.checkpoint_dir.empty()) {
    checkpointer = std::make_unique<canopy::Checkpointer>(
        job.store, rank, canopy::CheckpointOptions{settings.checkpoint_dir, settings.keep, {}});
    if (auto latest = checkpointer->load_latest()) {
      model.deserialize(latest->data);
      start_step = static_cast<int>(latest->step);
      if (terminal)
        fmt::print("attempt {}: resuming from {} (step {})\n", job.restart_count, latest->path, start_step);
    }
  }
  // Also after a resume: every rank read the file, but rank 0's copy is the one that counts.
  sync.broadcast_parameters();
  if (once_per_job)
    fmt::print("rank 0 of {}: {} gradients in {} buckets, attempt {}\n", world, 2 * model.layers().size(),
               sync.buckets().size(), job.restart_count);

  const int inputs = widths.front(), outputs = widths.back();
  const std::uint64_t per_step = static_cast<std::uint64_t>(world) *
                                 static_cast<std::uint64_t>(settings.batch) *
                                 static_cast<std::uint64_t>(settings.accumulate);
  for (int step = start_step; step < settings.steps; ++step) {
    double loss = 0;
    for (int micro = 0; micro < settings.accumulate; ++micro) {
      // Communicate only on the last micro-step; the others accumulate into the gradient buffers.
      sync.set_sync(micro == settings.accumulate - 1);
      std::uint64_t first =
          static_cast<std::uint64_t>(step) * per_step +
          static_cast<std::uint64_t>(micro * world + rank) * static_cast<std::uint64_t>(settings.batch);
      mlp::Batch batch = mlp::make_batch(kind, settings.seed, first, settings.batch, inputs, outputs);
      // The hook: a layer's gradients are final, hand them over while backward continues below it.
      loss += model.forward_backward(batch.x, batch.y, settings.batch, 1.0 / settings.accumulate,
                                     [&](std::size_t layer) {
                                       sync.mark_ready(weight_index[layer]);
                                       sync.mark_ready(bias_index[layer]);
                                     });
      sync.finish();
    }
    model.sgd_step(settings.learning_rate);
    if (settings.check_replicas) check_replicas(comm, model, step + 1);
    loss /= settings.accumulate;

    if (terminal && ((step + 1) % settings.log_every == 0 || step + 1 == settings.steps))
      fmt::print("step {}/{}: local loss {:.6g}\n", step + 1, settings.steps, loss);
    if (once_per_job && !settings.metrics.empty()) {
      std::FILE* file = std::fopen(settings.metrics.c_str(), "a");
      if (file) {
        fmt::print(file, "{{\"step\": {}, \"rank0_loss\": {:.17g}, \"world\": {}, \"attempt\": {}}}\n",
                   step + 1, loss, world, job.restart_count);
        std::fclose(file);
      }
    }
    if (checkpointer && (step + 1) % settings.checkpoint_every == 0)
      checkpointer->save(static_cast<std::uint64_t>(step + 1),
                         once_per_job ? model.serialize() : std::string());
    if (step + 1 == settings.fail_at_step && rank == settings.fail_rank && job.restart_count == 0) {
      fmt::print("rank {}: failing on purpose after step {}\n", rank, step + 1);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
  }

  if (once_per_job && !settings.out.empty()) write_file(settings.out, model.serialize());
  if (!settings.out_dir.empty())
    write_file(fmt::format("{}/weights.rank{}.bin", settings.out_dir, rank), model.serialize());
  if (once_per_job) {
    canopy::GradSyncStats stats = sync.stats();
    fmt::print("done: synced steps {}, skipped micro-steps {}, bucket all-reduces {}, bytes {}\n",
               stats.synced_steps, stats.skipped_steps, stats.bucket_all_reduces, stats.bytes_all_reduced);
  }
  comm.barrier();  // nobody tears the store down while another rank still uses it
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"Data-parallel training of a small MLP with Canopy's GradientSynchronizer"};
  app.add_option("--layers", s.layers, "widths: inputs,hidden...,outputs");
  app.add_option("--steps", s.steps, "optimizer steps in total");
  app.add_option("--batch", s.batch, "samples per rank per micro-step");
  app.add_option("--accumulate", s.accumulate, "micro-steps per optimizer step (gradient accumulation)");
  app.add_option("--lr", s.learning_rate, "SGD learning rate");
  app.add_option("--data", s.data, "integer (exact float64 arithmetic) or random")
      ->check(CLI::IsMember({"integer", "random"}));
  app.add_option("--seed", s.seed, "data and initial weights");
  app.add_flag("--zero-init", s.zero_init, "start every weight at zero");
  app.add_option("--checkpoint-dir", s.checkpoint_dir,
                 "save here every --checkpoint-every steps, resume from here");
  app.add_option("--checkpoint-every", s.checkpoint_every);
  app.add_option("--keep", s.keep, "checkpoints kept");
  app.add_option("--out", s.out, "global rank 0 writes the final weights (float64) here");
  app.add_option("--out-dir", s.out_dir, "every rank writes weights.rank<r>.bin here");
  app.add_option("--metrics", s.metrics, "global rank 0 appends a JSON line per step");
  app.add_flag("--check-replicas", s.check_replicas, "compare every rank's weights after every step");
  app.add_option("--bucket-kib", s.bucket_kib, "bucket cap in KiB");
  app.add_option("--first-bucket-kib", s.first_bucket_kib, "first bucket cap in KiB");
  app.add_flag("--rebuild-buckets", s.rebuild_buckets,
               "rebuild buckets from the first step's gradient order");
  app.add_option("--fail-at-step", s.fail_at_step,
                 "on the first attempt, --fail-rank kills itself after this step");
  app.add_option("--fail-rank", s.fail_rank);
  app.add_option("--log-every", s.log_every);
  CLI11_PARSE(app, argc, argv);
  if (s.accumulate < 1 || s.batch < 1 || s.steps < 0 || s.checkpoint_every < 1) {
    std::fprintf(stderr, "mlp_trainer: --accumulate, --batch and --checkpoint-every must be positive\n");
    return 2;
  }
  try {
    return train(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_trainer: %s\n", e.what());
    return 1;
  }
}
