// `canopy-bench compare`: Canopy's rows beside a peer's (Open MPI through bench/compare's mpi bench,
// same JSON keys), matched by collective, rank count and size, with time and busbw ratios.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace canopy::bench {

// One line per (collective, ranks, bytes) present in both: Canopy's fastest algorithm there, its time
// and busbw, the peer's, Canopy/peer ratios (time < 1 and busbw > 1 mean Canopy is faster) and, when
// Canopy's rows carry a measured ceiling, both busbw as a percentage of it. Throws
// std::invalid_argument when no row matches.
std::string compare_table(const nlohmann::ordered_json& canopy_rows, const nlohmann::ordered_json& peer_rows,
                          const std::string& peer_name);

// Reads a JSON array of rows from `path` (canopy-bench --json, or several of them concatenated as one
// array). Throws canopy::Error(Config) naming the file when it cannot be read or parsed.
nlohmann::ordered_json read_rows(const std::string& path);

}  // namespace canopy::bench
