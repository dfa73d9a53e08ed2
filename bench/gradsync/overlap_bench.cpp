// Step time with buckets all-reduced while backward goes on (overlap) vs all communication after
// backward (as a trainer without hooks would do), for a model of several buckets, under canopy-run:
//
//   canopy-run --nproc 2 build/bin/gradsync_overlap_bench --layers 8 --layer-mib 2 --bucket-mib 4
//
// "Backward" is either real work on each layer's gradient (--backward fma: fused multiply-add passes,
// --compute-passes), so that compute and communication compete for the cores as they do in CPU training,
// or a wait (--backward wait: --wait-ms per layer), as a rank's CPU thread waits while an accelerator
// computes backward: then the cores are free for the all-reduces. With --device cuda the gradients live
// on the GPU and travel through the synchronizer's pinned staging; the GPU's backward takes --wait-ms per
// layer on a stream while the trainer's thread runs ahead (bench/gradsync/backward.hpp). Alongside the two
// modes it measures backward alone and communication alone: no overlap costs about their sum, perfect overlap
// the larger of the two. Modes alternate step by step so that noise hits both alike. Each mode's CPU time per
// step (every thread of rank 0: the trainer's and the communicator's progress thread) shows how much of the
// machine it takes.
#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/gradsync/backward.hpp"
#include "canopy/gradsync.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  canopy::bench::BackwardSettings backward;
  int steps = 12;
  int warmup = 2;
  double bucket_mib = 4;
  double first_bucket_mib = 1;
  double cuda_chunk_mib = static_cast<double>(canopy::GradSyncOptions{}.cuda_chunk_bytes) / (1 << 20);
  bool in_buckets = false;  // every gradient copied into buckets (GradSyncOptions::in_place_bytes = SIZE_MAX)
};

enum class Mode { Overlap, After, ComputeOnly, CommOnly };

// CPU time of every thread of this process, in ms.
double process_cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
  };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

struct StepTime {
  double wall_ms, cpu_ms;
  double finish_wait_ms;           // of it, finish() waiting for all-reduces (communication not hidden)
  std::uint64_t buckets_done = 0;  // buckets already all-reduced when finish() was called
};

StepTime run_step(Mode mode, canopy::GradientSynchronizer& sync, canopy::bench::Backward& backward,
                  std::size_t layers, int step, canopy::Communicator& comm) {
  comm.barrier();  // every rank starts the step together
  auto start = Clock::now();
  double cpu_start = process_cpu_ms();
  canopy::GradSyncStats before = sync.stats();
  if (mode == Mode::CommOnly) {
    for (std::size_t l = layers; l-- > 0;) sync.mark_ready(l);
    sync.finish();
  } else if (mode == Mode::Overlap) {
    for (std::size_t l = layers; l-- > 0;)
      sync.mark_ready(l, backward.produce(l, step));  // the hook: this layer's gradient is final
    sync.finish();
  } else {
    for (std::size_t l = layers; l-- > 0;) backward.produce(l, step);
    backward.wait();
    if (mode == Mode::After) {
      for (std::size_t l = layers; l-- > 0;) sync.mark_ready(l);
      sync.finish();
    }
  }
  canopy::GradSyncStats after = sync.stats();
  return {std::chrono::duration<double, std::milli>(Clock::now() - start).count(),
          process_cpu_ms() - cpu_start, (after.finish_wait_seconds - before.finish_wait_seconds) * 1e3,
          after.buckets_done_before_finish - before.buckets_done_before_finish};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  canopy::bench::BackwardSettings& b = s.backward;
  CLI::App app{"gradsync: step time with overlap vs communication after backward"};
  app.add_option("--layers", b.layers, "gradients (one per layer)");
  app.add_option("--layer-mib", b.layer_mib, "MiB of float32 gradient per layer");
  app.add_option("--backward", b.backward, "fma (CPU work) or wait (an accelerator's backward)")
      ->check(CLI::IsMember({"fma", "wait"}));
  app.add_option("--compute-passes", b.compute_passes, "--backward fma: passes over each gradient");
  app.add_option("--wait-ms", b.wait_ms, "--backward wait, and --device cuda: ms per layer");
  app.add_option("--device", b.device,
                 "where the gradients live: cpu, or cuda (staged through pinned memory)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--steps", s.steps, "measured steps per mode");
  app.add_option("--warmup", s.warmup, "unmeasured steps per mode");
  app.add_option("--bucket-mib", s.bucket_mib, "bucket cap");
  app.add_option("--first-bucket-mib", s.first_bucket_mib, "first bucket cap");
  app.add_option("--cuda-chunk-mib", s.cuda_chunk_mib, "--device cuda: chunk of the staging pipeline");
  app.add_flag("--all-in-buckets", s.in_buckets,
               "copy every host gradient into buckets, large ones too (DDP)");
  CLI11_PARSE(app, argc, argv);
  try {
    canopy::TrainingJob job = canopy::join_training_job();
    canopy::Communicator& comm = job.comm;
    std::unique_ptr<canopy::bench::Backward> backward =
        b.device == "cuda" ? canopy::bench::make_cuda_backward(b) : canopy::bench::make_host_backward(b);
    canopy::GradSyncOptions options;
    options.bucket_bytes = static_cast<std::size_t>(s.bucket_mib * (1 << 20));
    options.first_bucket_bytes = static_cast<std::size_t>(s.first_bucket_mib * (1 << 20));
    if (s.in_buckets) options.in_place_bytes = SIZE_MAX;
    options.cuda_chunk_bytes = static_cast<std::size_t>(s.cuda_chunk_mib * (1 << 20));
    canopy::GradientSynchronizer sync(comm, options);
    const auto layers = static_cast<std::size_t>(b.layers);
    for (std::size_t l = 0; l < layers; ++l) sync.add(fmt::format("layer{}", l), backward->gradient(l));
    const std::size_t buckets = sync.buckets().size();

    const Mode modes[] = {Mode::Overlap, Mode::After, Mode::ComputeOnly, Mode::CommOnly};
    std::vector<double> times[4], cpu[4], waits[4], done[4];
    for (int step = 0; step < s.warmup + s.steps; ++step)
      for (int m = 0; m < 4; ++m) {
        StepTime t = run_step(modes[m], sync, *backward, layers, step, comm);
        if (step >= s.warmup) {
          times[m].push_back(t.wall_ms);
          cpu[m].push_back(t.cpu_ms);
          waits[m].push_back(t.finish_wait_ms);
          done[m].push_back(static_cast<double>(t.buckets_done));
        }
      }
    if (comm.rank() == 0) {
      double overlap = median(times[0]), after = median(times[1]), compute = median(times[2]),
             net = median(times[3]);
      // Every layer has the same size: all of them or none are all-reduced in place.
      const bool in_place = b.device == "cpu" && b.layer_mib * (1 << 20) >= double(options.in_place_bytes);
      fmt::print("gradsync overlap: {} ranks, {} layers x {} MiB float32 = {} MiB, {} buckets{}, {}\n",
                 comm.size(), b.layers, b.layer_mib, b.layers * b.layer_mib, buckets,
                 in_place ? " (in place)" : "", backward->describe());
      fmt::print("{:>28} {:>10} {:>10} {:>12} {:>14}\n", "median per step (ms)", "wall", "cpu", "finish wait",
                 "buckets done");
      const char* names[] = {"overlapped (hooks)", "communication after backward", "backward alone",
                             "all-reduces alone"};
      for (int m : {2, 3, 1, 0})
        fmt::print("{:>28} {:>10.2f} {:>10.2f} {:>12.2f} {:>9} of {}\n", names[m], median(times[m]),
                   median(cpu[m]), median(waits[m]), m == 2 ? 0.0 : median(done[m]), m == 2 ? 0 : buckets);
      fmt::print("ratio after/overlap = {:.3f}   (ideal bound (compute+comm)/max(compute,comm) = {:.3f})\n",
                 after / overlap, (compute + net) / std::max(compute, net));
    }
    comm.barrier();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradsync_overlap_bench: %s\n", e.what());
    return 1;
  }
}
