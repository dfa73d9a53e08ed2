// canopy-bench's subcommands besides the sweep; each parses its own arguments (argv[0] is its name)
// and returns the process exit status.
#pragma once

namespace canopy::bench {

int trace_command(int argc, char** argv);    // canopy-bench trace <collective> --algo A -p P ...
int ceiling_command(int argc, char** argv);  // canopy-bench ceiling [--bytes 64M] [--repetitions 5]
int cpu_command(int argc, char** argv);      // canopy-bench cpu [--times N]
int plot_command(int argc, char** argv);     // canopy-bench plot OUT.svg ROWS.json...
int compare_command(int argc, char** argv);  // canopy-bench compare CANOPY.json PEER.json [--peer mpi]
int choice_command(int argc, char** argv);   // canopy-bench choice ROWS.json...

}  // namespace canopy::bench
