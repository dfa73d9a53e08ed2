#include "rendezvous/curl_library.hpp"

#include <dlfcn.h>

#include <string>

#include "common/error.hpp"

namespace canopy::rendezvous {
namespace {

constexpr const char* kLibrary = "libcurl.so.4";

template <typename Function>
void resolve(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
  if (function == nullptr)
    fail(ErrorCode::Config, "etcd store: {} has no {}: libcurl 7.17 or later is needed", kLibrary, name);
}

CurlLibrary load() {
  // Never closed: the handles made through it live until the process ends.
  void* library = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    fail(ErrorCode::Config,
         "etcd store: {} cannot be loaded ({}): the etcd store needs libcurl (Debian: apt-get install "
         "libcurl4)",
         kLibrary, ::dlerror());
  CurlLibrary curl{};
  decltype(&curl_global_init) global_init = nullptr;
  resolve(library, "curl_global_init", global_init);
  resolve(library, "curl_easy_init", curl.easy_init);
  resolve(library, "curl_easy_cleanup", curl.easy_cleanup);
  resolve(library, "curl_easy_reset", curl.easy_reset);
  resolve(library, "curl_easy_setopt", curl.easy_setopt);
  resolve(library, "curl_easy_perform", curl.easy_perform);
  resolve(library, "curl_easy_getinfo", curl.easy_getinfo);
  resolve(library, "curl_easy_strerror", curl.easy_strerror);
  resolve(library, "curl_slist_append", curl.slist_append);
  resolve(library, "curl_slist_free_all", curl.slist_free_all);
  if (global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    fail(ErrorCode::System, "etcd store: libcurl could not be initialized (curl_global_init)");
  return curl;
}

}  // namespace

const CurlLibrary& curl_library() {
  static const CurlLibrary curl = load();  // a failed load throws, and the next call tries again
  return curl;
}

}  // namespace canopy::rendezvous
