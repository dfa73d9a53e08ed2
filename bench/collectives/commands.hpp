// canopy-bench's subcommands besides the sweep, as CLI11 subcommands: trace, ceiling, cpu, plot, compare,
// choice (each with --help).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace canopy::bench {

// What the chosen command does; it returns the process's exit status.
using Command = std::function<int()>;

// Adds the subcommands to `app`. When the command line names one, `chosen` is set to it during parsing.
void add_subcommands(CLI::App& app, Command& chosen);

// Runs `body`, turning every error into a message on stderr ("canopy-bench <name>: ...") and exit status 1,
// or CLI11's own report for a CLI11 error.
int run_guarded(CLI::App& app, const char* name, const Command& body);

}  // namespace canopy::bench
