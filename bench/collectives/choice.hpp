// `canopy-bench choice`: how good is `auto`? For every size that a sweep ran both with `--algo auto` and
// with explicit algorithms (`--algo all,auto`), auto's measured time beside the fastest algorithm's measured time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace canopy::bench {

// One line per (collective, ranks, bytes, in place) that has an auto row and at least one explicit row:
// the algorithm auto chose, its time, the fastest explicit algorithm and its time, auto / fastest, and
// the model's prediction for both. Ends with the geometric mean and the worst of auto / fastest.
// Throws std::invalid_argument when no size has both.
std::string choice_table(const nlohmann::ordered_json& rows);

}  // namespace canopy::bench
