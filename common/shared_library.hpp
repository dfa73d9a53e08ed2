// A shared library loaded when a feature first needs it rather than linked into every program: each
// library a program links (with its own dependencies) is mapped, relocated and paged in by every rank of
// every job at start-up, where most jobs never use it. libcurl (the etcd store), libpmix (a PMIx launcher's
// exchange) and libibverbs (the verbs transport) are loaded so (docs/PERFORMANCE.md, *Start-up and scale*).
#pragma once

#include <string>
#include <vector>

namespace canopy {

class SharedLibrary {
 public:
  // Loads the first of `files` (paths or sonames) that loads, once per process: the handle is never closed,
  // since what was made through it may live until the process ends. Error(Config) naming the files, the
  // loader's reason, `needed_for` (what needs the library) and `install` (how to get it) where none loads.
  SharedLibrary(std::vector<std::string> files, std::string needed_for, std::string install);

  // The function `name`, Error(Config) where the library has none (too old a version).
  void* symbol(const char* name) const;
  const std::string& file() const { return file_; }

 private:
  void* handle_ = nullptr;
  std::string file_;  // the one that loaded
  std::string needed_for_;
};

// Defines the library's function `name` (as its header declares it, with the parameters and the arguments
// that pass them on) as a call of the library's own, found at the first call: a program, and the header's
// inline helpers and macros, call the library's functions as if it were linked, and it loads when first
// called. `library` is a function returning the loaded SharedLibrary (a failed load throws, and the next call
// tries again). The name in parentheses escapes the function-like macros some headers define over functions.
#define CANOPY_FORWARD_TO_LOADED(library, result, name, parameters, arguments)                 \
  extern "C" result(name) parameters {                                                         \
    static const auto loaded = reinterpret_cast<decltype(&(name))>((library)().symbol(#name)); \
    return loaded arguments;                                                                   \
  }

}  // namespace canopy
