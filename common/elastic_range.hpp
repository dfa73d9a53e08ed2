// The range of ranks an elastic job may run with, "MIN:MAX": canopy-run's --elastic and the
// CANOPY_ELASTIC variable it gives every rank (docs/LAUNCHER.md, "Elastic jobs").
#pragma once

#include <string>
#include <string_view>

namespace canopy {

struct ElasticRange {
  int min = 1;  // fewer ranks alive than this and the job fails
  int max = 1;  // never more ranks than this

  bool holds(int ranks) const { return min <= ranks && ranks <= max; }
  std::string text() const;  // "MIN:MAX"
};

// Parses "MIN:MAX" (1 <= MIN <= MAX); throws Error(Config) naming `source` (the flag or variable it
// came from) and the expected shape otherwise.
ElasticRange parse_elastic_range(std::string_view source, std::string_view text);

}  // namespace canopy
