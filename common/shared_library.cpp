#include "common/shared_library.hpp"

#include <dlfcn.h>

#include <utility>

#include "common/error.hpp"

namespace canopy {

SharedLibrary::SharedLibrary(std::vector<std::string> files, std::string needed_for, std::string install)
    : needed_for_(std::move(needed_for)) {
  std::string reasons;
  for (const std::string& file : files) {
    // RTLD_LOCAL: its symbols stay out of the program's namespace, where the forwarding definitions are.
    handle_ = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      file_ = file;
      return;
    }
    const char* why = ::dlerror();
    reasons += fmt::format("{}{}", reasons.empty() ? "" : "; ", why != nullptr ? why : file);
  }
  fail(ErrorCode::Config, "{} needs {}, which cannot be loaded ({}): {}", needed_for_,
       files.empty() ? std::string("a library") : files.back(), reasons, install);
}

void* SharedLibrary::symbol(const char* name) const {
  void* found = ::dlsym(handle_, name);
  if (found == nullptr)
    fail(ErrorCode::Config, "{}: {} has no {}: a newer version of it is needed", needed_for_, file_, name);
  return found;
}

}  // namespace canopy
